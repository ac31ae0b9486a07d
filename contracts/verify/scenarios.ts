/**
 * What each operation does right: generated valid inputs are accepted, read-after-create works,
 * delete leads to 404, paging and filters answer in shape. Keyed by operationId; an operation of
 * the contract without a scenario is itself a failure, so the verifier grows with the contract.
 */
import { createHash, X509Certificate } from 'node:crypto';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { listOperations, type Json, type Operation } from '../contract.ts';
import { bearer, jsonBody, send, type Exchange } from './http.ts';
import { concretePath, type Session } from './session.ts';

type Scenario = (s: Session, op: Operation) => Promise<void>;

const body = (ex: Exchange) => ex.json as Json;
const tokenFor = async (s: Session, op: Operation) => bearer(await s.token(op.scopes![0]));
const json = async (s: Session, op: Operation, value: unknown) => {
  const b = jsonBody(value);
  return { headers: { ...(await tokenFor(s, op)), ...b.headers }, body: b.body };
};

/** A valid body per operation, the base of the crafted bad ones. */
export function validBody(s: Session, operationId: string): Json | undefined {
  switch (operationId) {
    case 'issueToken':
      return { grant_type: 'client_credentials', client_id: s.opts.clientId, client_secret: s.opts.clientSecret };
    case 'createEndpoint':
      return {
        url: s.opts.webhookUrl ?? 'https://webhook-receiver.invalid/sluice',
        events: ['inference.completed', 'pipeline.failed'],
        metadata: { source: 'sluice contract verify' },
      };
    case 'updateEndpoint':
      return { description: 'sluice contract verify', metadata: { source: 'sluice contract verify', updated: true } };
    case 'testEndpoint':
      return { type: 'inference.completed', data: { model: 'contract-probe', latency_ms: 1 } };
    case 'publishEvent':
      return { type: 'inference.completed', data: { model: 'contract-probe', latency_ms: 1 } };
    case 'publishEventBatch':
      return { events: [{ type: 'inference.completed', data: { model: 'contract-probe', latency_ms: 1 } }] };
    case 'replayDlq':
      return { endpoint_id: s.state.endpointId ?? 'ep_contract_probe_missing' };
    case 'revokeClient':
      return { client_id: 'cl_contract_probe_missing', reason: 'sluice contract verify' };
    default:
      return undefined;
  }
}

/** A 400 whose errors[] names each of `paths` (`$.ordering_key`). */
const names =
  (...paths: string[]) =>
  (ex: Exchange): string[] => {
    const got: string[] = Array.isArray(body(ex)?.errors) ? body(ex).errors.map((e: Json) => e.path) : [];
    return paths.filter((p) => !got.includes(p)).map((p) => `errors[] does not name ${p} (it names ${got.join(', ')})`);
  };

/** The members of `change` the endpoint view `ex` does not show as changed. */
const shows =
  (change: Json) =>
  (ex: Exchange): string[] =>
    Object.entries(change)
      .filter(([k, v]) => JSON.stringify(body(ex)?.[k]) !== JSON.stringify(v))
      .map(([k, v]) => `${k} is ${JSON.stringify(body(ex)?.[k])}, not ${JSON.stringify(v)}`);

/** A delivery policy no endpoint may have: each value one past its bound, or not of its type. */
const POLICY_REFUSALS: [string, Json][] = [
  ['rate_limit_per_second', { rate_limit_per_second: 0 }],
  ['rate_limit_per_second', { rate_limit_per_second: 10001 }],
  ['rate_limit_per_second', { rate_limit_per_second: 2.5 }],
  ['max_in_flight', { max_in_flight: 0 }],
  ['max_in_flight', { max_in_flight: 1001 }],
  ['ordering', { ordering: 'fifo' }],
  ['disabled', { disabled: null }],
  ['disabled', { disabled: 'yes' }],
];

