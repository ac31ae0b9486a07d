/**
 * The view store bounds the file pages its process maps: past MAP_BUDGET_BYTES of growth it
 * reopens its environment (a new, empty map) when no transaction is pending and no reader holds
 * an iterator, and its tables go on reading and writing through the new one.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { Test } from 'tap';
import { MAP_BUDGET_BYTES, ViewStore } from '../../core/store/view-store.ts';
import { until } from '../helpers/sluice.ts';

const mapped = () => Number(readFileSync('/proc/self/statm', 'latin1').split(' ')[2]) * 4096;
const MiB = 2 ** 20;

async function freshStore(t: Test): Promise<ViewStore> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-map-bound-'));
  const store = await ViewStore.open(dir);
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return store;
}

/** Writes `count` values of 1 KiB under keys 0..count-1. */
async function fill(store: ViewStore, table: ReturnType<ViewStore['db']>, count: number): Promise<void> {
  const value = Buffer.alloc(1024, 7);
  for (let i = 0; i < count; i += 10_000)
    await store.transaction(() => {
      for (let j = i; j < Math.min(count, i + 10_000); j++) void table.put(j, value);
    });
}

t.test('reading a store larger than the budget reopens its map, and the pages go with it', async (t) => {
  const store = await freshStore(t);
  const table = store.db<Buffer, number>('data', 'binary');
  await fill(store, table, 150_000); // ~150 MiB of values: several budgets
  await store.reopenWhenIdle(); // the scan starts from an empty map
  const reopensBefore = store.reopens;
  const before = mapped();
  let readBack = 0;
  for (const { value } of table.getRange({})) readBack += value.length === 1024 ? 1 : 0;
  t.equal(readBack, 150_000, 'every value read back');
  const afterRead = mapped();
  const reopens = await until(
    () => store.reopens,
    (n) => n > reopensBefore,
    30_000,
    'a reopen after the scan',
    20,
  );
  t.ok(reopens > reopensBefore, `the store reopened by itself after the scan (${reopens - reopensBefore} times)`);
  const afterReopen = mapped();
  t.ok(
    afterReopen - before < MAP_BUDGET_BYTES * 2,
    `mapped file pages: ${Math.round(before / MiB)} MiB before the scan, ${Math.round(afterRead / MiB)} MiB ` +
      `after it, ${Math.round(afterReopen / MiB)} MiB once reopened`,
  );
  t.equal(table.get(149_999)?.length, 1024, 'the table reads through the new map');
  await store.transaction(() => void table.put(150_000, Buffer.from('after')));
  t.equal(table.get(150_000)?.toString(), 'after', 'and writes through it');
  t.equal(store.offset('topic', 0), 0n, 'the offsets table follows too');

  // At once after that reopen (before the next timed check), another scan: it counts as growth too.
  let again = 0;
  for (const _ of table.getRange({})) again++;
  t.equal(again, 150_001, 'a second scan right after the reopen');
  const afterSecond = await until(
    () => store.reopens,
    (n) => n > reopens,
    30_000,
    'a reopen after the second scan',
    20,
  );
  t.ok(afterSecond > reopens, 'the store reopened by itself after the second scan too');
});

t.test('a held reader keeps the map until it lets go; a transaction meanwhile waits for nothing', async (t) => {
  const store = await freshStore(t);
  const table = store.db<Buffer, number>('data', 'binary');
  await fill(store, table, 20_000);
  const release = store.hold();
  const iterator = table.getRange({})[Symbol.iterator]();
  t.equal(iterator.next().value?.key, 0, 'the held walk starts');
  const reopensBefore = store.reopens;
  await store.reopenWhenIdle();
  t.equal(store.reopens, reopensBefore, 'no reopen while the walk is held');
  await store.transaction(() => void table.put(99_999, Buffer.from('meanwhile')));
  let n = 1;
  for (let r = iterator.next(); !r.done; r = iterator.next()) n++;
  t.equal(n, 20_000, 'the held walk, across turns and a transaction, reads every entry');
  release();
  await store.reopenWhenIdle(); // joins the reopen the release started
  t.equal(store.reopens, reopensBefore + 1, 'the reopen wanted meanwhile happens once the walk lets go');
  t.equal(table.get(99_999)?.toString(), 'meanwhile', 'the transaction made meanwhile is there');
});

t.test('reads and writes running throughout reopens all succeed', async (t) => {
  const store = await freshStore(t);
  const table = store.db<number, number>('counts');
  let written = 0;
  let readErrors = 0;
  let reads = 0;
  let stop = false;
  const reader = (async () => {
    while (!stop) {
      try {
        for (const _ of table.getRange({ limit: 50 })) reads++;
        table.get(written - 1);
      } catch {
        readErrors++;
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
  })();
  const writer = (async () => {
    while (!stop) {
      const n = written;
      await store.transaction(() => void table.put(n, n));
      written++;
    }
  })();
  const reopensBefore = store.reopens;
  for (let i = 0; i < 20; i++) {
    void store.reopenWhenIdle();
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  stop = true;
  await Promise.all([reader, writer]);
  t.ok(store.reopens - reopensBefore >= 5, `reopened ${store.reopens - reopensBefore} times under load`);
  t.equal(readErrors, 0, `no read failed (${reads} entries read)`);
  let present = 0;
  for (let i = 0; i < written; i++) if (table.get(i) === i) present++;
  t.equal(present, written, `every one of the ${written} writes is there`);
});

t.test('a store whose directory was removed under it goes on with its open files, never a new empty map', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-map-bound-'));
  const store = await ViewStore.open(dir);
  t.teardown(async () => {
    await store.close().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  });
  const table = store.db<number, number>('counts');
  await store.transaction(() => void table.put(1, 1));
  rmSync(dir, { recursive: true, force: true });
  const reopens = store.reopens;
  await store.reopenWhenIdle();
  t.equal(store.reopens, reopens, 'no reopen (it would open an empty store)');
  t.equal(table.get(1), 1, 'what it held is still read');
  await store.transaction(() => void table.put(2, 2));
  t.equal(table.get(2), 2, 'and written');
});
