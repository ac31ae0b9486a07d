/**
 * The DLQ view on disk: 3000 entries (2 tenants, 3 endpoints, 2 event types, ties on
 * dead_lettered_at, some already expired, some expiring within seconds, replay markers before and
 * after their entries, repeated dead-letters) written straight onto the node's DLQ topic, listed
 * with every filter and several page sizes against a reference computed here; then a restart that
 * resumes (applies only what was written meanwhile), a restart from a deleted store (rebuilds,
 * same answers), and a restart after retention removed records past the stored offset.
 */
import t, { type Test } from 'tap';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { Kafka, logLevel, type Producer, type Admin } from 'kafkajs';
import { startTestNode, call, brokers, uniquePrefix, type TestNode } from '../helpers/sluice.ts';
import { readCursor, type Position } from '../../core/paging.ts';
import type { DlqEntry, DlqReplayMarker } from '../../core/webhooks/records.ts';
import type { DlqFilter } from '../../core/webhooks/dlq-view.ts';

const TENANTS = ['acme', 'globex'] as const;
const ENDPOINTS = ['ep_one', 'ep_two', 'ep_three'];
const TYPES = ['pipeline.failed', 'inference.failed'];
const DAY = 86400_000;
const SCALE = 60480; // 7 days scaled: 10 s

const prefix = uniquePrefix('dlqstore');
const kafka = new Kafka({ clientId: 'dlq-store-test', brokers: brokers(), logLevel: logLevel.NOTHING });
const producer: Producer = kafka.producer();
const admin: Admin = kafka.admin();
await producer.connect();
await admin.connect();
let node: TestNode = await startTestNode({}, { prefix });
t.teardown(async () => {
  await node.close();
  await producer.disconnect();
  await admin.disconnect();
  rmSync(join(node.config.dataDir, prefix), { recursive: true, force: true });
});
const topic = node.ctx.topics.dlq;

let seed = 42;
/** mulberry32: the same records on every run. */
const random = (n: number) => {
  seed = (seed + 0x6d2b79f5) | 0;
  let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
  return Math.floor((((x ^ (x >>> 14)) >>> 0) / 4294967296) * n);
};
const hex = (n: number) => Array.from({ length: n }, () => '0123456789abcdef'[random(16)]).join('');

/** The reference: the rules of the DLQ applied to the records in their order (the topic has one partition). */
const ref = new Map<string, DlqEntry>();
const replayed = new Set<string>();
function refApply(v: DlqEntry | DlqReplayMarker): void {
  if ('kind' in v) {
    replayed.add(v.id);
    ref.delete(`${v.tenant_id}/${v.id}`);
  } else if (!replayed.has(v.id) && !ref.has(`${v.tenant_id}/${v.id}`)) ref.set(`${v.tenant_id}/${v.id}`, v);
}
function expected(tenant: string, f: DlqFilter, now: number): string[] {
  return [...ref.values()]
    .filter(
      (e) =>
        e.tenant_id === tenant &&
        Date.parse(e.expires_at) > now &&
        (f.endpoint_id === undefined || e.endpoint_id === f.endpoint_id) &&
        (f.event_type === undefined || e.event_type === f.event_type),
    )
    .sort((a, b) => Date.parse(a.dead_lettered_at) - Date.parse(b.dead_lettered_at) || (a.id < b.id ? -1 : 1))
    .map((e) => e.id);
}

let made = 0;
function newEntry(tenant: string, deadMs: number): DlqEntry {
  const lifetime = random(10) === 0 ? (7 * DAY) / SCALE : 7 * DAY;
  const eventId = `evt_${hex(10)}`;
  const type = TYPES[random(2)];
  made++;
  return {
    id: `dlq_${hex(16)}`,
    event_id: eventId,
    endpoint_id: ENDPOINTS[random(3)],
    tenant_id: tenant,
    event_type: type,
    attempts: 17,
    last_status: 503,
    last_error: null,
    first_attempt_at: new Date(deadMs - 72 * 3600_000).toISOString(),
    last_attempt_at: new Date(deadMs).toISOString(),
    dead_lettered_at: new Date(deadMs).toISOString(),
    expires_at: new Date(deadMs + lifetime).toISOString(),
    payload: { id: eventId, tenant_id: tenant, type, data: { n: made }, created_at: deadMs - 72 * 3600_000 },
  };
}
const marker = (e: DlqEntry): DlqReplayMarker => ({
  kind: 'replayed',
  id: e.id,
  tenant_id: e.tenant_id,
  replayed_at: new Date().toISOString(),
});

/** Writes records in order (and, unless told, into the reference). */
async function write(records: Array<DlqEntry | DlqReplayMarker>, inReference = true): Promise<void> {
  for (let i = 0; i < records.length; i += 500) {
    const chunk = records.slice(i, i + 500);
    await producer.send({
      topic,
      acks: -1,
      messages: chunk.map((v) => ({ key: v.tenant_id, value: JSON.stringify(v) })),
    });
  }
  if (inReference) records.forEach(refApply);
}

/**
 * `n` entries per tenant over a minute from startMs (three per millisecond value: ties broken by id), with replays
 * and repeats.
 */
