/**
 * Receivers that misbehave at the socket level, against a real test node with its dispatcher.
 * docs/webhooks.md: "Answer with any 2xx within 10 seconds. Anything else (...a connection error,
 * or no full answer in 10 s) is a failure, and Sluice retries it." A response body is read up to
 * 64 KiB and no further: a 2xx is judged on its status line and head, so a 2xx with a huge body is
 * a success and the rest of the body is never read (the connection is closed instead).
 *
 * Whatever the receiver does, Sluice must let go of the connection within the 10 s limit of the
 * attempt (a drip-fed answer is cut at 10 s in total, not 10 s between bytes); the bound checked
 * here is 12 s after the request arrived.
 */
import t from 'tap';
import { randomBytes, randomUUID } from 'node:crypto';
import { startTestNode, until } from '../helpers/sluice.ts';
import { publish, registerEndpoint } from '../dispatcher/receiver.ts';
import { attemptDelivery } from '../../outbound/attempt.ts';
import { rawReceiver, send, type RawConn, type RawReceiver } from './raw-receiver.ts';

const MARKER = `marker-${randomUUID()}`;
const isMarker = (conn: RawConn) => conn.headers['x-service-event-id'] === MARKER;
const LIMIT_MS = 12_000; // the 10 s attempt limit, with room for a loaded machine
const HUGE = 10 * 1024 * 1024;

