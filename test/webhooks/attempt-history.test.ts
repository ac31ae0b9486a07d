/**
 * The attempt history behind the console: the dispatcher reports every attempt on
 * `sluice.attempts`, and `GET /v1/webhooks/endpoints/{id}/attempts` and `GET /v1/webhooks/stats`
 * answer from it, scope-checked and per tenant. The view itself stays bounded per endpoint.
 */
import t from 'tap';
import { startTestNode, call, until } from '../helpers/sluice.ts';
import { receiver, registerEndpoint, publish, type TestReceiver } from '../dispatcher/receiver.ts';
import {
  AttemptHistory,
  HISTORY_PER_ENDPOINT,
  HISTORY_MAX_AGE_MS,
  type AttemptRecord,
} from '../../core/webhooks/attempt-history.ts';
import { ViewStore } from '../../core/store/view-store.ts';
import { DigestBuilder, SAMPLE_PER_WINDOW } from '../../core/webhooks/attempt-digest.ts';

/** A record of the attempts topic holding `value` as JSON, as the history's consumer hands it over. */
const attemptsRecord = (value: unknown, timestamp: number) => ({
  topic: 'attempts',
  partition: 0,
  offset: '0',
  key: 'k',
  value: Buffer.from(JSON.stringify(value)),
  headers: {},
  timestamp,
});

