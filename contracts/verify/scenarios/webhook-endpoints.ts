/**
 * Scenarios of the `webhooks` tag, endpoints: register, list, read, verify, update (the pause and
 * the delivery policy and the filter included), test-send, rotate the secret, delete; trying a
 * filter on a sample; and the client certificate deliveries present.
 */
import { createHash, X509Certificate } from 'node:crypto';
import { listOperations, type Json, type Operation } from '../../contract.ts';
import { bearer } from '../http.ts';
import { concretePath, type Session } from '../session.ts';
import {
  type Scenario,
  body,
  json,
  names,
  pagingChecks,
  postJson,
  probeCreated,
  probeGet,
  probeUnknownId,
  shows,
  tokenFor,
  validBody,
} from './common.ts';

/** A delivery policy no endpoint may have: each value one past its bound, or not of its type. */
const POLICY_REFUSALS: [string, Json][] = [
  ['rate_limit_per_second', { rate_limit_per_second: 0 }],
  ['rate_limit_per_second', { rate_limit_per_second: 10001 }],
  ['rate_limit_per_second', { rate_limit_per_second: 2.5 }],
  ['max_in_flight', { max_in_flight: 0 }],
  ['max_in_flight', { max_in_flight: 1001 }],
  ['ordering', { ordering: 'fifo' }],
  ['signing', { signing: 'rsa' }],
  ['disabled', { disabled: null }],
  ['disabled', { disabled: 'yes' }],
  // A filter that does not compile: a syntax error, a type error, a nested macro, too long.
  ['filter', { filter: 'data.total >' }],
  ['filter', { filter: 'type == 42' }],
  ['filter', { filter: 'data.a.all(x, data.b.exists(y, y == x))' }],
  ['filter', { filter: `data.a == "${'x'.repeat(4100)}"` }],
  ['filter', { filter: '' }],
];

const clip = (s: string) => (s.length > 48 ? `${s.slice(0, 40)}… (${s.length} characters)` : s);

/** A filter every verifier target compiles (docs/webhooks.md, "Payload filters"). */
export const PROBE_FILTER = 'type == "inference.completed" && has(data.model)';

/**
 * The tenant's pause and the delivery policy through PATCH: each field set (its bounds included)
 * is shown by the answer and by a read after it; out of range, of the wrong type or unknown → 400
 * naming the field. The endpoint ends with the defaults again (not paused, no limits, no order).
 */
async function policyScenarios(s: Session, op: Operation): Promise<void> {
  const getOp = listOperations(s.doc).find((o) => o.operationId === 'getEndpoint')!;
  const steps: [string, Json][] = [
    ['pause (disabled: true)', { disabled: true }],
    ['resume (disabled: false)', { disabled: false }],
    ['rate_limit_per_second 1', { rate_limit_per_second: 1 }],
    ['rate_limit_per_second 10000', { rate_limit_per_second: 10000 }],
    ['max_in_flight 1', { max_in_flight: 1 }],
    ['max_in_flight 1000', { max_in_flight: 1000 }],
    ['ordering key', { ordering: 'key' }],
    ['filter set', { filter: PROBE_FILTER }],
    ['filter removed (null)', { filter: null }],
    [
      'back to the defaults (nulls, ordering none)',
      { rate_limit_per_second: null, max_in_flight: null, ordering: 'none' },
    ],
  ];
  if (!s.state.endpointId)
    for (const [what] of steps) s.record(op, `${what} → 200, shown`, 'skip', 'no endpoint was created');
  else
    for (const [what, change] of steps) {
      const ex = await s.probe(
        op,
        `${what} → 200, shown`,
        { method: 'PATCH', path: concretePath(op, s), ...(await json(s, op, change)) },
        { status: [200], then: shows(change) },
      );
      if (ex?.status !== 200) continue;
      await s.probe(
        op,
        `${what}: a read after shows it`,
        { method: 'GET', path: concretePath(getOp, s), headers: bearer(await s.token(getOp.scopes![0])) },
        { status: [200], documented: { '200': getOp.responses['200'] }, then: shows(change) },
      );
    }
  // Faults are found before the endpoint is looked up: these are 400 whether or not one was created.
  for (const [field, change] of POLICY_REFUSALS)
    await s.probe(
      op,
      `${field} ${clip(JSON.stringify(Object.values(change)[0]))} → 400 naming it`,
      { method: 'PATCH', path: concretePath(op, s), ...(await json(s, op, change)) },
      { status: [400], then: names(`$.${field}`) },
    );
  await s.probe(
    op,
    'an unknown field (paused) → 400 naming it',
    { method: 'PATCH', path: concretePath(op, s), ...(await json(s, op, { paused: true })) },
    { status: [400], then: names('$.paused') },
  );
  s.record(
    op,
    "another tenant's endpoint → 404",
    'skip',
    "the verifier has one tenant's client (test/webhooks/endpoint-update.test.ts covers it)",
  );
}

