/**
 * GET /v1/webhooks/event-types (#22 item 2): the fan-out counts every event it reads (published
 * through the API or written straight to `sluice.events`), reports the counts on
 * `sluice.event-types`, and every ingress node lists its tenant's types of the last 7 days, by name,
 * a page at a time (#31 item 7); another tenant's types never show; a type whose last event is older
 * than 7 days drops out.
 * The nodes run on a ManualClock, so "7 days later" is a call.
 */
import t from 'tap';
import { ManualClock } from '../../core/clock.ts';
import { ViewStore } from '../../core/store/view-store.ts';
import { EventTypeCounts, TypeCountWindow, type TypeCountRecord } from '../../core/webhooks/event-type-counts.ts';
import { call, startTestNode, until, type TestNode } from '../helpers/sluice.ts';

const DAY_MS = 24 * 3600_000;
type Tap = { equal(found: unknown, wanted: unknown, message: string): unknown; same: Tap['equal'] };
const clock = new ManualClock();
const env = { SLUICE_ROTATION_CHECK_MS: '3600000' };
const node = await startTestNode(env, { clock, dispatcher: true });
const other = await startTestNode(env, { clock, prefix: node.config.topicPrefix });
t.teardown(async () => {
  await other.close();
  await node.close();
});

const acme = await node.client('admin', 'acme');
const globex = await node.client('admin', 'globex');
/** Tokens live 15 minutes of the node's clock: fetched again after every jump. */
const tokenOf = (c: typeof acme, scope?: string) => node.token(c, scope);

type Listed = { type: string; count: number; last_published_at: string };
const list = async (on: TestNode, token: string) => call(on.base, 'GET', '/v1/webhooks/event-types', { token });
const summary = (data: Listed[]) => data.map((d) => `${d.type}=${d.count}`);

/** Waits until the list on `on` reads `want` (type=count, by name) and returns it. */
async function listed(t: Tap, on: TestNode, token: string, want: string[], what: string): Promise<Listed[]> {
  const res = await until(
    () => list(on, token),
    (r) => r.status === 200 && JSON.stringify(summary(r.json.data)) === JSON.stringify(want),
    20_000,
    what,
  );
  t.equal(res.json.window_days, 7, `${what}: window_days`);
  t.same(Object.keys(res.json).sort(), ['data', 'next_cursor', 'window_days'], `${what}: the contract's fields`);
  t.equal(res.json.next_cursor, null, `${what}: one page`);
  return res.json.data;
}

async function publish(token: string, type: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const res = await call(node.base, 'POST', '/v1/webhooks/events', { token, body: { type, data: { i } } });
    if (res.status !== 202) throw new Error(`publish ${type}: ${res.status} ${res.text}`);
  }
}

