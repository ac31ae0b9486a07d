import t from 'tap';
import { startTestNode, call } from '../helpers/sluice.ts';
import { newDelivery } from '../../core/webhooks/deliveries.ts';
import {
  awaitMarker,
  receiver,
  registerEndpoint,
  publish,
  signatureValid,
  sleep,
  type TestReceiver,
} from './receiver.ts';

// 600: the first retry comes 50 ms after a failure, so "retried" shows within the test.
const node = await startTestNode(
  { SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true', SLUICE_TIME_SCALE: '600' },
  { dispatcher: true },
);
const receivers: TestReceiver[] = [];
t.teardown(async () => {
  for (const r of receivers) await r.close();
  await node.close();
});
const rcv = async (answer: Parameters<typeof receiver>[0] = 200) => {
  const r = await receiver(answer);
  receivers.push(r);
  return r;
};
const tokenFor = async (tenant: string) => node.token(await node.client('admin', tenant));
// Each test its own tenants, so a '*' endpoint of one test does not match another test's events.
const acme = await tokenFor('acme');
const other = await tokenFor('other');

t.test('publish validates its body with JSON paths and needs events:publish', async (t) => {
  const cases: [unknown, string][] = [
    [{ data: {} }, '$.type'],
    [{ type: 'ping', data: {} }, '$.type'],
    [{ type: 'Not A Kind', data: {} }, '$.type'],
    [{ type: 'inference.completed' }, '$.data'],
    [{ type: 'inference.completed', data: {}, id: 'bad id with spaces' }, '$.id'],
    [{ type: 'inference.completed', data: {}, extra: 1 }, '$.extra'],
  ];
  for (const [body, path] of cases) {
    const res = await publish(node, acme, body);
    t.equal(res.status, 400, `${JSON.stringify(body).slice(0, 60)} → 400`);
    t.equal(res.json.code, 'INVALID_REQUEST');
    t.ok(
      res.json.errors.some((e: { path: string }) => e.path === path),
      `names ${path}`,
    );
  }
  const big = await publish(node, acme, { type: 'inference.completed', data: 'x'.repeat(256 * 1024) });
  t.equal(big.status, 413, 'data over 256 KiB → 413');
  t.equal(big.json.code, 'PAYLOAD_TOO_LARGE');
  t.equal(big.json.max_bytes, 256 * 1024, 'naming the limit');
  const reader = await node.token(await node.client('inference-reader', 'acme'));
  const denied = await publish(node, reader, { type: 'inference.completed', data: {} });
  t.equal(denied.status, 403);
  t.equal(denied.json.missing_scope, 'events:publish');
  const custom = await publish(node, acme, { type: 'billing.invoice_paid', data: null });
  t.equal(custom.status, 202, 'a custom <word>.<word> kind is accepted');
});

t.test(
  'fan-out to every matching endpoint of the tenant, filtered by kind, with the exact signed headers',
  async (t) => {
    const [ra, rb, rc, rd] = await Promise.all([rcv(), rcv(), rcv(), rcv()]);
    const a = await registerEndpoint(node, acme, ra.url, ['inference.completed']);
    const b = await registerEndpoint(node, acme, rb.url, ['*']);
    const c = await registerEndpoint(node, acme, rc.url, ['pipeline.failed']);
    const d = await registerEndpoint(node, other, rd.url, ['*']);
    for (const ep of [a, b, c, d]) t.equal(ep.state, 'ACTIVE');
    const res = await publish(node, acme, { type: 'inference.completed', data: { model: 'm1', n: 1 } });
    t.equal(res.status, 202);
    t.equal(res.json.matched_endpoints, 2);
    t.match(res.json.id, /^evt_/);
    const [hitA] = await ra.until((e) => e.length >= 1);
    await rb.until((e) => e.length >= 1);
    const second = await publish(node, acme, { type: 'pipeline.failed', data: { run: 7 } });
    t.equal(second.json.matched_endpoints, 2);
    await rc.until((e) => e.length >= 1);
    await rb.until((e) => e.length >= 2);
    await sleep(300);
    t.equal(ra.events().length, 1, 'a takes only inference.completed');
    t.same(
      rc.events().map((h) => h.body.type),
      ['pipeline.failed'],
      'c takes only pipeline.failed',
    );
    t.same(
      rb
        .events()
        .map((h) => h.body.type)
        .sort(),
      ['inference.completed', 'pipeline.failed'],
      'b takes every kind',
    );
    t.equal(rd.events().length, 0, "another tenant's endpoint gets nothing of acme's events");

    const h = hitA;
    t.same(Object.keys(h.body).sort(), ['created_at', 'data', 'id', 'tenant_id', 'timestamp', 'type']);
    t.equal(h.body.id, res.json.id);
    t.equal(h.body.tenant_id, 'acme');
    t.same(h.body.data, { model: 'm1', n: 1 });
    t.match(h.headers['x-service-signature-256'], /^sha256=[0-9a-f]{64}$/);
    t.ok(signatureValid(h, a.secret), 'an independent HMAC-SHA256 over the raw body matches');
    t.notOk(signatureValid(h, b.secret), "another endpoint's secret does not");
    t.equal(h.headers['x-service-timestamp'], String(h.body.timestamp), 'timestamp header = body.timestamp');
    t.ok(Math.abs(h.body.timestamp - Date.now() / 1000) < 60, 'unix seconds, now');
    t.equal(h.headers['x-service-event-id'], res.json.id);
    t.equal(h.headers['x-service-event-type'], 'inference.completed');
    t.equal(h.headers['x-service-delivery-attempt'], '1');
    t.match(h.headers['content-type'], /application\/json/);
  },
);

t.test('a repeated id within 24 h is accepted once; the same id of another tenant is its own event', async (t) => {
  const acme = await tokenFor('idem-a');
  const other = await tokenFor('idem-b');
  const r = await rcv();
  const rOther = await rcv();
  await registerEndpoint(node, acme, r.url, ['pipeline.completed']);
  await registerEndpoint(node, other, rOther.url, ['pipeline.completed']);
  const body = { type: 'pipeline.completed', data: { run: 1 }, id: 'order-42' };
  const first = await publish(node, acme, body);
  const again = await Promise.all([publish(node, acme, body), publish(node, acme, body)]);
  t.equal(first.status, 202);
  t.same(first.json, { id: 'order-42', matched_endpoints: 1 });
  for (const a of again) t.same({ status: a.status, json: a.json }, { status: 202, json: first.json }, 'same answer');
  const theirs = await publish(node, other, body);
  t.equal(theirs.status, 202);
  await publish(node, acme, { type: 'pipeline.completed', data: { sentinel: true }, id: 'sentinel-1' });
  await r.until((e) => e.some((h) => h.body.id === 'sentinel-1'));
  await rOther.until((e) => e.some((h) => h.body.id === 'order-42'));
  await sleep(500);
  t.equal(r.events().filter((h) => h.body.id === 'order-42').length, 1, 'delivered once');
  t.equal(rOther.events().filter((h) => h.body.id === 'order-42').length, 1);
});

t.test('3xx, 4xx, 5xx, a reset connection and a hang past 10 s each count as a failure and are retried', async (t) => {
  const acme = await tokenFor('failing');
  const answers: Parameters<typeof receiver>[0][] = [302, 404, 500, 'reset', 'hang'];
  const rs = await Promise.all(answers.map((a) => rcv(a)));
  for (const r of rs) r.pingStatus = 200;
  // The 302 points at a live receiver that would answer 200: following it would be a "success".
  const elsewhere = await rcv(200);
  rs[0].redirectTo = elsewhere.url;
  const healthy = await rcv();
  await Promise.all(rs.map((r) => registerEndpoint(node, acme, r.url, ['telemetry.exported'])));
  await registerEndpoint(node, acme, healthy.url, ['pipeline.failed']);
  const pub = await publish(node, acme, { type: 'telemetry.exported', data: { batch: 1 } });
  t.equal(pub.json.matched_endpoints, 5);
  const hangR = rs[4];
  await hangR.until((e) => e.length >= 1, 10_000, 'first attempt at the hanging receiver');
  // While that attempt hangs, other endpoints are served.
  await publish(node, acme, { type: 'pipeline.failed', data: {} });
  await healthy.until((e) => e.length >= 1, 8_000, 'a healthy endpoint during the hang');
  t.equal(hangR.events().length, 1, 'the healthy delivery went out while the hanging attempt was still open');
  for (const [i, r] of rs.entries()) {
    const events = await r.until((e) => e.length >= 2, 30_000, `retry after ${answers[i]}`);
    t.same(
      events.slice(0, 2).map((h) => h.headers['x-service-delivery-attempt']),
      ['1', '2'],
      `${answers[i]}: attempt 1 failed, attempt 2 came`,
    );
    t.equal(events[1].body.id, pub.json.id);
  }
  t.equal(rs[0].events()[0].answer, 302);
  t.same(
    elsewhere.hits.map((h) => h.headers['x-service-event-type']),
    [],
    'the redirect was not followed: its live target received nothing',
  );
});

t.test('a PENDING endpoint holds its deliveries unattempted until verified; a deleted one drops them', async (t) => {
  const acme = await tokenFor('pending');
  const r = await rcv();
  r.pingStatus = 500;
  const ep = await registerEndpoint(node, acme, r.url, ['pipeline.started']);
  t.equal(ep.state, 'PENDING');
  const pub = await publish(node, acme, { type: 'pipeline.started', data: { held: true } });
  t.equal(pub.json.matched_endpoints, 1);
  await sleep(1500);
  t.equal(r.events().length, 0, 'nothing attempted while PENDING');
  r.pingStatus = 200;
  const v = await call(node.base, 'POST', `/v1/webhooks/endpoints/${ep.id}/verify`, { token: acme });
  t.equal(v.status, 200);
  t.equal(v.json.state, 'ACTIVE');
  const [hit] = await r.until((e) => e.length >= 1, 15_000, 'the held delivery after verification');
  t.equal(hit.body.id, pub.json.id);
  t.equal(hit.headers['x-service-delivery-attempt'], '1', 'the wait did not count as attempts');

  const gone = await rcv(500);
  const g = await registerEndpoint(node, acme, gone.url, ['inference.failed']);
  const dispatcher = node.workers.dispatcher as unknown as {
    metrics: { get(n: string, l: Record<string, string>): number };
  };
  const droppedBefore = await dispatcher.metrics.get('sluice_deliveries_total', { outcome: 'dropped' });
  await publish(node, acme, { type: 'inference.failed', data: {} });
  await gone.until((e) => e.length >= 1);
  const del = await call(node.base, 'DELETE', `/v1/webhooks/endpoints/${g.id}`, { token: acme });
  t.equal(del.status, 204);
  const deadline = Date.now() + 15_000;
  while (
    (await dispatcher.metrics.get('sluice_deliveries_total', { outcome: 'dropped' })) === droppedBefore &&
    Date.now() < deadline
  )
    await sleep(50);
  t.ok(
    (await dispatcher.metrics.get('sluice_deliveries_total', { outcome: 'dropped' })) > droppedBefore,
    'the pending retry of a deleted endpoint is dropped and counted',
  );
  const attempts = gone.events().length;
  // The barrier: a marker through another endpoint at the same receiver, published after the drop.
  gone.answer = 200;
  await registerEndpoint(node, acme, gone.url, ['test.marker']);
  const before = await awaitMarker(node, acme, gone, 'test.marker');
  t.equal(before.length, attempts, 'no more attempts after the delete');
});

t.test('a delivery record read twice is sent once (an event written twice), apart or together', async (t) => {
  const r = await rcv(200);
  const ep = await registerEndpoint(node, acme, r.url, ['twice.sent']);
  // A copy is the same record: the same event, created at the same time.
  const created = Date.now();
  const event = (id: string) => ({ id, tenant_id: 'acme', type: 'twice.sent', data: { id }, created_at: created });
  // As the fan-out writes them: keyed by event, so a copy lands in the same partition as the first.
  const write = (id: string, key = id) =>
    node.ctx.producer.send(node.ctx.topics.deliveries, [
      { key, value: JSON.stringify(newDelivery(event(id), ep.id, Date.now())) },
    ]);
  await write('evt_twice_1');
  await r.until((e) => e.length === 1, 30_000, 'the first copy');
  // The copy, then a marker behind it in the same partition: once the marker is in, the copy was read.
  await write('evt_twice_1');
  await write('evt_twice_1-marker', 'evt_twice_1');
  await r.until((e) => e.some((h) => h.body.id === 'evt_twice_1-marker'), 30_000, 'the marker');
  t.equal(r.events().filter((h) => h.body.id === 'evt_twice_1').length, 1, 'the copy was dropped, not sent');

  // Two copies written together (one request): the second is read while the first waits or is under way.
  await node.ctx.producer.send(
    node.ctx.topics.deliveries,
    [0, 1].map(() => ({
      key: 'evt_twice_2',
      value: JSON.stringify(newDelivery(event('evt_twice_2'), ep.id, Date.now())),
    })),
  );
  await write('evt_twice_2-marker', 'evt_twice_2');
  await r.until((e) => e.some((h) => h.body.id === 'evt_twice_2-marker'), 30_000, 'the second marker');
  t.equal(r.events().filter((h) => h.body.id === 'evt_twice_2').length, 1, 'copies read together: sent once');
});
