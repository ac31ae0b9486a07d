/**
 * The view store against real SQLite files: key order as the views rely on it, ranges both ways and
 * across batches, transactions that commit or roll back whole, a restart that keeps the data, a
 * store of an older layout or an unreadable file emptied, a lock left by a killed holder ignored,
 * and the reason it exists: reading the file does not map it into the process.
 */
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { ViewStore } from '../../core/store/view-store.ts';

const dirs: string[] = [];
function freshDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'sluice-store-test-'));
  dirs.push(d);
  return d;
}
t.teardown(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

t.test(
  'keys sort as the views need: numbers before strings, arrays by element, Infinity as an upper bound',
  async (t) => {
    const store = ViewStore.temporary();
    const tbl = store.table<number, [string, number, string]>('ordered');
    const keys: [string, number, string][] = [];
    for (const tenant of ['b', 'a', 'ab'])
      for (const at of [10, 2, 1_700_000_000_000, -5, 0.5]) for (const id of ['y', 'x']) keys.push([tenant, at, id]);
    await store.transaction(() => {
      for (const [i, k] of keys.entries()) tbl.put(k, i);
    });
    const expected = [...keys].sort((p, q) =>
      p[0] < q[0] ? -1 : p[0] > q[0] ? 1 : p[1] - q[1] || (p[2] < q[2] ? -1 : 1),
    );
    t.same([...tbl.getKeys()], expected, 'the whole table in key order');
    t.same(
      [...tbl.getKeys({ start: ['a', 2], end: ['a', Number.POSITIVE_INFINITY] })],
      expected.filter((k) => k[0] === 'a' && k[1] >= 2),
      'start inclusive, Infinity ends the tenant',
    );
    t.same(
      [...tbl.getRange({ start: ['ab', Number.POSITIVE_INFINITY], end: ['ab'], reverse: true })].map((r) => r.key),
      expected.filter((k) => k[0] === 'ab').reverse(),
      'a reverse range walks down from its start',
    );
    t.equal(
      tbl.get(['b', 10, 'x']),
      keys.findIndex((k) => k.join() === 'b,10,x'),
    );
    t.equal(tbl.get(['b', 11, 'x']), undefined);
    t.ok(tbl.doesExist(['a', -5, 'y']));
    tbl.remove(['a', -5, 'y']);
    t.notOk(tbl.doesExist(['a', -5, 'y']), 'removed');
    await store.close();
  },
);

t.test(
  'every kind of key part reads back as written, whatever its length and whatever was read before it',
  async (t) => {
    const store = ViewStore.temporary();
    const tbl = store.table<number, (string | number)[]>('kinds'); // single parts read back as scalars
    const keys: (string | number)[][] = [
      ['a', 1_700_000_000_123, 'dlq_1'],
      ['é✓😀', -5.25, 'x'],
      ['t', 0, 'long'.repeat(1500)], // longer than the decoder's scratch buffer
      ['t', 2 ** 40 + 0.5, 'y'],
      ['t', 'ep', 'ep_3', 1_764_000_012_345, 'dlq_00012345'],
    ];
    for (const [i, k] of keys.entries()) tbl.put(k, i);
    const read = new Map([...tbl.getRange()].map(({ key, value }) => [value, key]));
    for (const [i, k] of keys.entries()) t.same(read.get(i), k, `key ${i} (${JSON.stringify(k).slice(0, 40)})`);
    // A short key read right after a long one: nothing of the long one leaks into it.
    t.same(
      [...tbl.getKeys({ start: ['t', 0], end: ['t', 2 ** 41] })].map((k) => (k as string[])[2].length),
      [6000, 1],
    );
    store.close();
  },
);

t.test('a range longer than a batch is read whole, in order, and stops at its limit', async (t) => {
  const store = ViewStore.temporary();
  const tbl = store.table<{ n: number }, [string, number]>('many');
  await store.transaction(() => {
    for (let n = 0; n < 3000; n++) tbl.put(['t', n], { n });
    tbl.put(['u', 0], { n: -1 });
  });
  const all = [...tbl.getRange({ start: ['t'], end: ['t', Number.POSITIVE_INFINITY] })].map((r) => r.value.n);
  t.equal(all.length, 3000);
  t.ok(
    all.every((n, i) => n === i),
    'every row once, in order',
  );
  t.same(
    [...tbl.getKeys({ start: ['t', 100], limit: 70 })].map((k) => k[1]),
    Array.from({ length: 70 }, (_, i) => 100 + i),
    'limit across two batches',
  );
  // A caller's expected count sizes the first batch only: the walk still goes on past it, or stops short.
  for (const expect of [0, 1, 101, 5000])
    t.same(
      [...tbl.getKeys({ start: ['t', 10], end: ['t', 2010], expect })].map((k) => k[1]),
      Array.from({ length: 2000 }, (_, i) => 10 + i),
      `expecting ${expect} rows reads the range whole, in order`,
    );
  t.same(
    [...tbl.getKeys({ start: ['t', 10], limit: 50, expect: 101 })].map((k) => k[1]),
    Array.from({ length: 50 }, (_, i) => 10 + i),
    'a limit under the expected count still stops the walk',
  );
  const down = [...tbl.getKeys({ start: ['t', 2999], end: ['t', 2000], reverse: true })].map((k) => k[1]);
  t.same([down.length, down[0], down[down.length - 1]], [999, 2999, 2001], 'a reverse range across batches');
  // A walk suspended across a write reads each later batch as it then is: no row twice, none removed.
  const walk = tbl.getKeys({ start: ['t', 0] });
  const seen = [walk.next().value as [string, number]];
  await store.transaction(() => tbl.remove(['t', 2500]));
  for (const k of walk) seen.push(k);
  const ns = seen.filter((k) => k[0] === 't').map((k) => k[1]);
  t.same([ns.length, ns.includes(2500), ns.every((n, i) => i === 0 || n > ns[i - 1])], [2999, false, true]);
  await store.close();
});

t.test('putNew writes only new keys; ranged removes take what they say and count it', async (t) => {
  const store = ViewStore.temporary();
  const tbl = store.table<number, [string, number]>('ranged');
  await store.transaction(() => {
    for (let n = 0; n < 50; n++) tbl.put(['a', n], n);
    tbl.put(['b', 0], -1);
  });
  t.equal(tbl.putNew(['a', 3], 999), false, 'a key that is there is not written');
  t.equal(tbl.get(['a', 3]), 3, 'and keeps its value');
  t.equal(tbl.putNew(['a', 50], 50), true, 'a new key is');
  t.equal(tbl.removeRange(['a', 0], ['a', 10]), 10, 'from start to end, end excluded');
  t.equal(tbl.removeFirst(['a', 0], ['a', Number.POSITIVE_INFINITY], 5), 5, 'the first 5 of the rest');
  t.same(
    [...tbl.getKeys({ start: ['a'], end: ['a', Number.POSITIVE_INFINITY] })].map((k) => k[1]),
    Array.from({ length: 36 }, (_, i) => 15 + i),
    'what is left of a, in order',
  );
  t.equal(tbl.get(['b', 0]), -1, "another prefix's keys untouched");
  t.equal(tbl.removeRange(['c'], ['c', Number.POSITIVE_INFINITY]), 0, 'an empty range removes nothing');
  await store.close();
});

t.test('a transaction commits whole or, when it throws, not at all', async (t) => {
  const store = ViewStore.temporary();
  const tbl = store.table<string, string>('tx');
  await store.transaction(() => {
    tbl.put('a', 'kept');
    store.setOffset('topic', 0, 7n);
  });
  await t.rejects(
    store.transaction(() => {
      tbl.put('b', 'lost');
      store.setOffset('topic', 0, 9n);
      throw new Error('apply failed');
    }),
    { message: 'apply failed' },
  );
  t.same([tbl.get('a'), tbl.get('b')], ['kept', undefined], 'the failed transaction left nothing');
  t.equal(store.offset('topic', 0), 7n, 'nor its offset');
  t.equal(store.offset('topic', 1), 0n, 'a partition never applied starts at 0');
  const inner = await store.transaction(() =>
    store.transaction(() => {
      tbl.put('c', 'nested');
      return 42;
    }),
  );
  t.equal(await inner, 42, 'a transaction inside one joins it');
  t.equal(tbl.get('c'), 'nested');
  store.clear();
  t.same([[...tbl.getKeys()], store.offset('topic', 0)], [[], 0n], 'clear empties the data and the offsets');
  await store.close();
});

t.test(
  'a reopened store keeps its data; an older layout, an unreadable file and a dead lock are dealt with',
  async (t) => {
    const dir = freshDir();
    let store = await ViewStore.open(dir);
    const payload = Buffer.from([0, 1, 2, 255, 254]);
    await store.transaction(() => {
      store.table<Buffer, string>('bin', 'binary').put('p', payload);
      store.setOffset('dlq', 3, 1234n);
    });
    await store.close();

    // A holder killed while holding its lock leaves the lock directory behind.
    mkdirSync(join(dir, 'views.sqlite.lock'), { recursive: true });
    store = await ViewStore.open(dir);
    const read = store.table<Buffer, string>('bin', 'binary').get('p');
    t.ok(Buffer.isBuffer(read) && read.equals(payload), 'bytes back as written');
    t.equal(store.offset('dlq', 3), 1234n, 'the offset survived');
    await store.close();

    // An LMDB store of the previous format beside it is removed; garbage in the file rebuilds it.
    writeFileSync(join(dir, 'data.mdb'), 'old');
    writeFileSync(join(dir, 'views.sqlite'), 'not a database at all, just some bytes');
    store = await ViewStore.open(dir);
    t.notOk(existsSync(join(dir, 'data.mdb')), 'the LMDB file of format 2 is gone');
    t.equal(store.offset('dlq', 3), 0n, 'an unreadable file is replaced by an empty store');
    await store.transaction(() => store.setOffset('dlq', 3, 5n));
    await store.close();
  },
);

t.test('a store left open when the host went down is rebuilt; one left by a crashed process is kept', async (t) => {
  type Life = { boot: string; clean: boolean };
  const dir = freshDir();
  const crashed = async (boot: string) => {
    const store = await ViewStore.open(dir);
    await store.transaction(() => {
      store.setOffset('dlq', 0, 99n);
      store.table<Life, string>('life').put('host', { boot, clean: false });
    });
    // Never closed: the process died with it open (its lock directory stays behind).
  };
  const bootNow = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  await crashed(bootNow);
  let store = await ViewStore.open(dir);
  t.equal(store.offset('dlq', 0), 99n, 'same boot: only the process died, the file is whole');
  await store.close();
  await crashed('a boot before the host crashed');
  store = await ViewStore.open(dir);
  t.equal(store.offset('dlq', 0), 0n, 'another boot and not closed: unsynced writes may be torn, so it is rebuilt');
  await store.transaction(() => store.setOffset('dlq', 0, 7n));
  await store.close();
  store = await ViewStore.open(dir);
  t.same(
    [store.offset('dlq', 0), store.table<Life, string>('life').get('host')],
    [7n, { boot: bootNow, clean: false }],
    'a clean close kept it, and the open marks it in use',
  );
  await store.close();
});

t.test('reading the store does not map its file: the RSS stays flat while 64 MiB are read', async (t) => {
  const store = await ViewStore.open(freshDir());
  const tbl = store.table<Buffer, [string, number]>('big', 'binary');
  const value = Buffer.alloc(4096, 7);
  for (let i = 0; i < 16_384; i += 1024)
    await store.transaction(() => {
      for (let j = i; j < i + 1024; j++) tbl.put(['t', j], value);
    });
  const fileRss = () => Number(/RssFile:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1]) / 1024;
  const before = fileRss();
  let bytes = 0;
  for (let round = 0; round < 2; round++) for (const { value: v } of tbl.getRange({ start: ['t'] })) bytes += v.length;
  for (let i = 0; i < 2000; i++) bytes += tbl.get(['t', (i * 7919) % 16_384])?.length ?? 0;
  t.equal(bytes, (2 * 16_384 + 2000) * 4096, 'every byte read');
  t.ok(fileRss() - before < 16, `file-backed RSS grew ${Math.round(fileRss() - before)} MiB, not with the data read`);
  await store.close();
});
