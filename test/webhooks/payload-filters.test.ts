/**
 * CEL payload filters end to end on a real broker: an endpoint with `data.total > 100` receives
 * only the events whose total is over 100 while its neighbour without a filter receives all;
 * `matched_endpoints` counts the endpoints whose filter passed; PATCH `filter: null` removes the
 * filter; a filter that fails when evaluated delivers nothing and is counted in the endpoint's
 * `filter_errors`; a filter that does not compile is a 400 naming its position; and
 * `POST /v1/webhooks/filters/test` tries a filter on a sample.
 */
import t from 'tap';
import { assertInvalid, call, startTestNode, until } from '../helpers/sluice.ts';
import { awaitMarker, publish, receiver } from '../dispatcher/receiver.ts';
import { parseMetrics, sample } from '../helpers/prometheus.ts';

const node = await startTestNode({ SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true' }, { dispatcher: true });
const all = await receiver(200);
const big = await receiver(200);
const broken = await receiver(200);
t.teardown(async () => {
  await all.close();
  await big.close();
  await broken.close();
  await node.close();
});
const token = await node.token(await node.client('admin', 'shop'));

async function register(url: string, events: string[], filter?: string) {
  const res = await call(node.base, 'POST', '/v1/webhooks/endpoints', {
    token,
    body: { url, events, ...(filter === undefined ? {} : { filter }) },
  });
  if (res.status !== 201) throw new Error(`registration failed: ${res.status} ${res.text}`);
  return res.json as { id: string; filter: string | null; filter_errors: unknown };
}

const totals = (hits: { body: { type: string; data: unknown } }[]) =>
  hits
    .filter((h) => h.body.type === 'order.created')
    .map((h) => (h.body.data as { total: number }).total)
    .sort((a, b) => a - b);

const epAll = await register(all.url, ['order.created', 'sync.marker']);
const epBig = await register(big.url, ['order.created', 'sync.marker'], 'type == "sync.marker" || data.total > 100');
const epBroken = await register(broken.url, ['order.created'], 'data.missing.x == 1');

t.test('a filter that does not compile is refused with its position, and nothing is registered', async (t) => {
  const bad = await call(node.base, 'POST', '/v1/webhooks/endpoints', {
    token,
    body: { url: all.url, events: ['order.created'], filter: 'data.total >\n  100 &&& true' },
  });
  assertInvalid(t, bad, 'syntax', ['$.filter']);
  t.match(bad.json.detail, /line 2, column \d+ \(offset \d+\): syntax error/);
  t.match(bad.json.filter_error, { line: 2 });
  const typed = await call(node.base, 'POST', '/v1/webhooks/endpoints', {
    token,
    body: { url: all.url, events: ['order.created'], filter: 'type == 42' },
  });
  assertInvalid(t, typed, 'types', ['$.filter']);
  t.match(typed.json.detail, /'==' cannot take string and int/);
  const nested = await call(node.base, 'PATCH', `/v1/webhooks/endpoints/${epAll.id}`, {
    token,
    body: { filter: 'data.a.all(x, data.b.exists(y, y == x))' },
  });
  assertInvalid(t, nested, 'nested', ['$.filter']);
  const long = await call(node.base, 'PATCH', `/v1/webhooks/endpoints/${epAll.id}`, {
    token,
    body: { filter: `data.a == "${'x'.repeat(5000)}"` },
  });
  assertInvalid(t, long, 'too long', ['$.filter']);
  const unknown = await call(node.base, 'PATCH', '/v1/webhooks/endpoints/ep_nope', { token, body: { filter: 'x >' } });
  assertInvalid(t, unknown, 'a fault of the body before the lookup (400, not 404)', ['$.filter']);
  const list = await call(node.base, 'GET', '/v1/webhooks/endpoints', { token });
  t.equal(list.json.data.length, 3, 'only the three good registrations exist');
  const after = await call(node.base, 'GET', `/v1/webhooks/endpoints/${epAll.id}`, { token });
  t.equal(after.json.filter, null, 'a refused PATCH changed nothing');
});

t.test('each receiver gets the events its filter takes; matched_endpoints counts filters that passed', async (t) => {
  t.equal(epBig.filter, 'type == "sync.marker" || data.total > 100');
  const small = await publish(node, token, { type: 'order.created', data: { total: 50 } });
  t.equal(small.json.matched_endpoints, 1, 'total 50: the endpoint without a filter only');
  const large = await publish(node, token, { type: 'order.created', data: { total: 150 } });
  t.equal(large.json.matched_endpoints, 2, 'total 150: both (the broken filter matches nothing)');
  const bigGot = await awaitMarker(node, token, big, 'sync.marker');
  t.same(totals(bigGot), [150], 'the filtered endpoint received only total 150');
  await all.until((e) => totals(e).length === 2, 30_000, 'both events at the endpoint without a filter');
  t.same(totals(all.events()), [50, 150]);
});

t.test('a filter that fails when evaluated delivers nothing and is counted on the endpoint', async (t) => {
  const seen = await until(
    async () => (await call(node.base, 'GET', `/v1/webhooks/endpoints/${epBroken.id}`, { token })).json,
    (ep) => (ep.filter_errors?.count ?? 0) >= 2,
    30_000,
    'the broken filter counted twice',
  );
  t.match(seen.filter_errors.last_error, /missing/);
  t.match(seen.filter_errors.last_at, /^\d{4}-\d\d-\d\dT/);
  t.same(broken.events(), [], 'nothing was delivered to it');
  const metrics = parseMetrics(await (await fetch(`${node.admin}/metrics`)).text());
  const count = (outcome: string) =>
    sample(metrics, 'sluice_webhook_filter_evaluations_total', { tenant: 'shop', outcome }, { missing: 0 });
  t.equal(count('error'), 2, 'Prometheus: the two failed evaluations, by tenant');
  t.equal(count('matched'), 2, 'Prometheus: total 150 and the marker passed the filter');
  t.equal(count('unmatched'), 1, 'Prometheus: total 50 did not');
  const fixed = await call(node.base, 'PATCH', `/v1/webhooks/endpoints/${epBroken.id}`, {
    token,
    body: { filter: 'has(data.missing) && data.missing.x == 1' },
  });
  t.equal(fixed.status, 200);
  t.equal(fixed.json.filter_errors, null, 'a new filter starts with no errors');
});

t.test('PATCH filter null removes the filter', async (t) => {
  const res = await call(node.base, 'PATCH', `/v1/webhooks/endpoints/${epBig.id}`, { token, body: { filter: null } });
  t.equal(res.status, 200);
  t.equal(res.json.filter, null);
  const small = await publish(node, token, { type: 'order.created', data: { total: 7 } });
  t.equal(small.json.matched_endpoints, 2, 'total 7: now both the unfiltered endpoints');
  await big.until((e) => totals(e).includes(7), 30_000, 'total 7 at the endpoint without its filter');
  t.same(totals(big.events()), [7, 150]);
});

t.test('POST /v1/webhooks/filters/test tries a filter on a sample event', async (t) => {
  const path = '/v1/webhooks/filters/test';
  const event = { type: 'order.created', data: { total: 150 } };
  const yes = await call(node.base, 'POST', path, { token, body: { filter: 'data.total > 100', event } });
  t.same([yes.status, yes.json], [200, { matched: true, error: null }]);
  const no = await call(node.base, 'POST', path, { token, body: { filter: 'data.total > 1000', event } });
  t.same(no.json, { matched: false, error: null });
  const err = await call(node.base, 'POST', path, { token, body: { filter: 'data.nope.x == 1', event } });
  t.equal(err.json.matched, false);
  t.match(err.json.error, /nope/);
  const bad = await call(node.base, 'POST', path, { token, body: { filter: 'data.total >', event } });
  assertInvalid(t, bad, 'try a bad filter', ['$.filter']);
  const reader = await node.token(await node.client('admin', 'shop'), 'webhooks:read');
  const denied = await call(node.base, 'POST', path, { token: reader, body: { filter: 'true', event } });
  t.equal(denied.status, 403, 'webhooks:write only');
});
