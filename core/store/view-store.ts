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
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { randomBytes } from 'node:crypto';
import { open, type Database, type Key, type RootDatabase } from 'lmdb';

export type { Database, Key };

/** Bumped when the layout of any stored view changes: an older store is emptied and rebuilt. */
const FORMAT = 2;
/** Named databases one store can hold (LMDB fixes the number when it opens). */
const MAX_DBS = 64;

export class ViewStore {
  private readonly dbs: Database<unknown, Key>[] = [];
  private readonly offsets: Database<string, [string, number]>;

  private constructor(
    private readonly root: RootDatabase,
    /** The directory ('' for a temporary store). */
    readonly path: string,
  ) {
    this.offsets = this.db<string, [string, number]>('offsets');
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
    return new ViewStore(root, dir);
  }

  /**
   * A store for a one-off reader (`sluice audit verify`): its files in the system's temporary
   * directory are unlinked at once, so whatever happens it vanishes with the process (or with close()).
   */
  static temporary(): ViewStore {
    const file = join(tmpdir(), `sluice-views-${process.pid}-${randomBytes(4).toString('hex')}.mdb`);
    const root = open({ path: file, noSync: true, maxDbs: MAX_DBS });
    for (const f of [file, `${file}-lock`]) rmSync(f, { force: true });
    return new ViewStore(root, '');
  }

  /** A named database of this store; `binary` values are stored as given (raw record bytes). */
  db<V, K extends Key = Key>(name: string, encoding: 'msgpack' | 'binary' = 'msgpack'): Database<V, K> {
    const db = this.root.openDB<V, K>(name, { encoding });
    this.dbs.push(db as Database<unknown, Key>);
    return db;
  }

  /**
   * Runs `fn` in one write transaction, committed when the promise resolves. Reads inside `fn` see
   * its own writes; a throw does not undo the writes made before it. The commit is asynchronous
   * (LMDB flushes to disk after it, off the main thread).
   */
  transaction<T>(fn: () => T): Promise<T> {
    return this.root.transaction(fn);
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
    for (const db of this.dbs) db.clearSync();
  }

  async close(): Promise<void> {
    await this.root.close();
  }
}