/** An ordering key of `bytes` bytes as UTF-8 (two-byte characters, so a character count would pass it). */
const orderingKey = (bytes: number) => 'é'.repeat(Math.floor(bytes / 2)) + (bytes % 2 ? 'k' : '');

/** The operation on an endpoint id that does not exist: 404. */
const probeUnknownEndpoint = async (s: Session, op: Operation, what: string) =>
  s.probe(
    op,
    what,
    {
      method: op.method,
      path: concretePath(op, s, { endpoint_id: 'ep_contract_probe_missing' }),
      headers: await tokenFor(s, op),
    },
    { status: [404] },
  );

const pagingChecks = (s: Session, op: Operation): Promise<unknown> =>
  Promise.all([
    tokenFor(s, op).then((h) =>
      s.probe(op, 'limit=0 → 400', { method: 'GET', path: `${op.path}?limit=0`, headers: h }, { status: [400] }),
    ),
    tokenFor(s, op).then((h) =>
      s.probe(op, 'limit=1001 → 400', { method: 'GET', path: `${op.path}?limit=1001`, headers: h }, { status: [400] }),
    ),
    tokenFor(s, op).then((h) =>
      s.probe(
        op,
        'limit=1 → at most one item',
        { method: 'GET', path: `${op.path}?limit=1`, headers: h },
        {
          status: [200],
          then: (ex) => (body(ex).data.length <= 1 ? [] : [`${body(ex).data.length} items for limit=1`]),
        },
      ),
    ),
  ]);

const dataPlane: Scenario = async (s, op) => {
  const path = concretePath(op, s);
  const hasBody = op.requestBody !== null;
  await s.probe(
    op,
    `scoped token (${op.scopes![0]}) → passes the edge`,
    {
      method: op.method,
      path,
      headers: { ...(await tokenFor(s, op)), ...(hasBody ? { 'content-type': 'application/json' } : {}) },
      body: hasBody ? '{"probe":true}' : undefined,
    },
    {
      status: [200, 201, 202, 204, 400, 404, 409, 422],
      upstreamMayBeAbsent: true,
    },
  );
};

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
      `${field} ${JSON.stringify(Object.values(change)[0])} → 400 naming it`,
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

/**
 * listEventTypes: the type publishEvent published shows within 20 s (the fan-out counts an event as it
 * reads it and reports every 5 s), as last published no earlier than it was sent (30 s allowed for clocks).
 */
async function publishedTypeListed(s: Session, op: Operation): Promise<void> {
  const type = s.state.publishedType;
  const what = 'a type published by publishEvent is listed, as last published no earlier, within 20 s';
  if (!type || !s.state.publishedAt) {
    s.record(op, what, 'skip', 'publishEvent published nothing');
    return;
  }
  // The fan-out counts an event as it reads it and reports every 5 s; the clocks may differ by a little.
  const since = Number(s.state.publishedAt) - 30_000;
  const listed = (ex: Exchange) => {
    const t = (body(ex)?.data ?? []).find((d: Json) => d.type === type);
    return t !== undefined && Date.parse(t.last_published_at) >= since;
  };
  // Read, unrecorded, until it is listed or the time is up; then the one recorded check.
  const deadline = Date.now() + 20_000;
  const read = async () =>
    send(s.opts.baseUrl, { method: 'GET', path: op.path, headers: await tokenFor(s, op) }).catch(() => null);
  for (let ex = await read(); !(ex?.status === 200 && listed(ex)) && Date.now() < deadline; ex = await read())
    await new Promise((r) => setTimeout(r, 500));
  const waited = ((Date.now() - Number(s.state.publishedAt)) / 1000).toFixed(1);
  await s.probe(
    op,
    what,
    { method: 'GET', path: op.path, headers: await tokenFor(s, op) },
    {
      status: [200],
      then: (ex) =>
        listed(ex)
          ? []
          : [`${type}, published ${waited} s ago, is not listed as published since (is a dispatcher running?)`],
    },
  );
}

