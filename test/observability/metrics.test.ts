/**
 * /metrics after a known workload shows exactly the counts it caused, in a page a third-party
 * Prometheus text parser reads; a dispatcher-only process serves the same admin routes.
 */
import t from 'tap';
import type { ChildProcess } from 'node:child_process';
import { call, startTestNode, uniquePrefix } from '../helpers/sluice.ts';
import { spawnDispatcher } from '../../harness/sluice-cli.ts';
import { parseMetrics, sample } from '../helpers/prometheus.ts';
import { receiver, registerEndpoint, publish, sleep, type TestReceiver } from '../dispatcher/receiver.ts';
import { Metrics } from '../../core/metrics.ts';

// 600: a failed delivery waits 50 ms on the first rung.
const node = await startTestNode(
  { SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true', SLUICE_TIME_SCALE: '600' },
  { dispatcher: true },
);
const receivers: TestReceiver[] = [];
const children: ChildProcess[] = [];
t.teardown(async () => {
  for (const c of children) c.kill('SIGKILL');
  for (const r of receivers) await r.close();
  await node.close();
});

const scrape = async (url = `${node.admin}/metrics`) => {
  const res = await fetch(url);
  return { res, families: parseMetrics(await res.text()) };
};

t.test('a known workload, counted exactly', async (t) => {
  const ok = await receiver(200);
  const flaky = await receiver(200);
  receivers.push(ok, flaky);
  let flakyCalls = 0;
  flaky.answerFor = () => (++flakyCalls === 1 ? 500 : 200);
  const publisher = await node.token(await node.client('webhook-publisher', 'acme'));
  const reader = await node.token(await node.client('inference-reader', 'acme'));
  const refused = await fetch(`${node.base}/v1/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ grant_type: 'client_credentials', client_id: 'nobody', client_secret: 'wrong' }),
  });
  t.equal(refused.status, 401);
  await registerEndpoint(node, publisher, ok.url, ['inference.completed']);
  await registerEndpoint(node, publisher, flaky.url, ['pipeline.failed']);
  for (let i = 0; i < 3; i++)
    t.equal((await publish(node, publisher, { type: 'inference.completed', data: { i } })).status, 202);
  t.equal((await publish(node, publisher, { type: 'pipeline.failed', data: {} })).status, 202);
  // Scope violations: two publishes and one DLQ read with a token that has neither scope.
  for (let i = 0; i < 2; i++)
    t.equal((await publish(node, reader, { type: 'inference.completed', data: {} })).status, 403);
  t.equal((await call(node.base, 'GET', '/v1/webhooks/dlq', { token: reader })).status, 403);
  await ok.until((e) => e.length >= 3);
  await flaky.until((e) => e.length >= 2);

  let { res, families: m } = await scrape();
  for (
    const deadline = Date.now() + 10_000;
    sample(m, 'sluice_deliveries_total', { outcome: 'delivered' }, { missing: 0 }) < 4 && Date.now() < deadline;
  ) {
    await sleep(50);
    ({ res, families: m } = await scrape());
  }
  t.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  t.equal(sample(m, 'sluice_deliveries_total', { outcome: 'delivered' }), 4, '4 delivered');
  t.equal(sample(m, 'sluice_deliveries_total', { outcome: 'retry' }), 1, '1 retried');
  t.equal(sample(m, 'sluice_deliveries_total', { outcome: 'dead-letter' }, { missing: 0 }), 0, 'none dead-lettered');
  t.equal(sample(m, 'sluice_delivery_attempts_total', { attempt: '1', result: 'success' }), 3);
  t.equal(sample(m, 'sluice_delivery_attempts_total', { attempt: '1', result: 'failure' }), 1);
  t.equal(sample(m, 'sluice_delivery_attempts_total', { attempt: '2', result: 'success' }), 1);
  t.equal(sample(m, 'sluice_delivery_latency_seconds'), 4, 'a latency for each delivery');
  t.equal(sample(m, 'sluice_rung_lateness_seconds', { rung: '30s' }), 1, 'one record left a rung: the first');
  t.equal(sample(m, 'sluice_rung_lateness_seconds'), 1, 'and no other rung');
  t.throws(() => sample(m, 'sluice_rung_lateness_seconds', { rung: '1m' }), 'a missing series is no zero');
  t.throws(() => sample(m, 'sluice_deliveries_totl'), 'nor is a misspelt name');
  t.equal(
    sample(m, 'sluice_scope_violations_total', { scope: 'events:publish' }),
    2,
    'scope violations by the missing scope',
  );
  t.equal(sample(m, 'sluice_scope_violations_total', { scope: 'webhooks:read' }), 1);
  t.equal(sample(m, 'sluice_scope_violations_total'), 3, 'and no others');
  t.equal(
    sample(m, 'sluice_http_requests_total', { route: 'POST /v1/webhooks/events', status: '202', tenant: 'acme' }),
    4,
    'requests by route, status and tenant',
  );
  t.equal(
    sample(m, 'sluice_http_requests_total', { route: 'POST /v1/webhooks/events', status: '403', tenant: 'acme' }),
    2,
  );
  t.equal(sample(m, 'sluice_tokens_issued_total'), 2);
  t.equal(sample(m, 'sluice_tokens_refused_total', { reason: 'invalid_client' }), 1);
  t.equal(sample(m, 'sluice_events_published_total', { tenant: 'acme' }), 4);
  t.equal(sample(m, 'sluice_events_total', { outcome: 'matched' }), 4);
  t.equal(sample(m, 'sluice_endpoints', { state: 'ACTIVE' }), 2, 'endpoints by state');
  t.equal(m.get('sluice_delivery_latency_seconds')?.type, 'HISTOGRAM', 'histograms are typed');
  t.equal(m.get('sluice_deliveries_total')?.type, 'COUNTER');
  t.ok(m.has('process_cpu_user_seconds_total') && m.has('nodejs_eventloop_lag_seconds'), 'process metrics');
  t.ok(
    m
      .get('sluice_consumer_lag_records')
      ?.metrics.some((s) => s.labels?.group?.endsWith('.dispatch') && s.labels.partition !== undefined),
    'consumer lag per partition',
  );
});

t.test('without the tenant label, every tenant is one series', async (t) => {
  const metrics = new Metrics({ tenantLabel: false });
  metrics.request('GET /x', 200, 'acme', 0.001);
  metrics.request('GET /x', 200, 'globex', 0.001);
  const m = parseMetrics(await metrics.render());
  t.same(
    m.get('sluice_http_requests_total')?.metrics.map((s) => [s.labels?.tenant, s.value]),
    [['', '2']],
  );
});

t.test('a dispatcher-only process serves /healthz, /readyz and /metrics', async (t) => {
  const d = await spawnDispatcher(uniquePrefix('obs'), {}, (c) => children.push(c));
  const base = d.metrics.replace(/\/metrics$/, '');
  t.equal((await fetch(`${base}/healthz`)).status, 200);
  let ready = 0;
  for (const deadline = Date.now() + 10_000; ready !== 200 && Date.now() < deadline; await sleep(100))
    ready = (await fetch(`${base}/readyz`)).status;
  t.equal(ready, 200);
  const { families: m } = await scrape(d.metrics);
  t.equal(m.get('sluice_deliveries_in_flight')?.type, 'GAUGE');
  t.ok(m.has('process_resident_memory_bytes'), 'with process metrics');
  d.child.kill('SIGTERM');
});