export const ENDPOINT_SCENARIOS: Record<string, Scenario> = {
  async createEndpoint(s, op) {
    // Without --webhook-url the default target does not resolve, and a refusal (422) is the documented answer.
    const own = s.opts.webhookUrl !== undefined;
    const ex = await s.probe(
      op,
      own ? 'valid registration → 201 with the secret' : 'registration of an unresolvable target → 201 or 422',
      await postJson(s, op, validBody(s, op.operationId)),
      {
        status: own ? [201] : [201, 422],
        then: (ex) =>
          ex.status === 422
            ? []
            : [
                ...(body(ex).url === validBody(s, op.operationId)!.url ? [] : ['url not echoed']),
                ...shows({
                  disabled: false,
                  rate_limit_per_second: null,
                  max_in_flight: null,
                  ordering: 'none',
                  filter: null,
                  filter_errors: null,
                })(ex),
              ],
      },
    );
    if (ex?.status === 201) s.state.endpointId = body(ex).id;
    await s.probe(
      op,
      'rate_limit_per_second 10001, max_in_flight 0, ordering "fifo" → 400 naming each',
      await postJson(s, op, {
        ...validBody(s, op.operationId),
        rate_limit_per_second: 10001,
        max_in_flight: 0,
        ordering: 'fifo',
      }),
      { status: [400], then: names('$.rate_limit_per_second', '$.max_in_flight', '$.ordering') },
    );
    await s.probe(
      op,
      'a filter that does not compile → 400 naming $.filter (and nothing registered)',
      await postJson(s, op, { ...validBody(s, op.operationId), filter: 'type ==\n  "x" &&& 1' }),
      {
        status: [400],
        then: (ex) => [
          ...names('$.filter')(ex),
          ...(/line 2, column \d+/.test(String(body(ex)?.detail)) ? [] : ['the detail names no line and column']),
        ],
      },
    );
    await s.probe(
      op,
      'event filter item that is not an event type → 400',
      await postJson(s, op, { ...validBody(s, op.operationId), events: ['no.such.kind'] }),
      { status: [400] },
    );
    await s.probe(
      op,
      'empty event filter → 400',
      await postJson(s, op, { ...validBody(s, op.operationId), events: [] }),
      { status: [400] },
    );
  },

  async listEndpoints(s, op) {
    await probeGet(s, op, `${op.path}?limit=1000`, 'GET → 200, lists the created endpoint', (ex) =>
      !s.state.endpointId || body(ex).data.some((e: Json) => e.id === s.state.endpointId)
        ? []
        : [`endpoint ${s.state.endpointId} is not listed`],
    );
    await pagingChecks(s, op);
  },

  async getEndpoint(s, op) {
    await probeCreated(s, op, 'read after create → 200', (ex) =>
      body(ex).id === s.state.endpointId && !('secret' in body(ex))
        ? []
        : ['wrong endpoint, or the secret is shown again'],
    );
    await probeUnknownId(s, op, 'unknown id → 404');
  },

  async verifyEndpoint(s, op) {
    await probeCreated(s, op, 're-send the ping → 200');
    await probeUnknownId(s, op, 'unknown id → 404');
  },

  async updateEndpoint(s, op) {
    const change = validBody(s, op.operationId)!;
    await probeCreated(
      s,
      op,
      'update → 200, the change echoed',
      (ex) =>
        body(ex).description === change.description && !('secret' in body(ex))
          ? []
          : ['the new description is not echoed, or the secret is shown'],
      change,
    );
    await s.probe(
      op,
      'empty body → 400',
      { method: 'PATCH', path: concretePath(op, s), ...(await json(s, op, {})) },
      { status: [400] },
    );
    await s.probe(
      op,
      'a field an update cannot change (secret) → 400',
      { method: 'PATCH', path: concretePath(op, s), ...(await json(s, op, { secret: 'whsec_contract_probe' })) },
      { status: [400] },
    );
    await s.probe(
      op,
      'unknown id → 404',
      {
        method: 'PATCH',
        path: concretePath(op, s, { endpoint_id: 'ep_contract_probe_missing' }),
        ...(await json(s, op, change)),
      },
      { status: [404] },
    );
    await policyScenarios(s, op);
  },

  async testWebhookFilter(s, op) {
    const event = { type: 'inference.completed', data: { model: 'contract-probe' } };
    const verdict = (matched: boolean, error: RegExp | null) => (ex: Parameters<typeof body>[0]) => {
      const b = body(ex);
      const faults: string[] = [];
      if (b?.matched !== matched) faults.push(`matched is ${b?.matched}, not ${matched}`);
      if (error === null ? b?.error !== null : !error.test(String(b?.error))) faults.push(`error is ${b?.error}`);
      return faults;
    };
    await s.probe(
      op,
      'a filter the sample passes → 200 matched',
      await postJson(s, op, { filter: PROBE_FILTER, event }),
      {
        status: [200],
        then: verdict(true, null),
      },
    );
    await s.probe(
      op,
      'a filter the sample fails → 200 not matched',
      await postJson(s, op, { filter: 'data.model == "other"', event }),
      { status: [200], then: verdict(false, null) },
    );
    await s.probe(
      op,
      'a filter whose evaluation fails → 200 not matched, with the error',
      await postJson(s, op, { filter: 'data.missing.x == 1', event }),
      { status: [200], then: verdict(false, /missing/) },
    );
    await s.probe(
      op,
      'a filter that does not compile → 400 naming $.filter',
      await postJson(s, op, { filter: 'data.model ==', event }),
      { status: [400], then: names('$.filter') },
    );
  },

  async testEndpoint(s, op) {
    await probeCreated(s, op, "test send → 200 with the receiver's answer", (ex) => {
      const { ok, status } = body(ex);
      const twoHundreds = status !== null && status >= 200 && status < 300;
      return ok === twoHundreds ? [] : [`ok is ${ok} for status ${status}`];
    });
    await s.probe(
      op,
      'a reserved type → 400',
      { method: 'POST', path: concretePath(op, s), ...(await json(s, op, { type: 'credential.rotated', data: {} })) },
      { status: [400] },
    );
    await probeUnknownId(s, op, 'unknown id → 404');
  },

  async rotateEndpointSecret(s, op) {
    await probeCreated(
      s,
      op,
      'rotate the secret → 200 with a new one',
      (ex) =>
        body(ex).previous_secret_expires_at ? [] : ['no previous_secret_expires_at after a rotation with an overlap'],
      { overlap_seconds: 60 },
    );
    await s.probe(
      op,
      'a negative overlap → 400',
      { method: 'POST', path: concretePath(op, s), ...(await json(s, op, { overlap_seconds: -1 })) },
      { status: [400, 404] },
    );
    await probeUnknownId(s, op, 'unknown id → 404');
  },

  async deleteEndpoint(s, op) {
    if (!s.state.endpointId) s.record(op, 'delete → 204, then 404', 'skip', 'no endpoint was created');
    else {
      const ex = await s.probe(
        op,
        'delete → 204',
        { method: 'DELETE', path: concretePath(op, s), headers: await tokenFor(s, op) },
        { status: [204] },
      );
      if (ex?.status === 204) {
        const read = await s.token('webhooks:read').catch(() => null);
        if (read)
          await s.probe(
            op,
            'read after delete → 404',
            { method: 'GET', path: concretePath(op, s), headers: bearer(read) },
            { status: [404], documented: { '404': op.responses['404'] } },
          );
        await s.probe(
          op,
          'delete again → 404',
          { method: 'DELETE', path: concretePath(op, s), headers: await tokenFor(s, op) },
          { status: [404] },
        );
      }
    }
  },

  async getEndpointJwks(s, op) {
    // Public: no token. An unknown id and an hmac endpoint are the same 404; an ed25519 one has its key.
    const unknown = concretePath(op, s, { endpoint_id: 'ep_contract_probe_missing' });
    await s.probe(op, 'unknown id → 404, no token needed', { method: 'GET', path: unknown }, { status: [404] });
    if (!s.state.endpointId) {
      s.record(op, 'an ed25519 endpoint → 200 with its key', 'skip', 'no endpoint was created');
      return;
    }
    const update = listOperations(s.doc).find((o) => o.operationId === 'updateEndpoint')!;
    const patch = async (signing: string) =>
      s.probe(
        update,
        `signing ${signing} → 200, shown`,
        { method: 'PATCH', path: concretePath(update, s), ...(await json(s, update, { signing })) },
        { status: [200], then: (ex) => (body(ex).signing === signing ? [] : [`signing is ${body(ex).signing}`]) },
      );
    await patch('ed25519');
    await s.probe(
      op,
      'an ed25519 endpoint → 200 with an Ed25519 key, cacheable',
      { method: 'GET', path: concretePath(op, s) },
      {
        status: [200],
        then: (ex) => [
          ...(body(ex).keys?.[0]?.crv === 'Ed25519' ? [] : ['no Ed25519 key']),
          ...(/max-age=\d+/.test(ex.headers.get('cache-control') ?? '') ? [] : ['no max-age']),
        ],
      },
    );
    await patch('hmac');
    await s.probe(op, 'an hmac endpoint → 404', { method: 'GET', path: concretePath(op, s) }, { status: [404] });
  },

  async getDeliveryClientCertificate(s, op) {
    await s.probe(
      op,
      'GET → 200 with the chain and its thumbprint, or 404 NOT_FOUND when none is configured',
      { method: 'GET', path: op.path },
      {
        status: [200, 404],
        then: (ex) => {
          if (ex.status === 404) return body(ex)?.code === 'NOT_FOUND' ? [] : [`404 with code ${body(ex)?.code}`];
          let leaf: X509Certificate;
          try {
            leaf = new X509Certificate(String(body(ex).pem));
          } catch (err) {
            return [`pem does not start with a readable certificate: ${(err as Error).message}`];
          }
          const sha256 = createHash('sha256').update(leaf.raw).digest('hex');
          return [
            ...(body(ex).sha256 === sha256 ? [] : [`sha256 is ${body(ex).sha256}, the certificate's is ${sha256}`]),
            ...(body(ex).subject === leaf.subject ? [] : [`subject is not the certificate's (${leaf.subject})`]),
          ];
        },
      },
    );
  },
};