// 600: the first retry comes 50 ms after a failure.
const node = await startTestNode(
  { SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true', SLUICE_TIME_SCALE: '600' },
  { dispatcher: true },
);
const receivers: RawReceiver[] = [];
t.teardown(async () => {
  for (const r of receivers) await r.close();
  await node.close();
});

/** Status line at once, then one byte of a header every second, for a minute: never a full head. */
function dripFeed(conn: RawConn): void {
  send(conn, 'HTTP/1.1 200 OK\r\n');
  const header = `x-drip: ${'a'.repeat(120)}`;
  let i = 0;
  const timer = setInterval(() => {
    if (conn.socket.destroyed || i >= header.length) return void clearInterval(timer);
    send(conn, header[i++]);
  }, 1000);
  conn.socket.once('close', () => clearInterval(timer));
}

/** A full 200 head announcing 100 bytes of body, then one byte of it every second. */
function dripFeedBody(conn: RawConn): void {
  send(conn, 'HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100\r\n\r\n');
  let i = 0;
  const timer = setInterval(() => {
    if (conn.socket.destroyed || i++ >= 100) return void clearInterval(timer);
    send(conn, 'x');
  }, 1000);
  conn.socket.once('close', () => clearInterval(timer));
}

/** 200 with a 10 MiB body, written as fast as the socket takes it. */
function hugeBody(conn: RawConn): void {
  send(conn, `HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: ${HUGE}\r\n\r\n`);
  const chunk = Buffer.alloc(64 * 1024, 0x78);
  let written = 0;
  const pump = () => {
    while (written < HUGE && !conn.socket.destroyed) {
      written += chunk.length;
      const more = send(conn, chunk);
      if (written >= HUGE) {
        conn.socket.write('', () => (conn.finishedWriting = true));
        return;
      }
      if (!more) return void conn.socket.once('drain', pump);
    }
  };
  pump();
}

/** A 200 head announcing 100 bytes, 7 of them, then the receiver closes the socket. */
function closeMidResponse(conn: RawConn): void {
  send(conn, 'HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npartial');
  setTimeout(() => {
    conn.closedByReceiver = true;
    conn.socket.destroy();
  }, 100);
}

/** Bytes that are not HTTP at all; the receiver keeps the connection open. */
function garbage(conn: RawConn): void {
  send(conn, Buffer.concat([Buffer.from('\x00\xffNOT-HTTP \x01\x02\r\n', 'latin1'), randomBytes(512)]));
}

/** Accepts the connection, reads the request, never answers. */
function silent(_conn: RawConn): void {}

t.test('misbehaving receivers: each ends in the right outcome, none holds a connection past 10 s', async (t) => {
  const token = await node.token(await node.client('admin', 'misbehaving'));
  const cases = [
    { name: 'drip-feed', misbehave: dripFeed, retried: true },
    // A 2xx head in time, but the body it announced is not there within 10 s: no full answer.
    { name: 'drip-fed body', misbehave: dripFeedBody, retried: true },
    { name: '10 MiB body', misbehave: hugeBody, retried: false },
    { name: 'close mid-response', misbehave: closeMidResponse, retried: true },
    { name: 'invalid HTTP', misbehave: garbage, retried: true },
    { name: 'never answers', misbehave: silent, retried: true },
  ];
  const rs: RawReceiver[] = [];
  for (const c of cases) {
    // The marker (the barrier below) is answered cleanly, whatever the receiver does to others.
    const r = await rawReceiver(
      c.misbehave,
      (conn) => conn.headers['x-service-delivery-attempt'] !== '1' || conn.headers['x-service-event-id'] === MARKER,
    );
    receivers.push(r);
    rs.push(r);
    const ep = await registerEndpoint(node, token, r.url, ['telemetry.exported']);
    t.equal(ep.state, 'ACTIVE', `${c.name}: the receiver answered its ping`);
  }
  const pub = await publish(node, token, { type: 'telemetry.exported', data: { misbehaving: true } });
  t.equal(pub.status, 202);
  t.equal(pub.json.matched_endpoints, cases.length);

  // Every first attempt arrives, and each of them gets its connection closed within the limit.
  for (const [i, c] of cases.entries()) {
    const [first] = await rs[i].until((e) => e.length >= 1, 15_000, `${c.name}: attempt 1`);
    t.equal(first.headers['x-service-delivery-attempt'], '1', `${c.name}: attempt 1`);
    t.equal(first.headers['x-service-event-id'], pub.json.id);
  }
  const deadline = Math.max(...rs.map((r) => r.events()[0].requestAt!)) + LIMIT_MS + 3000;
  while (rs.some((r) => r.events()[0].closedAt === null) && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 50));
  for (const [i, c] of cases.entries()) {
    const first = rs[i].events()[0];
    t.not(first.closedAt, null, `${c.name}: the connection of attempt 1 was closed`);
    const heldMs = (first.closedAt ?? Date.now()) - first.requestAt!;
    t.ok(
      heldMs <= LIMIT_MS,
      `${c.name}: connection closed ${heldMs} ms after the request arrived (at most ${LIMIT_MS} ms)`,
    );
    if (c.name !== 'close mid-response') t.notOk(first.closedByReceiver, `${c.name}: it was Sluice that closed it`);
  }

  const huge = rs[cases.findIndex((c) => c.misbehave === hugeBody)].events()[0];
  t.notOk(huge.finishedWriting, '10 MiB body: Sluice closed the connection before the body was all written');
  t.ok(
    huge.bytesOut < HUGE,
    `10 MiB body: the socket took ${huge.bytesOut} bytes before Sluice closed it (less than the ${HUGE} announced)`,
  );

  // The failures are retried: attempt 2 arrives (and is answered 200).
  for (const [i, c] of cases.entries()) {
    if (!c.retried) continue;
    const events = await rs[i].until((e) => e.length >= 2, 20_000, `${c.name}: attempt 2`);
    t.same(
      events.slice(0, 2).map((e) => e.headers['x-service-delivery-attempt']),
      ['1', '2'],
      `${c.name}: a failure, retried with X-Service-Delivery-Attempt: 2`,
    );
    t.equal(events[1].headers['x-service-event-id'], pub.json.id, `${c.name}: the same event`);
  }
  // A 2xx head within the limit is a success, whatever the size of its body: never retried. The
  // barrier: a marker event published now reaches every receiver after any retry already decided.
  const marker = await publish(node, token, { type: 'telemetry.exported', id: MARKER, data: { marker: true } });
  t.equal(marker.json.matched_endpoints, cases.length);
  const before = async (r: RawReceiver, name: string) =>
    (await r.until((e) => e.some(isMarker), 30_000, `${name}: the marker`)).filter((e) => !isMarker(e));
  t.equal(
    (await before(rs[cases.findIndex((c) => c.misbehave === hugeBody)], '10 MiB body')).length,
    1,
    '10 MiB body: a 2xx, delivered once, not retried',
  );
  for (const [i, c] of cases.entries())
    if (c.retried) t.equal((await before(rs[i], c.name)).length, 2, `${c.name}: delivered by attempt 2, no attempt 3`);
  // A receiver has the marker's request before the dispatcher has read its answer: the last
  // attempts leave the gauge once their answers are read (within the 10 s attempt limit).
  const render = () =>
    (node.workers.dispatcher as unknown as { metrics: { render(): Promise<string> } }).metrics.render();
  const settled = (m: string) => /^sluice_deliveries_in_flight 0$/m.test(m);
  const metrics = await until(render, settled, 15_000, 'the in-flight gauge at 0').catch(render);
  t.match(metrics, /^sluice_deliveries_in_flight 0$/m, 'nothing left in flight');
});

t.test('the attempt limit covers the target check too: a check that never ends is cut at the limit', async (t) => {
  const started = Date.now();
  const attempt = attemptDelivery(
    'http://hooks.example.com/hook',
    '{}',
    {},
    { timeoutMs: 300, checkTarget: () => new Promise<void>(() => {}) },
  );
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([attempt, new Promise<null>((r) => (timer = setTimeout(() => r(null), 5000)))]);
  clearTimeout(timer);
  if (outcome === null) return void t.fail('the attempt was still waiting on its target check after 5 s');
  t.equal(outcome.ok, false);
  t.equal(outcome.status, null);
  t.match(outcome.error, /no full response within 300 ms/);
  t.ok(Date.now() - started < 5000, `gave up after ${Date.now() - started} ms`);
});
