/**
 * The on-disk home of the views too large for the heap (DLQ, audit log): one LMDB environment per
 * process (core/store/location.ts picks its directory). Each view keeps its data in named
 * databases; beside them the store keeps the next offset applied per topic-partition, written in
 * the same transaction as the data, so a restarted process resumes where it stopped. Kafka stays
 * the source of truth: an emptied store is rebuilt from the topics.
 *
 *   const store = await ViewStore.open(dir);
 *   const entries = store.db<Buffer>('dlq.entries', 'binary');
 *   await store.transaction(() => { entries.put(key, value); store.setOffset(topic, 0, 42n); });
 *
 * LMDB reads through a memory map, and every page a process has read stays mapped, counted in its
 * RSS, until the map is closed: a node that lists a large DLQ would come to map the whole file. So
 * the store closes and reopens its environment (a new, empty map; a few ms) once the process's
 * mapped file pages grew by MAP_BUDGET_BYTES, at a moment when no transaction is pending and no
 * reader holds an iterator across turns of the event loop (`hold`). Views keep `Table`s, which
 * follow the reopened environment.
 */
import { readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { randomBytes } from 'node:crypto';
import { open, type Database as LmdbDatabase, type Key, type RangeOptions, type RootDatabase } from 'lmdb';

export type { Key };

/** How far the process's mapped file pages may grow before the stores reopen their maps. */
export const MAP_BUDGET_BYTES = 32 * 2 ** 20;
/** How often the mapped size is read: every so many reads, and on a timer for write-only stores. */
const CHECK_EVERY_READS = 256;
const CHECK_EVERY_MS = 250;
const PAGE_BYTES = 4096;

/** The process's resident file-backed (and shared) pages, in bytes: /proc/self/statm's third field. */
function mappedBytes(): number | null {
  try {
    return Number(readFileSync('/proc/self/statm', 'latin1').split(' ')[2]) * PAGE_BYTES;
  } catch {
    return null; // not Linux: nothing to bound
  }
}

/**
 * A named database of a store, the methods the views use. It follows the store's environment
 * across reopens, so a view keeps it for good.
 */
export class Table<V, K extends Key = Key> {
  /** @internal the database in the store's current environment */
  current: LmdbDatabase<V, K>;
  constructor(
    private readonly store: ViewStore,
    readonly name: string,
    readonly encoding: 'msgpack' | 'binary',
    current: LmdbDatabase<V, K>,
  ) {
    this.current = current;
  }
  get(key: K): V | undefined {
    this.store.read();
    return this.current.get(key);
  }
  doesExist(key: K): boolean {
    this.store.read();
    return this.current.doesExist(key);
  }
  /** Iterate at once, or inside a `store.hold()`: an iterator must not outlive a reopen. */
  getRange(options?: RangeOptions): Iterable<{ key: K; value: V }> {
    this.store.read();
    return this.current.getRange(options);
  }
  getKeys(options?: RangeOptions): Iterable<K> {
    this.store.read();
    return this.current.getKeys(options);
  }
  put(key: K, value: V): Promise<boolean> {
    return this.current.put(key, value);
  }
  remove(key: K): Promise<boolean> {
    return this.current.remove(key);
  }
  clearSync(): void {
    this.current.clearSync();
  }
}

/** The stores open in this process: the mapped size is the process's, so they are bounded together. */
const openStores = new Set<ViewStore>();
let baseline: number | null = null;
let reads = 0;
let timer: NodeJS.Timeout | null = null;

function checkMapped(): void {
  const now = mappedBytes();
  if (now === null) return;
  if (baseline === null || now < baseline) baseline = now;
  if (now - baseline <= MAP_BUDGET_BYTES) return;
  // Until a reopen has dropped the pages (it then measures again), each check asks once more.
  for (const s of openStores) void s.reopenWhenIdle();
}

function watch(store: ViewStore): void {
  openStores.add(store);
  if (!timer) {
    timer = setInterval(checkMapped, CHECK_EVERY_MS);
    timer.unref();
  }
}

function unwatch(store: ViewStore): void {
  openStores.delete(store);
  if (openStores.size === 0 && timer) {
    clearInterval(timer);
    timer = null;
    baseline = null;
  }
}

/** The store's data file as `<device>:<inode>` (null when missing). */
function dataFile(dir: string): string | null {
  try {
    const st = statSync(join(dir, 'data.mdb'));
    return `${st.dev}:${st.ino}`;
  } catch {
    return null;
  }
}

/** Bumped when the layout of any stored view changes: an older store is emptied and rebuilt. */
const FORMAT = 2;
/** Named databases one store can hold (LMDB fixes the number when it opens). */
const MAX_DBS = 64;

export class ViewStore {
  private readonly tables: Table<unknown, Key>[] = [];
  private readonly offsets: Table<string, [string, number]>;
  /** Write transactions not yet committed, and readers holding an iterator across turns. */
  private pending = 0;
  private holds = 0;
  /** Set while the environment is being reopened: transactions wait for it. */
  private reopening: Promise<void> | null = null;
  private reopenWanted = false;
  /** Set between closing the environment and opening it again (a failed open leaves it set). */
  private mapClosed = false;
  /** The data file the environment has open (device and inode), to notice it replaced or removed. */
  private file: string | null;
  private closed = false;
  /** How many times the map was reopened (for tests and the operator's curiosity). */
  reopens = 0;

  private constructor(
    private root: RootDatabase,
    /** The directory ('' for a temporary store). */
    readonly path: string,
    private readonly options: Parameters<typeof open>[0] | null,
  ) {
    this.offsets = this.db<string, [string, number]>('offsets');
    this.file = options ? dataFile(path) : null;
    if (options) watch(this);
  }

  /** The store in `dir` (created when missing; emptied when an older Sluice wrote it). */
  static async open(dir: string): Promise<ViewStore> {
    // noSubdir: false, or lmdb takes a path with a dot in its last part for a file name. The map
    // (address space only; LMDB grows it further when full) starts large: growing it from 128 KB
    // remaps it again and again, and each old mapping's pages stay counted in the RSS.
    const options = { path: dir, noSubdir: false, maxDbs: MAX_DBS, mapSize: 2 ** 34 };
    let root = open(options);
    const format = root.get('format');
    if (format !== undefined && format !== FORMAT) {
      await root.close();
      for (const file of ['data.mdb', 'lock.mdb']) rmSync(join(dir, file), { force: true });
      root = open(options);
    }
    if (format !== FORMAT) await root.put('format', FORMAT);
    return new ViewStore(root, dir, options);
  }

  /**
   * A store for a one-off reader (`sluice audit verify`): its files in the system's temporary
   * directory are unlinked at once, so whatever happens it vanishes with the process (or with close()).
   */
  static temporary(): ViewStore {
    const file = join(tmpdir(), `sluice-views-${process.pid}-${randomBytes(4).toString('hex')}.mdb`);
    const root = open({ path: file, noSync: true, maxDbs: MAX_DBS });
    for (const f of [file, `${file}-lock`]) rmSync(f, { force: true });
    // Its files are already unlinked: it cannot be reopened, and a one-off reader does not need to.
    return new ViewStore(root, '', null);
  }

  /** A named database of this store; `binary` values are stored as given (raw record bytes). */
  db<V, K extends Key = Key>(name: string, encoding: 'msgpack' | 'binary' = 'msgpack'): Table<V, K> {
    const table = new Table<V, K>(this, name, encoding, this.root.openDB<V, K>(name, { encoding }));
    this.tables.push(table as unknown as Table<unknown, Key>);
    return table;
  }

  /**
   * Runs `fn` in one write transaction, committed when the promise resolves. Reads inside `fn` see
   * its own writes; a throw does not undo the writes made before it. The commit is asynchronous
   * (LMDB flushes to disk after it, off the main thread).
   */
  async transaction<T>(fn: () => T): Promise<T> {
    // A wanted reopen goes first, or a steady stream of transactions would put it off for ever.
    while (this.reopening) await this.reopening;
    this.pending++;
    try {
      return await this.root.transaction(fn);
    } finally {
      this.pending--;
      if (this.reopenWanted) void this.reopenWhenIdle();
    }
  }

  /**
   * For a reader that iterates across turns of the event loop (a replay walking the DLQ): the map
   * is not reopened until the returned function is called.
   */
  hold(): () => void {
    this.holds++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.holds--;
      if (this.reopenWanted) void this.reopenWhenIdle();
    };
  }

  /** @internal counts a read; every CHECK_EVERY_READS reads the mapped size is checked. */
  read(): void {
    if (++reads % CHECK_EVERY_READS === 0) setImmediate(checkMapped);
  }

  /**
   * @internal reopens the environment once the pending transactions committed (new ones wait for
   * the reopen) and no reader holds it (a held reader does not stop writes: the reopen waits).
   * Resolves once this reopen, or one already under way, has ended (at once while a reader holds).
   */
  reopenWhenIdle(): Promise<void> {
    if (!this.options || this.closed) return Promise.resolve();
    this.reopenWanted = true;
    if (this.reopening) return this.reopening;
    if (this.holds > 0) return Promise.resolve(); // the reader's release() reopens
    this.reopenWanted = false;
    this.reopening = this.reopen()
      .catch(() => {
        // The environment could not be opened again (its directory gone, a full disk): try once
        // more at the next check; meanwhile reads and transactions fail with lmdb's own error.
        this.reopenWanted = true;
      })
      .finally(() => {
        this.reopening = null;
      });
    return this.reopening;
  }

  private async reopen(): Promise<void> {
    if (!this.mapClosed) {
      while (this.pending > 0) await this.root.committed;
      // Once every write is on disk, closing takes only promise callbacks, no turn of the event
      // loop: no request runs between the close and the open, so no read meets a closed environment.
      await this.root.flushed;
      if (this.closed || this.holds > 0) {
        this.reopenWanted = !this.closed;
        return;
      }
      // The directory was removed or replaced under the running process: the open environment
      // still works on its files, a new one would be empty and the views would lose their data.
      if (dataFile(this.path) !== this.file) return;
      this.mapClosed = true;
      await this.root.close();
    }
    this.root = open(this.options!);
    this.mapClosed = false;
    for (const t of this.tables) t.current = this.root.openDB(t.name, { encoding: t.encoding });
    this.reopens++;
    // Measured here, not at the next check: reads made before that check must count as growth.
    baseline = mappedBytes();
  }

  /** The next offset to apply on a partition (0n: nothing applied yet). */
  offset(topic: string, partition: number): bigint {
    return BigInt(this.offsets.get([topic, partition]) ?? '0');
  }

  /** Inside a transaction: the records before `next` are applied. */
  setOffset(topic: string, partition: number, next: bigint): void {
    void this.offsets.put([topic, partition], next.toString());
  }

  /** Drops every view's data and every offset: the views then read their topics from the beginning. */
  clear(): void {
    for (const t of this.tables) t.clearSync();
  }

  async close(): Promise<void> {
    this.closed = true;
    unwatch(this);
    while (this.reopening) await this.reopening;
    await this.root.close();
  }
}