t.test('types are counted per tenant, listed by name on every ingress node, and drop out after 7 days', async (t) => {
  const start = clock.now();
  let acmeToken = await tokenOf(acme);
  const empty = (await list(other, acmeToken)).json;
  t.same(empty, { window_days: 7, data: [], next_cursor: null }, 'nothing published: an empty list');

  await publish(acmeToken, 'legacy.import', 2);
  await listed(t, other, acmeToken, ['legacy.import=2'], 'the first type shows');

  clock.advance(6 * DAY_MS);
  acmeToken = await tokenOf(acme);
  const globexToken = await tokenOf(globex);
  const later = clock.now();
  await publish(acmeToken, 'order.created', 3);
  await publish(acmeToken, 'order.shipped', 1);
  await publish(globexToken, 'billing.paid', 2);
  await publish(globexToken, 'order.created', 1);
  // A data-plane producer writes straight to the events topic: counted all the same.
  const direct = Array.from({ length: 4 }, (_, i) => ({
    key: 'acme',
    value: JSON.stringify({
      id: `direct-${i}`,
      tenant_id: 'acme',
      type: 'sensor.reading',
      data: {},
      created_at: later,
    }),
  }));
  await node.ctx.producer.send(node.ctx.topics.events, direct);

  const want = ['legacy.import=2', 'order.created=3', 'order.shipped=1', 'sensor.reading=4'];
  for (const on of [other, node]) {
    const data = await listed(t, on, acmeToken, want, `acme's four types, by name (${on.base})`);
    const at = Object.fromEntries(data.map((d) => [d.type, d.last_published_at]));
    t.equal(at['legacy.import'], new Date(start).toISOString(), 'last_published_at: when the fan-out read it');
    t.equal(at['order.created'], new Date(later).toISOString());
    t.equal(at['sensor.reading'], new Date(later).toISOString());
  }
  await listed(t, other, globexToken, ['billing.paid=2', 'order.created=1'], "globex sees its own types, not acme's");

  // Paged: limit and cursor as on the other lists; a walk by next_cursor reads each type once, by name.
  const pages: string[][] = [];
  let cursor: string | null = null;
  do {
    const q = cursor === null ? '?limit=3' : `?limit=3&cursor=${encodeURIComponent(cursor)}`;
    const res = await call(other.base, 'GET', `/v1/webhooks/event-types${q}`, { token: acmeToken });
    t.equal(res.status, 200, `page ${pages.length + 1}: 200`);
    pages.push(summary(res.json.data));
    cursor = res.json.next_cursor;
  } while (cursor !== null && pages.length < 5);
  t.same(pages, [want.slice(0, 3), want.slice(3)], 'limit=3: two pages, by name, each type once');
  const one = await call(other.base, 'GET', '/v1/webhooks/event-types?limit=1', { token: acmeToken });
  t.same(summary(one.json.data), ['legacy.import=2'], 'limit=1: the first type');
  const after = await call(other.base, 'GET', `/v1/webhooks/event-types?cursor=${one.json.next_cursor}`, {
    token: acmeToken,
  });
  t.same(summary(after.json.data), want.slice(1), 'its next_cursor: the rest, 100 to a page by default');
  t.equal(after.json.next_cursor, null, 'the last page: next_cursor null');
  const forged = await call(other.base, 'GET', '/v1/webhooks/event-types?cursor=0.order-d', { token: acmeToken });
  t.same(summary(forged.json.data), want.slice(2), 'any cursor of the form is a position: after order.d');
  for (const q of ['limit=0', 'limit=1001', 'limit=x', 'cursor=', 'cursor=not%20a%20cursor', 'cursor=order.created']) {
    const bad = await call(other.base, 'GET', `/v1/webhooks/event-types?${q}`, { token: acmeToken });
    t.equal(bad.status, 400, `${q}: 400`);
    t.equal(bad.json?.code, 'INVALID_REQUEST', `${q}: INVALID_REQUEST`);
    t.match(bad.headers.get('content-type'), /application\/problem\+json/, `${q}: problem+json`);
  }

  const readOnly = await tokenOf(acme, 'webhooks:read');
  t.equal((await list(other, readOnly)).status, 200, 'webhooks:read is enough');
  const publishOnly = await list(other, await tokenOf(acme, 'events:publish'));
  t.equal(publishOnly.status, 403, 'events:publish is not');
  t.equal(publishOnly.json.missing_scope, 'webhooks:read');
  t.equal((await call(other.base, 'GET', '/v1/webhooks/event-types')).status, 401, 'no token: 401');

  // Seven days and a minute after legacy.import's last event: gone; the others stay.
  clock.advance(DAY_MS + 60_000);
  acmeToken = await tokenOf(acme);
  const rest = ['order.created=3', 'order.shipped=1', 'sensor.reading=4'];
  for (const on of [other, node]) await listed(t, on, acmeToken, rest, `legacy.import dropped out (${on.base})`);
  // Published again, it counts from 1 (its old days are not brought back).
  await publish(acmeToken, 'legacy.import', 1);
  const again = ['legacy.import=1', 'order.created=3', 'order.shipped=1', 'sensor.reading=4'];
  await listed(t, other, acmeToken, again, 'a type published again starts afresh');
});

t.test('a type one ingress listed, every ingress lists on its next read (#31 item 9)', async (t) => {
  const token = await tokenOf(acme);
  const types = async (on: TestNode) => {
    const res = await list(on, token);
    if (res.status !== 200) throw new Error(`${on.base}: ${res.status} ${res.text}`);
    return (res.json.data as Listed[]).map((d) => d.type);
  };
  // Written on the topic as a fan-out reports it: the next read on either node lists it. Each
  // process reads the topic at its own pace (a fetch waits up to a second); a read catches up first.
  for (const [i, on] of [other, node, other, node].entries()) {
    const type = `fresh.direct_${i}`;
    const counts = [['acme', type, 1, clock.now()]];
    await node.ctx.producer.send(node.ctx.topics.eventTypes, [
      { key: 'event-types', value: JSON.stringify({ counts }) },
    ]);
    t.ok((await types(on)).includes(type), `${type}, on the topic, is listed by the next read on ${on.base}`);
  }
  // Published through one node: once that node lists it, the other does on its next read.
  for (const i of [0, 1, 2]) {
    const type = `fresh.published_${i}`;
    await publish(token, type, 1);
    await until(
      () => types(node),
      (listed) => listed.includes(type),
      20_000,
      `${type} listed where it was published`,
    );
    t.ok((await types(other)).includes(type), `${type}: listed by the next read on the other node`);
  }
});

/** A record of `sluice.event-types` as the view's consumer hands it over. */
const record = (value: unknown) => ({
  topic: 'event-types',
  partition: 0,
  offset: '0',
  key: 'event-types',
  value: typeof value === 'string' ? Buffer.from(value) : Buffer.from(JSON.stringify(value)),
  headers: {},
  timestamp: 0,
});

