/**
 * What the scenarios of every tag share: the Scenario shape, a token and a JSON body for an
 * operation, the valid body each operation starts from, and the checks several tags repeat.
 */
import type { Json, Operation } from '../../contract.ts';
import { bearer, jsonBody, type Exchange } from '../http.ts';
import { concretePath, type Expectation, type Session } from '../session.ts';

/** What one operation does right, probed against a live Sluice. */
export type Scenario = (s: Session, op: Operation) => Promise<void>;

export const body = (ex: Exchange) => ex.json as Json;
export const tokenFor = async (s: Session, op: Operation) => bearer(await s.token(op.scopes![0]));
export const json = async (s: Session, op: Operation, value: unknown) => {
  const b = jsonBody(value);
  return { headers: { ...(await tokenFor(s, op)), ...b.headers }, body: b.body };
};

/** A POST of `value` as JSON to the operation's path, with its token. */
export const postJson = async (s: Session, op: Operation, value: unknown) => ({
  method: 'POST',
  path: op.path,
  ...(await json(s, op, value)),
});

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
    case 'recoverEndpoint':
      // The last hour: within the DLQ's 7 days, whatever the verifier's clock is off by.
      return { since: new Date(Date.now() - 3600_000).toISOString() };
    case 'revokeClient':
      return { client_id: 'cl_contract_probe_missing', reason: 'sluice contract verify' };
    default:
      return undefined;
  }
}

/** A 400 whose errors[] names each of `paths` (`$.ordering_key`). */
export const names =
  (...paths: string[]) =>
  (ex: Exchange): string[] => {
    const got: string[] = Array.isArray(body(ex)?.errors) ? body(ex).errors.map((e: Json) => e.path) : [];
    return paths.filter((p) => !got.includes(p)).map((p) => `errors[] does not name ${p} (it names ${got.join(', ')})`);
  };

/** The members of `change` the endpoint view `ex` does not show as changed. */
export const shows =
  (change: Json) =>
  (ex: Exchange): string[] =>
    Object.entries(change)
      .filter(([k, v]) => JSON.stringify(body(ex)?.[k]) !== JSON.stringify(v))
      .map(([k, v]) => `${k} is ${JSON.stringify(body(ex)?.[k])}, not ${JSON.stringify(v)}`);

/** GET `path` with the operation's token → 200, and the faults `then` finds. */
export const probeGet = async (s: Session, op: Operation, path: string, what: string, then?: Expectation['then']) =>
  s.probe(op, what, { method: 'GET', path, headers: await tokenFor(s, op) }, { status: [200], then });

/** GET the operation's path without a token (what anyone may read) → 200, and the faults `then` finds. */
export const probeOpenGet = (s: Session, op: Operation, what: string, then: Expectation['then']) =>
  s.probe(op, what, { method: 'GET', path: op.path }, { status: [200], then });

/**
 * The operation on the endpoint createEndpoint created → 200, and the faults `then` finds; `value`:
 * a JSON body to send. Recorded as skipped when no endpoint was created.
 */
export async function probeCreated(
  s: Session,
  op: Operation,
  what: string,
  then?: Expectation['then'],
  value?: Json,
): Promise<void> {
  if (!s.state.endpointId) {
    s.record(op, what, 'skip', 'no endpoint was created');
    return;
  }
  const req = value === undefined ? { headers: await tokenFor(s, op) } : await json(s, op, value);
  await s.probe(op, what, { method: op.method, path: concretePath(op, s), ...req }, { status: [200], then });
}

/** The operation on ids that do not exist (endpoint_id, dlq_id): 404. */
export const probeUnknownId = async (s: Session, op: Operation, what: string) =>
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

/** limit=0 and limit=1001 → 400; limit=1 → at most one item. */
export const pagingChecks = (s: Session, op: Operation): Promise<unknown> =>
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