function batch(n: number, startMs: number): Array<DlqEntry | DlqReplayMarker> {
  const out: Array<DlqEntry | DlqReplayMarker> = [];
  for (const tenant of TENANTS) {
    const entries = Array.from({ length: n }, (_, i) =>
      newEntry(tenant, startMs + Math.floor(i / 3) * Math.floor(180_000 / n)),
    );
    for (const e of entries) {
      const r = random(20);
      if (r === 0) out.push(marker(e)); // replayed before its (repeated) dead-letter arrives: stays gone
      out.push(e);
      if (r === 1) out.push(e); // the same dead-letter repeated after a crash
      if (r === 2 || r === 3) out.push(marker(e));
    }
  }
  return out;
}

async function caughtUp(): Promise<void> {
  const ends = await admin.fetchTopicOffsets(topic);
  const deadline = Date.now() + 30_000;
  while (!ends.every((o) => node.ctx.state.position(topic, o.partition) >= BigInt(o.high))) {
    if (Date.now() > deadline) throw new Error('the DLQ view did not catch up');
    await new Promise((r) => setTimeout(r, 20));
  }
}

const filters: DlqFilter[] = [
  {},
  ...ENDPOINTS.map((endpoint_id) => ({ endpoint_id })),
  ...TYPES.map((event_type) => ({ event_type })),
  ...ENDPOINTS.flatMap((endpoint_id) => TYPES.map((event_type) => ({ endpoint_id, event_type }))),
];

/**
 * Every page of a list, following the opaque cursor as a client would. sizesOk: full pages, the
 * tenant's entries only, and the route's body (listJson) the same page.
 */
function pages(
  tenant: string,
  f: DlqFilter,
  limit: number,
  now: number,
): { ids: string[]; count: number; sizesOk: boolean } {
  const ids: string[] = [];
  let after: Position | null = null;
  let count = 0;
  let sizesOk = true;
  do {
    const page = node.ctx.dlq.list(tenant, { ...f, limit, after }, now);
    // The route's body (the stored JSON spliced) says what the parsed page says.
    const body = node.ctx.dlq.listJson(tenant, { ...f, limit, after }, now);
    if (JSON.stringify(JSON.parse(body)) !== JSON.stringify(page)) sizesOk = false;
    ids.push(...page.data.map((e) => e.id));
    if (page.next_cursor !== null && page.data.length !== limit) sizesOk = false;
    if (page.data.some((e) => e.tenant_id !== tenant)) sizesOk = false;
    after = page.next_cursor === null ? null : readCursor(new URLSearchParams({ cursor: page.next_cursor }));
    count++;
  } while (after);
  return { ids, count, sizesOk };
}

/** Every tenant × filter × page size against the reference at `now`. */
function checkAll(t: Test, now: number, what: string): void {
  let lists = 0;
  let bad = 0;
  for (const tenant of TENANTS) {
    for (const f of filters) {
      const want = expected(tenant, f, now);
      for (const limit of [1000, 37]) {
        const got = pages(tenant, f, limit, now);
        lists++;
        if (!got.sizesOk || got.ids.length !== want.length || got.ids.some((id, i) => id !== want[i])) {
          bad++;
          if (bad <= 3) t.same(got.ids, want, `${what}: ${tenant} ${JSON.stringify(f)} limit ${limit}`);
        }
      }
      const all = [...node.ctx.dlq.stream(tenant, f, now)].map((e) => e.id);
      if (all.join() !== want.join()) {
        bad++;
        t.same(all, want, `${what}: all(${tenant}, ${JSON.stringify(f)})`);
      }
    }
  }
  t.equal(
    bad,
    0,
    `${what}: ${lists} paged lists and ${TENANTS.length * filters.length} all() agree with the reference`,
  );
  const sizes = node.ctx.dlq.sizes(now);
  t.same(
    TENANTS.map((tenant) => sizes.get(tenant) ?? 0),
    TENANTS.map((tenant) => expected(tenant, {}, now).length),
    `${what}: the gauge's live entries per tenant agree with the reference`,
  );
}

// Dead-lettered from 30 s ago to 30 s ahead: the 10 s scaled ones expire from 20 s ago to 40 s ahead, so
// some have expired at the first list and some expire while the test runs, even on a slow machine.
const start = Date.now() - 30_000;
await write(batch(1500, start));
await caughtUp();