t.test('the view holds a bounded number of types per tenant and forgets types quiet for 7 days', async (t) => {
  let now = Date.UTC(2026, 0, 10, 12);
  const ignored: Array<[string, boolean]> = [];
  const view = new EventTypeCounts(
    'event-types',
    { now: () => now },
    (tenant, first) => ignored.push([tenant, first]),
    3,
  );
  const store = ViewStore.temporary();
  t.teardown(() => store.close());
  view.attach(store);
  const apply = (value: unknown) => store.transaction(() => view.apply(record(value)));
  const listOf = (tenant: string) => view.page(tenant, null, 1000).data;

  await apply({
    counts: [
      ['acme', 'a.one', 5, now],
      ['acme', 'a.two', 1, now - 1000],
      ['acme', 'a.three', 2, now],
      ['acme', 'a.four', 9, now],
      ['acme', 'a.five', 1, now],
      ['globex', 'g.one', 1, now],
    ],
  });
  t.same(
    listOf('acme').map((c) => [c.type, c.count]),
    [
      ['a.one', 5],
      ['a.three', 2],
      ['a.two', 1],
    ],
    'the first 3 types are kept, by name',
  );
  t.same(ignored, [
    ['acme', true],
    ['acme', false],
  ]);
  t.same(
    listOf('globex').map((c) => c.type),
    ['g.one'],
    'the cap is per tenant',
  );
  await apply({ counts: [['acme', 'a.two', 10, now + 1000]] });
  t.same(listOf('acme')[2], { type: 'a.two', count: 11, last_at: now + 1000 }, 'a held type goes on counting');

  for (const bad of [
    'not json',
    null,
    { counts: 'x' },
    {
      counts: [
        ['acme', 'a.one', -1, now],
        ['acme', 'a.one', 1.5, now],
        ['acme', '', 1, now],
        ['', 'a.one', 1, now],
        ['acme', 'a.one', 1, 'soon'],
        ['acme', 'x'.repeat(201), 1, now],
        ['acme', 'a.one', 1, now - 8 * DAY_MS],
      ],
    },
  ])
    await apply(bad);
  t.equal(listOf('acme').find((c) => c.type === 'a.one')?.count, 5, 'malformed and too old counts are left out');
  await apply({
    counts: [
      ['globex', 'G.two', 1, now],
      ['globex', 'g-two.x', 1, now],
      ['globex', 'g.two.x', 1, now],
    ],
  });
  t.same(
    listOf('globex').map((c) => c.type),
    ['g.one'],
    'a name not of the <word>.<word> form is no type',
  );
  const first = view.page('acme', null, 2);
  t.same([first.data.map((c) => c.type), first.next], [['a.one', 'a.three'], 'a.three'], 'a page of 2, by name');
  const second = view.page('acme', first.next, 2);
  t.same([second.data.map((c) => c.type), second.next], [['a.two'], null], 'after it: the rest, and no next');
  t.same(
    view.page('acme', 'a.p', 5).data.map((c) => c.type),
    ['a.three', 'a.two'],
    'after a name that is no type',
  );

  // Nine days later, records for another tenant sweep acme's quiet types: room for new ones.
  now += 9 * DAY_MS;
  t.same(listOf('acme'), [], 'nothing of 9 days ago is listed');
  await apply({ counts: [['globex', 'g.two', 1, now]] });
  ignored.length = 0;
  await apply({
    counts: [
      ['acme', 'b.one', 1, now],
      ['acme', 'b.two', 1, now],
      ['acme', 'b.three', 1, now],
    ],
  });
  t.equal(listOf('acme').length, 3, "the quiet types were forgotten: the tenant's three places are free");
  t.same(ignored, []);
});

t.test('the window sums per tenant and type and sends records of at most 500 pairs', async (t) => {
  const sent: TypeCountRecord[] = [];
  const w = new TypeCountWindow((v) => sent.push(JSON.parse(v)));
  w.flush();
  t.same(sent, [], 'an empty window sends nothing');
  w.note('acme', 'a.one', 100);
  w.note('acme', 'a.one', 300);
  w.note('acme', 'a.one', 200);
  w.note('globex', 'a.one', 50);
  w.flush();
  t.same(sent, [
    {
      counts: [
        ['acme', 'a.one', 3, 300],
        ['globex', 'a.one', 1, 50],
      ],
    },
  ]);
  sent.length = 0;
  for (let i = 0; i < 1200; i++) w.note('acme', `t.n${i}`, i);
  w.flush();
  t.same(
    sent.map((r) => r.counts.length),
    [500, 500, 200],
  );
  sent.length = 0;
  w.flush();
  t.same(sent, [], 'flushed: empty again');
});