export const SCENARIOS: Record<string, Scenario> = {
  async getContract(s, op) {
    await s.probe(
      op,
      'GET without a token → 200, the same contract',
      { method: 'GET', path: op.path },
      {
        status: [200],
        then: (ex) =>
          JSON.stringify(ex.json) === JSON.stringify(s.doc)
            ? []
            : ['the served contract differs from contracts/openapi.yaml'],
      },
    );
  },

  async issueToken(s, op) {
    const valid = validBody(s, op.operationId)!;
    await s.probe(
      op,
      'JSON client_credentials → 200, expires_in 900',
      { method: 'POST', path: op.path, ...jsonBody(valid) },
      {
        status: [200],
        then: (ex) => {
          const token = body(ex).access_token as string;
          const claims = decodeJwt(token);
          const header = decodeProtectedHeader(token);
          const faults: string[] = [];
          if (header.typ !== 'at+jwt') faults.push(`typ is ${header.typ}, not at+jwt`);
          if (claims.exp! - claims.iat! !== 900) faults.push(`exp - iat is ${claims.exp! - claims.iat!}, not 900`);
          if (claims.client_id !== s.opts.clientId) faults.push('client_id claim differs');
          return faults;
        },
      },
    );
    const form = new URLSearchParams({ ...valid }).toString();
    await s.probe(
      op,
      'form-encoded client_credentials → 200',
      { method: 'POST', path: op.path, headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form },
      { status: [200] },
    );
    const basic = Buffer.from(
      `${encodeURIComponent(s.opts.clientId)}:${encodeURIComponent(s.opts.clientSecret)}`,
    ).toString('base64');
    await s.probe(
      op,
      'HTTP Basic client authentication → 200',
      {
        method: 'POST',
        path: op.path,
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${basic}` },
        body: 'grant_type=client_credentials',
      },
      { status: [200] },
    );
    const oauth = (code: string) => (ex: Exchange) =>
      body(ex).error === code ? [] : [`error is ${body(ex).error}, not ${code}`];
    await s.probe(
      op,
      'wrong secret → 401 invalid_client',
      { method: 'POST', path: op.path, ...jsonBody({ ...valid, client_secret: 'wrong-secret' }) },
      { status: [401], then: oauth('invalid_client') },
    );
    await s.probe(
      op,
      'unknown grant_type → 400 unsupported_grant_type',
      { method: 'POST', path: op.path, ...jsonBody({ ...valid, grant_type: 'password' }) },
      { status: [400], then: oauth('unsupported_grant_type') },
    );
    await s.probe(
      op,
      'ungranted scope → 400 invalid_scope',
      { method: 'POST', path: op.path, ...jsonBody({ ...valid, scope: 'nonexistent:scope' }) },
      { status: [400], then: oauth('invalid_scope') },
    );
    const narrow = s.grantedScopes[0];
    if (narrow) {
      await s.probe(
        op,
        'scope parameter narrows the token',
        { method: 'POST', path: op.path, ...jsonBody({ ...valid, scope: narrow }) },
        { status: [200], then: (ex) => (body(ex).scope === narrow ? [] : [`scope is "${body(ex).scope}"`]) },
      );
    }
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

  async getJwks(s, op) {
    const token = await s.token();
    const kid = decodeProtectedHeader(token).kid;
    await s.probe(
      op,
      'GET → 200, holds the signing key',
      { method: 'GET', path: op.path },
      {
        status: [200],
        then: (ex) => (body(ex).keys.some((k: Json) => k.kid === kid) ? [] : [`no key with kid ${kid}`]),
      },
    );
  },

  async getAuthorizationServerMetadata(s, op) {
    await s.probe(
      op,
      'GET → 200, names the token endpoint',
      { method: 'GET', path: op.path },
      {
        status: [200],
        then: (ex) =>
          String(body(ex).token_endpoint).endsWith('/v1/auth/token')
            ? []
            : [`token_endpoint is ${body(ex).token_endpoint}`],
      },
    );
  },

  async createEndpoint(s, op) {
    // Without --webhook-url the default target does not resolve, and a refusal (422) is the documented answer.
    const own = s.opts.webhookUrl !== undefined;
    const ex = await s.probe(
      op,
      own ? 'valid registration → 201 with the secret' : 'registration of an unresolvable target → 201 or 422',
      { method: 'POST', path: op.path, ...(await json(s, op, validBody(s, op.operationId))) },
      {
        status: own ? [201] : [201, 422],
        then: (ex) =>
          ex.status === 422
            ? []
            : [
                ...(body(ex).url === validBody(s, op.operationId)!.url ? [] : ['url not echoed']),
                ...shows({ disabled: false, rate_limit_per_second: null, max_in_flight: null, ordering: 'none' })(ex),
              ],
      },
    );
    if (ex?.status === 201) s.state.endpointId = body(ex).id;
    await s.probe(
      op,
      'rate_limit_per_second 10001, max_in_flight 0, ordering "fifo" → 400 naming each',
      {
        method: 'POST',
        path: op.path,
        ...(await json(s, op, {
          ...validBody(s, op.operationId),
          rate_limit_per_second: 10001,
          max_in_flight: 0,
          ordering: 'fifo',
        })),
      },
      { status: [400], then: names('$.rate_limit_per_second', '$.max_in_flight', '$.ordering') },
    );
    await s.probe(
      op,
      'event filter item that is not an event type → 400',
      {
        method: 'POST',
        path: op.path,
        ...(await json(s, op, { ...validBody(s, op.operationId), events: ['no.such.kind'] })),
      },
      { status: [400] },
    );
    await s.probe(
      op,
      'empty event filter → 400',
      { method: 'POST', path: op.path, ...(await json(s, op, { ...validBody(s, op.operationId), events: [] })) },
      { status: [400] },
    );
  },

  async listEndpoints(s, op) {
    await s.probe(
      op,
      'GET → 200, lists the created endpoint',
      { method: 'GET', path: `${op.path}?limit=1000`, headers: await tokenFor(s, op) },
      {
        status: [200],
        then: (ex) =>
          !s.state.endpointId || body(ex).data.some((e: Json) => e.id === s.state.endpointId)
            ? []
            : [`endpoint ${s.state.endpointId} is not listed`],
      },
    );
    await pagingChecks(s, op);
  },

  async getEndpoint(s, op) {
    if (!s.state.endpointId) s.record(op, 'read after create → 200', 'skip', 'no endpoint was created');
    else {
      await s.probe(
        op,
        'read after create → 200',
        { method: 'GET', path: concretePath(op, s), headers: await tokenFor(s, op) },
        {
          status: [200],
          then: (ex) =>
            body(ex).id === s.state.endpointId && !('secret' in body(ex))
              ? []
              : ['wrong endpoint, or the secret is shown again'],
        },
      );
    }
    await probeUnknownEndpoint(s, op, 'unknown id → 404');
  },

  async verifyEndpoint(s, op) {
    if (!s.state.endpointId) s.record(op, 're-send the ping → 200', 'skip', 'no endpoint was created');
    else
      await s.probe(
        op,
        're-send the ping → 200',
        { method: 'POST', path: concretePath(op, s), headers: await tokenFor(s, op) },
        { status: [200] },
      );
    await probeUnknownEndpoint(s, op, 'unknown id → 404');
  },

  async updateEndpoint(s, op) {
    const change = validBody(s, op.operationId)!;
    if (!s.state.endpointId) s.record(op, 'update → 200, the change echoed', 'skip', 'no endpoint was created');
    else
      await s.probe(
        op,
        'update → 200, the change echoed',
        { method: 'PATCH', path: concretePath(op, s), ...(await json(s, op, change)) },
        {
          status: [200],
          then: (ex) =>
            body(ex).description === change.description && !('secret' in body(ex))
              ? []
              : ['the new description is not echoed, or the secret is shown'],
        },
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

  async testEndpoint(s, op) {
    const what = "test send → 200 with the receiver's answer";
    if (!s.state.endpointId) s.record(op, what, 'skip', 'no endpoint was created');
    else
      await s.probe(
        op,
        what,
        { method: 'POST', path: concretePath(op, s), headers: await tokenFor(s, op) },
        {
          status: [200],
          then: (ex) => {
            const { ok, status } = body(ex);
            const twoHundreds = status !== null && status >= 200 && status < 300;
            return ok === twoHundreds ? [] : [`ok is ${ok} for status ${status}`];
          },
        },
      );
    await s.probe(
      op,
      'a reserved type → 400',
      { method: 'POST', path: concretePath(op, s), ...(await json(s, op, { type: 'credential.rotated', data: {} })) },
      { status: [400] },
    );
    await probeUnknownEndpoint(s, op, 'unknown id → 404');
  },

  async listEndpointAttempts(s, op) {
    if (!s.state.endpointId) s.record(op, 'GET → 200', 'skip', 'no endpoint was created');
    else {
      await s.probe(
        op,
        'GET → 200, newest first, only this endpoint',
        { method: 'GET', path: concretePath(op, s), headers: await tokenFor(s, op) },
        {
          status: [200],
          then: (ex) => {
            const at = body(ex).data.map((a: Json) => Date.parse(a.at));
            return at.every((t: number, i: number) => i === 0 || t <= at[i - 1])
              ? []
              : ['attempts are not newest first'];
          },
        },
      );
      for (const [q, what] of [
        ['limit=0', 'limit=0 → 400'],
        ['limit=1001', 'limit=1001 → 400'],
        ['event_id=%20', 'malformed event_id → 400'],
      ]) {
        await s.probe(
          op,
          what,
          { method: 'GET', path: `${concretePath(op, s)}?${q}`, headers: await tokenFor(s, op) },
          { status: [400] },
        );
      }
    }
    await probeUnknownEndpoint(s, op, 'unknown endpoint → 404');
  },

  async getWebhookStats(s, op) {
    await s.probe(
      op,
      'GET → 200, 60 points that add up to the totals',
      { method: 'GET', path: op.path, headers: await tokenFor(s, op) },
      {
        status: [200],
        then: (ex) => {
          const b = body(ex);
          const sum = b.series.reduce((n: number, p: Json) => n + p.attempts, 0);
          return sum === b.totals.attempts ? [] : [`the series holds ${sum} attempts, the totals ${b.totals.attempts}`];
        },
      },
    );
    if (s.state.endpointId) {
      await s.probe(
        op,
        'filtered by endpoint_id → 200, that endpoint only',
        {
          method: 'GET',
          path: `${op.path}?endpoint_id=${encodeURIComponent(s.state.endpointId)}`,
          headers: await tokenFor(s, op),
        },
        {
          status: [200],
          then: (ex) =>
            body(ex).endpoints.every((e: Json) => e.endpoint_id === s.state.endpointId)
              ? []
              : ['other endpoints listed'],
        },
      );
    }
    await s.probe(
      op,
      'unknown endpoint_id → 404',
      { method: 'GET', path: `${op.path}?endpoint_id=ep_contract_probe_missing`, headers: await tokenFor(s, op) },
      { status: [404] },
    );
  },

  async listEventTypes(s, op) {
    await s.probe(
      op,
      'GET → 200, busiest first, each type once',
      { method: 'GET', path: op.path, headers: await tokenFor(s, op) },
      {
        status: [200],
        then: (ex) => {
          const data = body(ex).data as Json[];
          const faults: string[] = [];
          if (data.some((d, i) => i > 0 && d.count > data[i - 1].count)) faults.push('types are not busiest first');
          if (new Set(data.map((d) => d.type)).size !== data.length) faults.push('a type is listed twice');
          return faults;
        },
      },
    );
    await publishedTypeListed(s, op);
  },

  async rotateEndpointSecret(s, op) {
    if (!s.state.endpointId) s.record(op, 'rotate the secret → 200 with a new one', 'skip', 'no endpoint was created');
    else
      await s.probe(
        op,
        'rotate the secret → 200 with a new one',
        { method: 'POST', path: concretePath(op, s), ...(await json(s, op, { overlap_seconds: 60 })) },
        {
          status: [200],
          then: (ex) =>
            body(ex).previous_secret_expires_at
              ? []
              : ['no previous_secret_expires_at after a rotation with an overlap'],
        },
      );
    await s.probe(
      op,
      'a negative overlap → 400',
      { method: 'POST', path: concretePath(op, s), ...(await json(s, op, { overlap_seconds: -1 })) },
      { status: [400, 404] },
    );
    await probeUnknownEndpoint(s, op, 'unknown id → 404');
  },

  async publishEvent(s, op) {
    const id = `evt_contract_${Date.now().toString(36)}`;
    const event = { ...validBody(s, op.operationId), id };
    const sentAt = Date.now();
    const first = await s.probe(
      op,
      'valid event → 202',
      { method: 'POST', path: op.path, ...(await json(s, op, event)) },
      { status: [202], then: (ex) => (body(ex).id === id ? [] : [`id is ${body(ex).id}, sent ${id}`]) },
    );
    if (first?.status === 202) {
      s.state.publishedType = (event as Json).type;
      s.state.publishedAt = String(sentAt);
      await s.probe(
        op,
        'same id again → 202 (idempotent)',
        { method: 'POST', path: op.path, ...(await json(s, op, event)) },
        { status: [202], then: (ex) => (body(ex).id === id ? [] : ['a different id']) },
      );
    }
    for (const [what, key] of [
      ['ordering_key → 202', 'contract-probe-key'],
      ['ordering_key of 128 bytes (64 two-byte characters) → 202', orderingKey(128)],
      ['ordering_key null → 202', null],
    ] as const)
      await s.probe(
        op,
        what,
        {
          method: 'POST',
          path: op.path,
          ...(await json(s, op, { ...validBody(s, op.operationId), ordering_key: key })),
        },
        { status: [202] },
      );
    for (const [what, key] of [
      ['ordering_key of 129 bytes → 400 naming it', orderingKey(129)],
      ['ordering_key of 65 two-byte characters (130 bytes) → 400 naming it', orderingKey(130)],
      ['empty ordering_key → 400 naming it', ''],
    ] as const)
      await s.probe(
        op,
        what,
        {
          method: 'POST',
          path: op.path,
          ...(await json(s, op, { ...validBody(s, op.operationId), ordering_key: key })),
        },
        { status: [400], then: names('$.ordering_key') },
      );
  },

  async publishEventBatch(s, op) {
    const id = `evt_contract_batch_${Date.now().toString(36)}`;
    const events = [
      { type: 'inference.completed', data: { n: 1 }, id },
      { type: 'ping', data: null },
      { type: 'pipeline.failed', data: { n: 2 } },
      { type: 'inference.completed', data: { n: 3 }, id },
    ];
    await s.probe(
      op,
      'mixed batch → 202, the invalid item refused alone, a repeated id answered once',
      { method: 'POST', path: op.path, ...(await json(s, op, { events })) },
      {
        status: [202],
        then: (ex) => {
          const b = body(ex);
          const faults: string[] = [];
          if (b.accepted !== 3 || b.rejected !== 1)
            faults.push(`accepted ${b.accepted}, rejected ${b.rejected}; expected 3 and 1`);
          if (b.results?.[1]?.error?.code !== 'INVALID_REQUEST') faults.push('item 1 (type ping) was not refused');
          if (b.results?.[0]?.id !== id || b.results?.[3]?.id !== id)
            faults.push('the repeated id did not answer with the same id');
          return faults;
        },
      },
    );
    await s.probe(
      op,
      'every item invalid → 400',
      { method: 'POST', path: op.path, ...(await json(s, op, { events: [{ type: 'ping', data: null }] })) },
      { status: [400] },
    );
    await s.probe(
      op,
      'an item with a 129-byte ordering_key → refused alone, naming it',
      {
        method: 'POST',
        path: op.path,
        ...(await json(s, op, {
          events: [
            { type: 'inference.completed', data: { n: 1 }, ordering_key: orderingKey(128) },
            { type: 'inference.completed', data: { n: 2 }, ordering_key: orderingKey(129) },
          ],
        })),
      },
      {
        status: [202],
        then: (ex) => {
          const b = body(ex);
          if (b.accepted !== 1 || b.rejected !== 1)
            return [`accepted ${b.accepted}, rejected ${b.rejected}; expected 1 and 1`];
          const paths = (b.results?.[1]?.error?.errors ?? []).map((e: Json) => e.path);
          return paths.includes('$.events[1].ordering_key') ? [] : [`item 1's errors name ${paths.join(', ')}`];
        },
      },
    );
    await s.probe(
      op,
      '1,001 events → 400',
      {
        method: 'POST',
        path: op.path,
        ...(await json(s, op, {
          events: Array.from({ length: 1001 }, () => ({ type: 'inference.completed', data: null })),
        })),
      },
      { status: [400] },
    );
  },

  async listDlq(s, op) {
    await s.probe(op, 'GET → 200', { method: 'GET', path: op.path, headers: await tokenFor(s, op) }, { status: [200] });
    const endpoint = s.state.endpointId ?? 'ep_contract_probe_missing';
    await s.probe(
      op,
      'filtered by endpoint_id and event_type → 200, only matching entries',
      {
        method: 'GET',
        path: `${op.path}?endpoint_id=${encodeURIComponent(endpoint)}&event_type=pipeline.failed`,
        headers: await tokenFor(s, op),
      },
      {
        status: [200],
        then: (ex) =>
          body(ex)
            .data.filter((e: Json) => e.endpoint_id !== endpoint || e.event_type !== 'pipeline.failed')
            .map((e: Json) => `entry ${e.id} does not match the filter`),
      },
    );
    await pagingChecks(s, op);
  },

  async replayDlqEntry(s, op) {
    await s.probe(
      op,
      'unknown id → 404',
      { method: 'POST', path: concretePath(op, s), headers: await tokenFor(s, op) },
      { status: [404] },
    );
  },

  async replayDlq(s, op) {
    await s.probe(
      op,
      'by filter → replayed count',
      { method: 'POST', path: op.path, ...(await json(s, op, validBody(s, op.operationId))) },
      {
        status: [200, 202],
        then: (ex) =>
          body(ex).replayed === 0 ? [] : [`replayed ${body(ex).replayed} entries of an endpoint that never failed`],
      },
    );
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

  async getClientSecret(s, op) {
    // 404 is documented until the first rotation (the secret is the one shown at creation).
    await s.probe(
      op,
      'own client → 200, or 404 before its first rotation',
      { method: 'GET', path: concretePath(op, s), headers: await tokenFor(s, op) },
      { status: [200, 404] },
    );
    await s.probe(
      op,
      'unknown client → 404',
      {
        method: 'GET',
        path: concretePath(op, s, { client_id: 'cl_contract_probe_missing' }),
        headers: await tokenFor(s, op),
      },
      { status: [404] },
    );
  },

  async listAuditEntries(s, op) {
    await s.probe(op, 'GET → 200', { method: 'GET', path: op.path, headers: await tokenFor(s, op) }, { status: [200] });
    await pagingChecks(s, op);
  },

  async revokeClient(s, op) {
    await s.probe(
      op,
      'unknown client → 404',
      { method: 'POST', path: op.path, ...(await json(s, op, validBody(s, op.operationId))) },
      { status: [404] },
    );
    const victim = s.opts.revocable;
    if (!victim) {
      s.record(op, 'revoke → 201, its token → 401 TOKEN_REVOKED', 'skip', 'no --revocable-client-id given');
      return;
    }
    const victimToken = await s.token(undefined, victim);
    const request = { client_id: victim.clientId, reason: 'sluice contract verify' };
    const ex = await s.probe(
      op,
      'revoke → 201',
      { method: 'POST', path: op.path, ...(await json(s, op, request)) },
      { status: [201] },
    );
    if (ex?.status !== 201) return;
    await s.probe(
      op,
      'revoke again → 200 or 201 (idempotent)',
      { method: 'POST', path: op.path, ...(await json(s, op, request)) },
      { status: [200, 201] },
    );
    // Auth runs before anything else, so the revoked token can be tried on this very operation.
    const deadline = Date.now() + 2000;
    // The spec gives a revocation 250 ms to reach every node; wait a little longer before judging.
    while (Date.now() < deadline) {
      const r = await fetch(`${s.opts.baseUrl}${op.path}`, { method: 'POST', headers: bearer(victimToken) });
      await r.arrayBuffer();
      if (r.status === 401) break;
      await new Promise((res) => setTimeout(res, 25));
    }
    await s.probe(
      op,
      'revoked token → 401 TOKEN_REVOKED',
      {
        method: 'POST',
        path: op.path,
        ...jsonBody(request),
        headers: { ...bearer(victimToken), 'content-type': 'application/json' },
      },
      {
        status: [401],
        then: (ex) => (body(ex).code === 'TOKEN_REVOKED' ? [] : [`code ${body(ex).code}`]),
      },
    );
    const tokenOp = listOperations(s.doc).find((o) => o.operationId === 'issueToken')!;
    await s.probe(
      tokenOp,
      'revoked client secret → 401 invalid_client',
      {
        method: 'POST',
        path: tokenOp.path,
        ...jsonBody({
          grant_type: 'client_credentials',
          client_id: victim.clientId,
          client_secret: victim.clientSecret,
        }),
      },
      { status: [401] },
    );
  },

  inferenceGet: dataPlane,
  inferencePost: dataPlane,
  inferencePut: dataPlane,
  inferencePatch: dataPlane,
  inferenceDelete: dataPlane,
  pipelinesGet: dataPlane,
  pipelinesPost: dataPlane,
  pipelinesPut: dataPlane,
  pipelinesPatch: dataPlane,
  pipelinesDelete: dataPlane,
  telemetryGet: dataPlane,
  telemetryPost: dataPlane,
  telemetryPut: dataPlane,
  telemetryPatch: dataPlane,
  telemetryDelete: dataPlane,
  telemetryExportGet: dataPlane,
  telemetryExportPost: dataPlane,
  telemetryExportPathGet: dataPlane,
  telemetryExportPathPost: dataPlane,
  telemetryExportPut: dataPlane,
  telemetryExportPatch: dataPlane,
  telemetryExportDelete: dataPlane,
  telemetryExportPathPut: dataPlane,
  telemetryExportPathPatch: dataPlane,
  telemetryExportPathDelete: dataPlane,
};

/** The order that lets later scenarios use what earlier ones created; the rest follow in contract order. */
export const ORDER = [
  'getContract',
  'issueToken',
  'getJwks',
  'getAuthorizationServerMetadata',
  'createEndpoint',
  'listEndpoints',
  'getEndpoint',
  'verifyEndpoint',
  'updateEndpoint',
  'testEndpoint',
  'rotateEndpointSecret',
  'publishEvent',
  'listEndpointAttempts',
  'getWebhookStats',
  'publishEventBatch',
  'listEventTypes',
  'listDlq',
  'replayDlqEntry',
  'replayDlq',
  'deleteEndpoint',
  'getClientSecret',
  'listAuditEntries',
  'revokeClient',
];