t.test('lists, filters and cursors agree with the reference', async (t) => {
  const now = Date.now();
  t.ok(ref.size > 2500, `${ref.size} entries listed in the reference`);
  t.ok(
    expected('acme', {}, now).length < [...ref.values()].filter((e) => e.tenant_id === 'acme').length,
    'some entries already expired',
  );
  checkAll(t, now, 'at first');
  const one = expected('acme', { endpoint_id: 'ep_two', event_type: 'inference.failed' }, now)[0];
  t.equal(node.ctx.dlq.get('acme', one, now)?.id, one, 'get finds an entry');
  t.equal(node.ctx.dlq.get('globex', one, now), undefined, "but not as another tenant's");
  t.equal(node.ctx.dlq.get('acme', [...replayed][0], now), undefined, 'a replayed entry is gone');
  // A cursor without an id (any "<ms>" is a position): every entry dead-lettered at or after it.
  const mid = ref.get(`globex/${expected('globex', {}, now)[700]}`)!;
  const from = Date.parse(mid.dead_lettered_at);
  const page = node.ctx.dlq.list(
    'globex',
    { event_type: mid.event_type, limit: 50, after: readCursor(new URLSearchParams({ cursor: String(from) })) },
    now,
  );
  const want = expected('globex', { event_type: mid.event_type }, now).filter(
    (id) => Date.parse(ref.get(`globex/${id}`)!.dead_lettered_at) >= from,
  );
  t.same(
    page.data.map((e) => e.id),
    want.slice(0, 50),
    'a cursor of a time alone',
  );

  // The HTTP route pages the same way.
  const token = await node.token(await node.client('admin', 'acme'));
  const ids: string[] = [];
  let cursor: string | null = null;
  const pagingFrom = Date.now();
  do {
    const res = await call(
      node.base,
      'GET',
      `/v1/webhooks/dlq?limit=250&endpoint_id=ep_one${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      { token },
    );
    t.equal(res.status, 200);
    ids.push(...res.json.data.map((e: DlqEntry) => e.id));
    cursor = res.json.next_cursor;
  } while (cursor);
  // The pages are read at different times: an entry that expired between two pages may be on the
  // earlier one. So the list is what was live when paging began, less some of what expired meanwhile.
  const pagingTo = Date.now();
  const live = new Set(expected('acme', { endpoint_id: 'ep_one' }, pagingTo));
  const listed = new Set(ids);
  t.same(
    ids,
    expected('acme', { endpoint_id: 'ep_one' }, pagingFrom).filter((id) => live.has(id) || listed.has(id)),
    'GET /v1/webhooks/dlq with cursors: in order, each live entry once',
  );
  t.ok(
    [...live].every((id) => listed.has(id)),
    `every entry live after paging was listed (${live.size} of ${ids.length})`,
  );

  // Entries leave the list when they expire (10 s scaled ones first); later lists see the same.
  // From the clock as it is now, not as the test began: a slow machine may have spent 15 s above.
  const listedAt = Date.now();
  const later = listedAt + 15_000;
  // The last to expire before `later`: the HTTP lists above swept what had expired by then.
  const expiring = [...ref.values()]
    .filter((e) => Date.parse(e.expires_at) > listedAt && Date.parse(e.expires_at) <= later)
    .sort((a, b) => Date.parse(b.expires_at) - Date.parse(a.expires_at))[0];
  t.ok(expiring, 'an entry of the reference expires within the next 15 s');
  if (!expiring) return;
  t.ok(node.ctx.dlq.get(expiring.tenant_id, expiring.id, 0), 'an entry expiring meanwhile is on disk');
  checkAll(t, later, '15 s later');
  t.ok(expected('acme', {}, later).length < expected('acme', {}, listedAt).length, 'the scaled ones expired meanwhile');
  await new Promise((r) => setTimeout(r, 200)); // the sweep that list() started commits
  t.equal(node.ctx.dlq.get(expiring.tenant_id, expiring.id, 0), undefined, 'the sweep removed it from disk');
  checkAll(t, later, 'after the sweep');
});

t.test('a restart resumes from the stored offsets: it applies only what was written meanwhile', async (t) => {
  const dir = node.ctx.store.path;
  await node.close();
  const more = batch(40, Date.now() - 5000);
  await write(more);
  node = await startTestNode({}, { prefix });
  t.equal(node.ctx.store.path, dir, 'the same store directory');
  t.equal(
    node.ctx.state.applied(topic),
    more.length,
    `applied ${more.length} records, not the ${made} entries before them`,
  );
  checkAll(t, Date.now() + 15_000, 'after the restart');
});

t.test('a deleted store is rebuilt from the topic with the same answers', async (t) => {
  const dir = node.ctx.store.path;
  await node.close();
  rmSync(dir, { recursive: true, force: true });
  node = await startTestNode({}, { prefix });
  const total = (await admin.fetchTopicOffsets(topic)).reduce((n, o) => n + Number(o.high) - Number(o.low), 0);
  t.equal(node.ctx.state.applied(topic), total, `applied all ${total} records`);
  checkAll(t, Date.now() + 15_000, 'after the rebuild');
});

t.test('a stored offset below the earliest offset (retention removed records) resumes from the earliest', async (t) => {
  await node.close();
  await write(batch(15, Date.now() - 5000), false); // retention takes them: not in the reference
  const kept = Array.from({ length: 10 }, (_, i) => newEntry('acme', Date.now() - 1000 + i));
  await write(kept);
  const [end] = await admin.fetchTopicOffsets(topic);
  await admin.deleteTopicRecords({
    topic,
    partitions: [{ partition: end.partition, offset: String(Number(end.high) - kept.length) }],
  });
  node = await startTestNode({}, { prefix });
  t.equal(node.ctx.state.applied(topic), kept.length, 'read from the earliest offset left, not from the stored one');
  checkAll(t, Date.now() + 15_000, 'after retention');
});
