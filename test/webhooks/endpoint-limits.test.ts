/**
 * Fan-out per tenant is bounded (#20 item 4): a tenant has at most SLUICE_MAX_ENDPOINTS_PER_TENANT
 * endpoints (409 ENDPOINT_LIMIT beyond, also when the registrations race), verify is rate limited
 * per endpoint (429 with Retry-After, and no ping), and concurrent writes of one endpoint all
 * answer: none waits for its exact record after a later write replaced it.
 */
import t from 'tap';
import { call, startTestNode, type TestNode } from '../helpers/sluice.ts';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.ts';
import {
  ENDPOINT_BURST as VERIFY_BURST,
  ENDPOINT_EVERY_SECONDS as VERIFY_EVERY_SECONDS,
} from '../../ingress/routes/target-budget.ts';
import { verifyEndpoint, recordFailingSince } from '../../core/webhooks/endpoint-service.ts';
import { loadConfig } from '../../core/config.ts';
import { ConfigError } from '../../core/errors.ts';

const LIMIT = 3;
const env = { SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true', SLUICE_MAX_ENDPOINTS_PER_TENANT: String(LIMIT) };
const node = await startTestNode(env);
// A second node on the same topics: another ingress process writing the same endpoints.
const other = await startTestNode(env, { prefix: node.config.topicPrefix });
const receivers: Receiver[] = [];
t.teardown(async () => {
  for (const r of receivers) await r.close();
  await other.close();
  await node.close();
});

/** Waits until each node's view has read the endpoints topic as far as the other's. */
async function synced(): Promise<void> {
  const topic = node.ctx.topics.endpoints;
  await other.ctx.state.reached(topic, 0, node.ctx.state.position(topic, 0), 10_000);
  await node.ctx.state.reached(topic, 0, other.ctx.state.position(topic, 0), 10_000);
}

async function receiver(): Promise<Receiver> {
  const r = await startReceiver(200);
  receivers.push(r);
  return r;
}

async function tenant(name: string) {
  return node.token(await node.client('admin', name));
}

const register = (token: string, url: string, on: TestNode = node) =>
  call(on.base, 'POST', '/v1/webhooks/endpoints', { token, body: { url, events: ['inference.completed'] } });

const list = async (token: string) =>
  ((await call(node.base, 'GET', '/v1/webhooks/endpoints?limit=1000', { token })).json?.data ?? []) as {
    id: string;
  }[];

t.test(
  'the limit+1st endpoint is 409 ENDPOINT_LIMIT problem+json; other tenants unaffected; a delete makes room',
  async (t) => {
    const token = await tenant('lim-a');
    const r = await receiver();
    const ids: string[] = [];
    for (let i = 0; i < LIMIT; i++) {
      const res = await register(token, r.url);
      t.equal(res.status, 201, `endpoint ${i + 1} of ${LIMIT}: 201`);
      ids.push(res.json.id);
    }
    const over = await register(token, r.url);
    t.equal(over.status, 409, 'one more: 409');
    t.equal(over.headers.get('content-type'), 'application/problem+json');
    t.equal(over.json.code, 'ENDPOINT_LIMIT');
    t.equal(over.json.max_endpoints, LIMIT);
    t.match(over.json.detail, /delete one/);
    t.equal(r.received.length, LIMIT, 'the refused registration sent no ping');
    t.equal((await list(token)).length, LIMIT, 'and wrote nothing');
    const audit = await call(node.base, 'GET', '/v1/audit?limit=1000', { token });
    t.equal(
      audit.json.data.filter((e: { action: string }) => e.action === 'endpoint.created').length,
      LIMIT,
      'nor an audit entry',
    );
    await synced();
    const elsewhere = await register(token, r.url, other);
    t.equal(elsewhere.status, 409, 'another node refuses it too: the limit is on the tenant, not on a node');

    const b = await register(await tenant('lim-b'), r.url);
    t.equal(b.status, 201, "another tenant's endpoints do not count");

    t.equal((await call(node.base, 'DELETE', `/v1/webhooks/endpoints/${ids[0]}`, { token })).status, 204);
    t.equal((await register(token, r.url)).status, 201, 'after a delete, one more fits');
    t.equal((await register(token, r.url)).status, 409, 'and then no more');
  },
);

t.test('registrations racing on one node cannot pass the limit together', async (t) => {
  const token = await tenant('lim-race');
  const r = await receiver();
  const answers = await Promise.all(Array.from({ length: 12 }, () => register(token, r.url)));
  const statuses = answers.map((a) => a.status);
  t.equal(statuses.filter((s) => s === 201).length, LIMIT, `exactly ${LIMIT} created (${statuses.join(' ')})`);
  t.equal(statuses.filter((s) => s === 409).length, 12 - LIMIT, 'every other one 409');
  for (const a of answers.filter((a) => a.status === 409)) t.equal(a.json.code, 'ENDPOINT_LIMIT');
  t.equal((await list(token)).length, LIMIT, 'the tenant holds the limit, not more');
  t.equal(r.received.length, LIMIT, 'only the created ones were pinged');
});

t.test('registrations racing on two nodes pass the limit by at most its documented bound (#31 item 6)', async (t) => {
  // docs/operations.md: with P processes serving the API and E endpoints before the race, at most
  // E + P × (limit − E). Here P = 2, E = 1: at most 5 of a limit of 3.
  const token = await tenant('lim-race-2');
  const r = await receiver();
  t.equal((await register(token, r.url)).status, 201, 'one endpoint before the race');
  await synced();
  const existing = 1;
  const bound = existing + 2 * (LIMIT - existing);
  const answers = await Promise.all(
    Array.from({ length: 16 }, (_, i) => register(token, r.url, i % 2 === 0 ? node : other)),
  );
  const statuses = answers.map((a) => a.status);
  const created = statuses.filter((s) => s === 201).length;
  t.same([...new Set(statuses)].sort(), [201, 409], `each answer is 201 or 409 (${statuses.join(' ')})`);
  for (const a of answers.filter((a) => a.status === 409)) t.equal(a.json.code, 'ENDPOINT_LIMIT');
  t.ok(existing + created >= LIMIT, `the limit is reached (${existing + created})`);
  t.ok(existing + created <= bound, `and passed by no more than the bound: ${existing + created} ≤ ${bound}`);
  await synced();
  t.equal((await list(token)).length, existing + created, 'the list holds what was answered 201');
  t.equal(r.received.length, existing + created, 'only the created ones were pinged');
  for (const on of [node, other])
    t.equal((await register(token, r.url, on)).status, 409, `once the views agree, ${on.base} refuses the next`);
});

t.test('verify is rate limited per endpoint: 429 RATE_LIMITED with Retry-After, and no ping', async (t) => {
  const token = await tenant('lim-verify');
  const r = await receiver();
  const ep = (await register(token, r.url)).json;
  const neighbour = (await register(token, r.url)).json;
  const pingsBefore = r.received.length;
  const answers = await Promise.all(
    Array.from({ length: 30 }, () => call(node.base, 'POST', `/v1/webhooks/endpoints/${ep.id}/verify`, { token })),
  );
  const ok = answers.filter((a) => a.status === 200);
  const limited = answers.filter((a) => a.status === 429);
  t.equal(ok.length + limited.length, 30, `only 200 and 429 (${answers.map((a) => a.status).join(' ')})`);
  t.ok(ok.length >= 1 && ok.length <= VERIFY_BURST, `${ok.length} verified: at most the burst of ${VERIFY_BURST}`);
  for (const a of ok) t.equal(a.json.state, 'ACTIVE');
  t.ok(limited.length >= 30 - VERIFY_BURST, `${limited.length} refused`);
  for (const a of limited) {
    t.equal(a.json.code, 'RATE_LIMITED');
    t.equal(a.headers.get('content-type'), 'application/problem+json');
    const after = Number(a.headers.get('retry-after'));
    t.ok(Number.isInteger(after) && after >= 1 && after <= VERIFY_EVERY_SECONDS, `Retry-After: ${after}`);
  }
  t.equal(r.received.length - pingsBefore, ok.length, 'a refused verify sends no ping');
  const n = await call(node.base, 'POST', `/v1/webhooks/endpoints/${neighbour.id}/verify`, { token });
  t.equal(n.status, 200, "the limit is per endpoint: the tenant's other endpoint verifies");
  const unknown = await call(node.base, 'POST', '/v1/webhooks/endpoints/ep_nope/verify', { token });
  t.equal(unknown.status, 404, 'an unknown endpoint is still 404');
});

t.test('30 concurrent writes of one endpoint on one node all answer, each applied once', async (t) => {
  const token = await tenant('lim-writes');
  const r = await receiver();
  const ep = (await register(token, r.url)).json;
  const start = node.ctx.endpoints.get(ep.id)!;
  t.equal(start.state, 'ACTIVE');
  const results = await Promise.allSettled(
    Array.from({ length: 30 }, (_, i) =>
      i % 3 === 2
        ? recordFailingSince(node.ctx, ep.id, 1_000 + i).then(() => node.ctx.endpoints.get(ep.id)!)
        : verifyEndpoint(node.ctx, start, 'test').then((v) => v.record),
    ),
  );
  const failed = results.filter((x) => x.status === 'rejected').map((x) => (x as PromiseRejectedResult).reason);
  t.same(
    failed.map((e) => String(e?.message ?? e)),
    [],
    'no write failed (before: 24 of 30 were 503 after waiting 10 s for their exact record)',
  );
  const end = node.ctx.endpoints.get(ep.id)!;
  t.equal(end.state, 'ACTIVE');
  t.equal(r.received.length, 1 + 20, 'the registration and each of the 20 verifies pinged');
  // 20 verifies and 10 health writes, each a change of its own: 30 versions more.
  t.equal(end.version, (start.version ?? 0) + 30, 'every write took effect: 30 versions more');
});

t.test('concurrent writes of one endpoint on two nodes all answer and both views agree', async (t) => {
  const token = await tenant('lim-two-nodes');
  const r = await receiver();
  const ep = (await register(token, r.url)).json;
  const start = node.ctx.endpoints.get(ep.id)!;
  await synced();
  const writes = [node, other].flatMap((n) =>
    Array.from({ length: 8 }, () => verifyEndpoint(n.ctx, start, 'test').then((v) => v.record)),
  );
  const results = await Promise.allSettled(writes);
  t.same(
    results.filter((x) => x.status === 'rejected').map((x) => String((x as PromiseRejectedResult).reason)),
    [],
    'every write answered',
  );
  const versions = results.map((x) => (x as PromiseFulfilledResult<{ version?: number }>).value.version);
  t.equal(new Set(versions).size, 16, 'each write applied as a version of its own: none overwrote another');
  t.equal(Math.max(...(versions as number[])), (start.version ?? 0) + 16);
  await synced();
  t.same(node.ctx.endpoints.get(ep.id), other.ctx.endpoints.get(ep.id), 'both nodes hold the same record');
});

t.test('SLUICE_MAX_ENDPOINTS_PER_TENANT: 1000 by default, at least 1', async (t) => {
  t.equal(loadConfig({}).maxEndpointsPerTenant, 1000);
  t.equal(loadConfig({ SLUICE_MAX_ENDPOINTS_PER_TENANT: '25' }).maxEndpointsPerTenant, 25);
  for (const bad of ['0', '-1', 'many', '1.5'])
    t.throws(() => loadConfig({ SLUICE_MAX_ENDPOINTS_PER_TENANT: bad }), ConfigError, `${bad} is refused`);
});