const SCALE = 4320; // the first retries come within a second or so
const node = await startTestNode(
  { SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true', SLUICE_TIME_SCALE: String(SCALE) },
  { dispatcher: true },
);
const receivers: TestReceiver[] = [];
t.teardown(async () => {
  for (const r of receivers) await r.close();
  await node.close();
});
const admin = await node.client('admin', 'acme');
const token = await node.token(admin);
const readOnly = await node.token(admin, 'webhooks:read');
const publishOnly = await node.token(admin, 'events:publish');
const otherToken = await node.token(await node.client('admin', 'globex'));

t.test('a delivery that fails twice then succeeds shows three attempts, newest first, and its rates', async (t) => {
  const r = await receiver(500);
  receivers.push(r);
  r.answerFor = () => (r.events().length < 2 ? 500 : 200); // called before the hit is recorded
  const ep = await registerEndpoint(node, token, r.url, ['pipeline.failed']);
  const ev = (await publish(node, token, { type: 'pipeline.failed', data: { run: 7 } })).json;
  const path = `/v1/webhooks/endpoints/${ep.id}/attempts?event_id=${ev.id}`;
  const res = await until(
    () => call(node.base, 'GET', path, { token: readOnly }),
    (x) => x.status === 200 && x.json.data.length === 3,
    30_000,
    'three attempts listed',
  );
  const data = res.json.data as Array<Record<string, any>>;
  t.same(
    data.map((a) => a.attempt),
    [3, 2, 1],
    'newest first',
  );
  t.same(
    data.map((a) => a.status),
    [200, 500, 500],
  );
  t.same(
    data.map((a) => a.ok),
    [true, false, false],
  );
  t.same(
    data.map((a) => a.outcome),
    ['delivered', 'retry', 'retry'],
  );
  t.equal(new Set(data.map((a) => a.delivery_id)).size, 1, 'one delivery');
  t.ok(
    data.every(
      (a) =>
        a.event_id === ev.id &&
        a.event_type === 'pipeline.failed' &&
        Number.isInteger(a.duration_ms) &&
        a.duration_ms >= 0 &&
        !Number.isNaN(Date.parse(a.at)),
    ),
  );
  t.equal(data[1].error, 'HTTP 500');
  t.equal(
    (
      await call(
        node.base,
        'GET',
        `/v1/webhooks/endpoints/${ep.id}/attempts?delivery_id=${data[0].delivery_id}&limit=1`,
        { token: readOnly },
      )
    ).json.data.length,
    1,
    'limit and delivery_id filter',
  );

  const stats = (await call(node.base, 'GET', '/v1/webhooks/stats', { token: readOnly })).json;
  t.equal(stats.window_seconds, 3600);
  t.equal(stats.series.length, 60, 'one point per minute of the last hour');
  const mine = stats.endpoints.find((e: any) => e.endpoint_id === ep.id);
  t.match(mine, { attempts: 3, delivered: 1, failed: 2, last_error: { status: 500, error: 'HTTP 500' } });
  t.equal(mine.success_rate, 1 / 3);
  t.ok(stats.totals.attempts >= 3);
  const sum = stats.series.reduce((n: number, p: any) => n + p.attempts, 0);
  t.equal(sum, stats.totals.attempts, 'the series adds up to the totals');
  const one = (await call(node.base, 'GET', `/v1/webhooks/stats?endpoint_id=${ep.id}`, { token: readOnly })).json;
  t.equal(one.totals.attempts, 3, 'filtered to the endpoint');
  t.equal(one.endpoints.length, 1);
  t.ok(
    one.series.some((p: any) => p.attempts > 0 && p.latency_avg_ms !== null && p.latency_max_ms >= p.latency_avg_ms),
  );

  // Scope and tenant checks.
  t.equal(
    (await call(node.base, 'GET', path, { token: publishOnly })).status,
    403,
    'events:publish alone cannot read attempts',
  );
  t.equal(
    (await call(node.base, 'GET', '/v1/webhooks/stats', { token: publishOnly })).json.missing_scope,
    'webhooks:read',
  );
  t.equal((await call(node.base, 'GET', path, { token: otherToken })).status, 404, "another tenant's endpoint is 404");
  t.equal((await call(node.base, 'GET', `/v1/webhooks/stats?endpoint_id=${ep.id}`, { token: otherToken })).status, 404);
  const other = (await call(node.base, 'GET', '/v1/webhooks/stats', { token: otherToken })).json;
  t.same(other.endpoints, [], 'the other tenant sees none of it');
  t.equal(other.totals.attempts, 0);
  for (const q of ['limit=0', 'limit=1001', 'event_id=%20bad', `delivery_id=${'x'.repeat(129)}`]) {
    t.equal(
      (await call(node.base, 'GET', `/v1/webhooks/endpoints/${ep.id}/attempts?${q}`, { token })).status,
      400,
      `${q} → 400`,
    );
  }
});

t.test('the history keeps the newest 100 attempts per endpoint and forgets attempts older than 7 days', async (t) => {
  let now = Date.UTC(2026, 0, 1);
  const view = new AttemptHistory('attempts', { now: () => now } as never);
  const store = ViewStore.temporary();
  t.teardown(() => store.close());
  view.attach(store);
  const attempt = (endpoint: string, i: number, at: number): AttemptRecord => ({
    delivery_id: `dlv_${i}`,
    endpoint_id: endpoint,
    tenant_id: 'acme',
    event_id: `evt_${i}`,
    event_type: 'pipeline.failed',
    attempt: 1,
    at,
    duration_ms: 5,
    status: i % 2 ? 500 : 200,
    error: i % 2 ? 'HTTP 500' : null,
    ok: i % 2 === 0,
    outcome: i % 2 ? 'retry' : 'delivered',
  });
  const apply = (a: AttemptRecord) =>
    store.transaction(() =>
      view.apply({
        topic: 'attempts',
        partition: 0,
        offset: '0',
        key: a.endpoint_id,
        value: Buffer.from(JSON.stringify(a)),
        headers: {},
        timestamp: a.at,
      }),
    );
  for (let i = 0; i < 250; i++) await apply(attempt('ep_busy', i, now + i));
  await apply(attempt('ep_quiet', 0, now));
  const kept = view.attempts('acme', 'ep_busy', { limit: 1000 });
  t.equal(kept.length, HISTORY_PER_ENDPOINT, `${HISTORY_PER_ENDPOINT} kept of 250`);
  t.same([kept[0].delivery_id, kept[kept.length - 1].delivery_id], ['dlv_249', 'dlv_150'], 'the newest ones');
  t.equal(view.stats('acme', now + 1000).endpoints.length, 2);
  // Eight days later every record applied sweeps a few of the old ones; the new one stays.
  now += HISTORY_MAX_AGE_MS + 86400_000;
  for (let i = 0; i < 30; i++) await apply(attempt('ep_new', 1000 + i, now + i));
  t.same(view.attempts('acme', 'ep_busy', { limit: 1000 }), [], 'the old endpoint is forgotten');
  t.same(view.attempts('acme', 'ep_quiet', { limit: 1000 }), []);
  t.same(
    view.stats('acme', now + 1000).endpoints.map((e) => e.endpoint_id),
    ['ep_new'],
    'its rates and last error too',
  );
  t.equal(view.attempts('acme', 'ep_new', { limit: 1000 }).length, 30);
});

t.test(
  'a record holding many attempts (as the dispatcher batches them) is applied like the attempts one by one',
  async (t) => {
    const now = Date.UTC(2026, 0, 1, 12);
    const store = ViewStore.temporary();
    t.teardown(() => store.close());
    const one = new AttemptHistory('attempts', { now: () => now } as never);
    const batched = new AttemptHistory('attempts', { now: () => now } as never);
    one.attach(store);
    const store2 = ViewStore.temporary();
    t.teardown(() => store2.close());
    batched.attach(store2);
    const attempt = (endpoint: string, i: number): AttemptRecord => ({
      delivery_id: `dlv_${endpoint}_${i}`,
      endpoint_id: endpoint,
      tenant_id: 'acme',
      event_id: `evt_${i}`,
      event_type: 'pipeline.failed',
      attempt: 1 + (i % 3),
      at: now - 90_000 + i * 100,
      duration_ms: i % 7,
      status: i % 5 ? 200 : 503,
      error: i % 5 ? null : 'HTTP 503',
      ok: i % 5 !== 0,
      outcome: i % 5 ? 'delivered' : 'retry',
    });
    const all = [
      ...Array.from({ length: 250 }, (_, i) => attempt('ep_a', i)),
      ...Array.from({ length: 30 }, (_, i) => attempt('ep_b', i)),
    ];
    const record = (value: unknown) => attemptsRecord(value, now);
    for (const a of all) await store.transaction(() => one.apply(record(a)));
    // Shuffled into two array records, each with a repeated report, one with a malformed entry.
    const shuffled = [...all].sort((x, y) => (x.delivery_id < y.delivery_id ? -1 : 1));
    await store2.transaction(() => batched.apply(record([...shuffled.slice(0, 140), { nonsense: true }, shuffled[3]])));
    await store2.transaction(() => batched.apply(record([...shuffled.slice(140), shuffled[150]])));
    for (const ep of ['ep_a', 'ep_b']) {
      t.same(
        batched.attempts('acme', ep, { limit: 1000 }),
        one.attempts('acme', ep, { limit: 1000 }),
        `${ep}: the same attempts kept, newest first`,
      );
    }
    t.equal(batched.attempts('acme', 'ep_a', { limit: 1000 }).length, HISTORY_PER_ENDPOINT);
    t.same(batched.stats('acme', now), one.stats('acme', now), 'the same series, totals, rates and last errors');
    t.equal(batched.stats('acme', now).totals.attempts, 280);
  },
);

t.test(
  'digests: a window of 1,000 attempts sends its newest 100 failures and 20 others, and counts all 1,000; ' +
    'a quiet endpoint sends all; a digest read twice counts once',
  async (t) => {
    const now = Date.UTC(2026, 0, 1, 12);
    const clock = { now: () => now } as never;
    const stores = [ViewStore.temporary(), ViewStore.temporary()];
    t.teardown(() => {
      for (const s of stores) s.close();
    });
    const one = new AttemptHistory('attempts', clock);
    const digested = new AttemptHistory('attempts', clock);
    one.attach(stores[0]);
    digested.attach(stores[1]);
    const attempt = (endpoint: string, i: number): AttemptRecord => ({
      delivery_id: `dlv_${endpoint}_${i}`,
      endpoint_id: endpoint,
      tenant_id: 'acme',
      event_id: `evt_${i}`,
      event_type: 'order.created',
      attempt: 1,
      // Two minutes of attempts, out of start order (attempts finish in any order).
      at: now - 120_000 + ((i * 7919) % 1000) * 120,
      duration_ms: i % 11,
      status: i % 9 ? 200 : null,
      error: i % 9 ? null : 'timeout',
      ok: i % 9 !== 0,
      outcome: i % 9 ? 'delivered' : 'retry',
    });
    const all = [
      ...Array.from({ length: 1000 }, (_, i) => attempt('ep_busy', i)),
      ...Array.from({ length: 7 }, (_, i) => attempt('ep_quiet', i)),
    ];
    const record = (value: unknown) => attemptsRecord(value, now);
    for (const a of all) await stores[0].transaction(() => one.apply(record(a)));
    const builder = new DigestBuilder();
    for (const a of all) builder.add(a);
    const digests = builder.take();
    t.equal(digests.length, 2, 'one digest per endpoint');
    const busy = digests.find((d) => d.endpoint_id === 'ep_busy')!;
    t.equal(busy.attempts.length, 100 + SAMPLE_PER_WINDOW, 'the busy endpoint sends 120 attempts in full');
    const newestOf = (xs: AttemptRecord[], n: number) => [...xs].sort((x, y) => y.at - x.at).slice(0, n);
    const busyAll = all.filter((a) => a.endpoint_id === 'ep_busy');
    const expected = [
      ...newestOf(
        busyAll.filter((a) => !a.ok),
        100,
      ),
      ...newestOf(
        busyAll.filter((a) => a.ok),
        SAMPLE_PER_WINDOW,
      ),
    ].sort((x, y) => x.at - y.at);
    t.same(
      busy.attempts.map((a) => a.delivery_id),
      expected.map((a) => a.delivery_id),
      'its 100 newest failures (of 112) and 20 newest successes, oldest first',
    );
    t.equal(
      busy.minutes.reduce((n, m) => n + m[1], 0),
      1000,
      'and counts all 1,000 in its minutes',
    );
    t.equal(builder.take().length, 0, 'take() empties the window');
    await stores[1].transaction(() => digested.apply(record(digests)));
    await stores[1].transaction(() => digested.apply(record(digests)));
    t.same(
      digested.attempts('acme', 'ep_quiet', { limit: 1000 }),
      one.attempts('acme', 'ep_quiet', { limit: 1000 }),
      'ep_quiet: all its attempts, as one by one',
    );
    t.same(
      digested.attempts('acme', 'ep_busy', { limit: 1000 }).map((a) => a.delivery_id),
      expected
        .slice(-100)
        .reverse()
        .map((a) => a.delivery_id),
      'ep_busy: the sample, newest first',
    );
    t.same(digested.stats('acme', now), one.stats('acme', now), 'the same series, totals, rates and last errors');
    t.equal(digested.stats('acme', now).totals.attempts, 1007, 'the repeated record was not counted again');
  },
);
