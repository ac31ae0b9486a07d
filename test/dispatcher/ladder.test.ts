import t from 'tap';
import { startTestNode, call } from '../helpers/sluice.ts';
import { retryLadder } from '../../core/webhooks/retry-policy.ts';
import { receiver, registerEndpoint, publish, signatureValid, type TestReceiver } from './receiver.ts';

// 4320: the 72-hour span runs in 60 s; DLQ entries live 7 days / 4320 = 140 s.
const SCALE = 4320;
const H = 3600_000;
const node = await startTestNode(
  { SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true', SLUICE_TIME_SCALE: String(SCALE) },
  { dispatcher: true },
);
const receivers: TestReceiver[] = [];
t.teardown(async () => {
  for (const r of receivers) await r.close();
  await node.close();
});
const acme = await node.token(await node.client('admin', 'acme'));
const other = await node.token(await node.client('admin', 'other'));
const acmeReader = await node.token(await node.client('admin', 'acme'), 'webhooks:read');

const r1 = await receiver(500);
const r2 = await receiver('reset');
const r3 = await receiver(500);
receivers.push(r1, r2, r3);
const ep1 = await registerEndpoint(node, acme, r1.url, ['pipeline.failed']);
const ep2 = await registerEndpoint(node, acme, r2.url, ['pipeline.failed', 'inference.failed']);
const ep3 = await registerEndpoint(node, other, r3.url, ['*']);
const e1 = (await publish(node, acme, { type: 'pipeline.failed', data: { n: 1 } })).json;
const e2 = (await publish(node, acme, { type: 'inference.failed', data: { n: 2 } })).json;
const e3 = (await publish(node, acme, { type: 'pipeline.failed', data: { n: 3 } })).json;
const e4 = (await publish(node, other, { type: 'pipeline.failed', data: { n: 4 } })).json;

async function dlq(token: string, query = '') {
  return call(node.base, 'GET', `/v1/webhooks/dlq${query}`, { token });
}

async function untilDlq(token: string, n: number, timeoutMs = 100_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await dlq(token, '?limit=1000');
    if (res.json?.data?.length >= n) return res.json.data;
    if (Date.now() > deadline) throw new Error(`DLQ did not reach ${n} entries (has ${res.json?.data?.length})`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

t.test(
  '17 failures in order, none before its rung (the 17th not before 60 h scaled), fresh signed timestamps, then the DLQ',
  async (t) => {
    const tries = await r1.until((e) => e.filter((h) => h.body.id === e1.id).length >= 17, 100_000, '17 attempts');
    const mine = tries.filter((h) => h.body.id === e1.id);
    t.same(
      mine.map((h) => Number(h.headers['x-service-delivery-attempt'])),
      Array.from({ length: 17 }, (_, i) => i + 1),
      'attempts 1..17 in order',
    );
    const gaps = mine.slice(1).map((h, i) => h.at - mine[i].at);
    // Never before its due time: each gap is at least the rung's nominal delay (jitter only lengthens).
    gaps.forEach((g, i) => {
      t.ok(
        g * SCALE >= retryLadder.rungAfter(i + 1).delayMs * 0.99,
        `gap ${i + 1}: ${((g * SCALE) / 60_000).toFixed(1)} min scaled >= ${retryLadder.rungAfter(i + 1).label}`,
      );
    });
    // Never early holds here. Growing intervals and the 17th attempt by 72 h are the ladder's
    // decisions, checked on an injected clock in ladder-decisions.test.ts: a real broker on a busy
    // machine may run a rung late, so upper bounds here would fail on load, not on a broken ladder.
    const span = (mine[16].at - mine[0].at) * SCALE;
    t.comment(
      `attempt 17 came ${(span / H).toFixed(2)} h (scaled) after attempt 1; gaps in real ms: ${gaps.join(' ')}`,
    );
    t.ok(span >= 60 * H, `attempt 17 at ${(span / H).toFixed(1)} h scaled, not before 60 h`);
    for (const h of mine) {
      t.equal(h.headers['x-service-timestamp'], String(h.body.timestamp));
      t.ok(signatureValid(h, ep1.secret));
    }
    const stamps = mine.map((h) => h.body.timestamp);
    t.ok(
      stamps.every((s, i) => i === 0 || s >= stamps[i - 1]),
      'timestamps never go back',
    );
    t.ok(stamps[16] - stamps[0] >= 40, 'the last attempt carries a timestamp of its own time, not of the first');
    // Whole seconds: each timestamp lies between the arrival of the attempt before it and its own.
    t.ok(
      mine.every(
        (h, i) =>
          h.body.timestamp <= Math.ceil(h.at / 1000) &&
          (i === 0 || h.body.timestamp >= Math.floor(mine[i - 1].at / 1000)),
      ),
      'each timestamp is the time of its attempt',
    );

    const entries = await untilDlq(acme, 5);
    const entry = entries.find(
      (e: { event_id: string; endpoint_id: string }) => e.event_id === e1.id && e.endpoint_id === ep1.id,
    );
    t.ok(entry, 'the DLQ holds the delivery');
    t.same(
      Object.keys(entry).sort(),
      [
        'attempts',
        'dead_lettered_at',
        'endpoint_id',
        'event_id',
        'event_type',
        'expires_at',
        'first_attempt_at',
        'id',
        'last_attempt_at',
        'last_error',
        'last_status',
        'payload',
        'tenant_id',
      ].sort(),
    );
    t.equal(entry.attempts, 17);
    t.equal(entry.last_status, 500);
    t.equal(entry.tenant_id, 'acme');
    t.equal(entry.event_type, 'pipeline.failed');
    t.same(entry.payload.data, { n: 1 });
    t.equal(
      Date.parse(entry.expires_at) - Date.parse(entry.dead_lettered_at),
      Math.round((7 * 24 * H) / SCALE),
      'expires 7 days (scaled) after dead-lettering',
    );
    const reset = entries.find((e: { endpoint_id: string }) => e.endpoint_id === ep2.id);
    t.equal(reset.last_status, null);
    t.type(reset.last_error, 'string');
    t.equal(r1.events().filter((h) => h.body.id === e1.id).length, 17, 'no 18th attempt');
  },
);

t.test('DLQ list: oldest first, filters, paging, limits, tenant isolation', async (t) => {
  const all = await untilDlq(acme, 5);
  t.equal(all.length, 5);
  t.ok(
    all.every(
      (e: { dead_lettered_at: string }, i: number) => i === 0 || e.dead_lettered_at >= all[i - 1].dead_lettered_at,
    ),
    'oldest first',
  );
  t.equal((await dlq(acme, `?endpoint_id=${ep1.id}`)).json.data.length, 2);
  t.equal((await dlq(acme, '?event_type=inference.failed')).json.data.length, 1);
  t.equal((await dlq(acme, `?endpoint_id=${ep2.id}&event_type=pipeline.failed`)).json.data.length, 2);
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const res = await dlq(acmeReader, `?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    t.equal(res.status, 200);
    t.ok(res.json.data.length <= 2);
    seen.push(...res.json.data.map((e: { id: string }) => e.id));
    cursor = res.json.next_cursor;
    pages++;
  } while (cursor);
  t.equal(pages, 3);
  t.same(
    seen,
    all.map((e: { id: string }) => e.id),
    'pages add up to the list, in order',
  );
  for (const q of ['?limit=0', '?limit=1001', '?limit=x', '?cursor=garbage'])
    t.equal((await dlq(acme, q)).status, 400, `${q} → 400`);
  const theirs = await untilDlq(other, 1);
  t.equal(theirs.length, 1);
  t.equal(theirs[0].event_id, e4.id);
  t.equal(theirs[0].endpoint_id, ep3.id);
  t.equal(
    (await dlq(other, `?endpoint_id=${ep1.id}`)).json.data.length,
    0,
    "another tenant's filter finds nothing of acme's",
  );
  const cross = await call(node.base, 'POST', `/v1/webhooks/dlq/${all[0].id}/replay`, { token: other });
  t.equal(cross.status, 404, "another tenant's entry does not exist for the caller");
  const crossBulk = await call(node.base, 'POST', '/v1/webhooks/dlq/replay', {
    token: other,
    body: { ids: [all[0].id] },
  });
  t.same(crossBulk.json, { replayed: 0 });
  const denied = await call(node.base, 'POST', `/v1/webhooks/dlq/${all[0].id}/replay`, { token: acmeReader });
  t.equal(denied.status, 403);
  t.equal(denied.json.missing_scope, 'webhooks:write');
});

t.test('single and bulk replay deliver again with a fresh attempt count and leave the list', async (t) => {
  const all = await untilDlq(acme, 5);
  const byKey = (ev: string, ep: string) =>
    all.find((e: { event_id: string; endpoint_id: string }) => e.event_id === ev && e.endpoint_id === ep);
  r1.answer = 200;
  const one = byKey(e1.id, ep1.id);
  const res = await call(node.base, 'POST', `/v1/webhooks/dlq/${one.id}/replay`, { token: acme });
  t.equal(res.status, 202);
  t.same(res.json, { replayed: 1 });
  t.notOk(
    (await dlq(acme)).json.data.some((e: { id: string }) => e.id === one.id),
    'gone from the list at once',
  );
  const again = await r1.until(
    (e) => e.filter((h) => h.body.id === e1.id).length >= 18,
    20_000,
    'the replayed delivery',
  );
  const last = again.filter((h) => h.body.id === e1.id)[17];
  t.equal(last.headers['x-service-delivery-attempt'], '1', 'a fresh attempt count');
  t.ok(signatureValid(last, ep1.secret));
  t.equal(
    (await call(node.base, 'POST', `/v1/webhooks/dlq/${one.id}/replay`, { token: acme })).status,
    404,
    'a replayed entry cannot be replayed twice',
  );

  const byFilter = await call(node.base, 'POST', '/v1/webhooks/dlq/replay', {
    token: acme,
    body: { endpoint_id: ep1.id },
  });
  t.same(byFilter.json, { replayed: 1 }, 'by filter: the other ep1 entry');
  await r1.until(
    (e) =>
      e.some(
        (h) =>
          h.body.id === e3.id &&
          h.headers['x-service-delivery-attempt'] === '1' &&
          e.filter((x) => x.body.id === e3.id).length === 18,
      ),
    20_000,
    'e3 replayed',
  );

  r2.answer = 200;
  const ids = [byKey(e1.id, ep2.id).id, byKey(e2.id, ep2.id).id];
  const bad = await call(node.base, 'POST', '/v1/webhooks/dlq/replay', {
    token: acme,
    body: { ids, endpoint_id: ep2.id },
  });
  t.equal(bad.status, 400, 'ids and a filter together are refused');
  const byIds = await call(node.base, 'POST', '/v1/webhooks/dlq/replay', {
    token: acme,
    body: { ids: [...ids, 'dlq_unknown'] },
  });
  t.same(byIds.json, { replayed: 2 });
  await r2.until(
    (e) => e.filter((h) => h.headers['x-service-delivery-attempt'] === '1' && h.body.id !== e3.id).length >= 4,
    20_000,
    'ep2 replays',
  );
  const left = (await dlq(acme)).json.data;
  t.same(
    left.map((e: { event_id: string; endpoint_id: string }) => [e.event_id, e.endpoint_id]),
    [[e3.id, ep2.id]],
    'only the entry not replayed is left',
  );
  t.equal((await untilDlq(other, 1)).length, 1, "the other tenant's DLQ is untouched");
});
