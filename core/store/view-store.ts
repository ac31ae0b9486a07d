/**
 * The on-disk home of the views too large for the heap (DLQ, audit log, attempt history): one
 * SQLite file per process (core/store/location.ts picks its directory), read through SQLite's own
 * bounded page cache (node-sqlite3-wasm: SQLite compiled to WebAssembly, its file reads plain
 * pread calls). Nothing of the file is mapped into the process, so its RSS does not grow with the
 * data read (see docs/decisions.md). Each view keeps its data in named tables; beside them the
 * store keeps the next offset applied per topic-partition, written in the same transaction as the
 * data, so a restarted process resumes where it stopped. Kafka stays the source of truth: an
 * emptied or unreadable store is rebuilt from the topics.
 *
 *   const store = await ViewStore.open(dir);
 *   const entries = store.table<Buffer>('dlq.entries', 'binary');
 *   await store.transaction(() => { entries.put(key, value); store.setOffset(topic, 0, 42n); });
 */
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { tmpdir } from 'node:os';
import { randomBytes } from 'node:crypto';
import sqlite from 'node-sqlite3-wasm';
import { Statements, Table, addToCount, type Key } from './table.ts';

export { Table, addToCount, type Key };

/** Bumped when the layout of any stored view changes: an older store is emptied and rebuilt. */
const FORMAT = 6;
const FILE = 'views.sqlite';
/** SQLite's page cache per store (KiB): the most of the file a process holds in memory. */
const CACHE_KIB = 16_384;

export class ViewStore {
  private readonly tables: Table<unknown, Key>[] = [];
  private readonly offsets: Table<string, [string, number]>;
  private readonly written: Table<number, string>;
  /** The host boot the store was last opened in, and whether it was closed (and synced) since. */
  private readonly life: Table<{ boot: string; clean: boolean }, string>;

  private constructor(
    private readonly stmts: Statements,
    /** The directory ('' for a temporary store). */
    readonly path: string,
  ) {
    this.offsets = this.table<string, [string, number]>('offsets');
    this.written = this.table<number, string>('offsets.written');
    this.life = new Table(stmts, 'life', false);
  }

  /**
   * Whether the file can be trusted: closed cleanly, or last open in this boot of the host (a
   * process that crashed tears nothing).
   */
  private survived(boot: string): boolean {
    try {
      const life = this.life.get('host');
      return life !== undefined && (life.clean || life.boot === boot);
    } catch {
      return false;
    }
  }

  /**
   * The store in `dir` (created when missing). It is emptied, to be rebuilt from Kafka, when an
   * older Sluice wrote it, when it cannot be read, and when the host went down while it was open:
   * commits are not synced to disk (only a clean close syncs), so only then can the file be torn.
   */
  static async open(dir: string): Promise<ViewStore> {
    mkdirSync(dir, { recursive: true });
    for (const file of ['data.mdb', 'lock.mdb']) rmSync(join(dir, file), { force: true }); // an LMDB store (format 2)
    const file = join(dir, FILE);
    // The directory is this process's (core/store/location.ts): a lock left there is a dead holder's.
    rmSync(`${file}.lock`, { recursive: true, force: true });
    const boot = bootId();
    let conn = connectOrNull(file);
    let store = conn && storedFormat(conn) === FORMAT ? new ViewStore(new Statements(conn), dir) : null;
    if (!store?.survived(boot)) {
      if (store)
        store.discard(); // not close(): that would write to a file that may be torn
      else conn?.close();
      for (const f of [file, `${file}-journal`]) rmSync(f, { force: true });
      rmSync(`${file}.lock`, { recursive: true, force: true });
      conn = connect(file, 'TRUNCATE');
      conn.exec(`PRAGMA user_version = ${FORMAT}`);
      store = new ViewStore(new Statements(conn), dir);
    }
    store.life.put('host', { boot, clean: false });
    return store;
  }

  /**
   * A store for a one-off reader (`sluice audit verify`) or a view nobody gave a store: its file in
   * the system's temporary directory is unlinked once open, so it vanishes with the process.
   */
  static temporary(): ViewStore {
    const file = join(tmpdir(), `sluice-views-${process.pid}-${randomBytes(4).toString('hex')}.sqlite`);
    const conn = connect(file, 'MEMORY');
    const store = new ViewStore(new Statements(conn), '');
    // Creating the offsets table took the exclusive lock (held until close): SQLite opens nothing
    // by name from now on, so the names can go.
    rmSync(file, { force: true });
    rmSync(`${file}.lock`, { recursive: true, force: true });
    return store;
  }

  /** A named table of this store; `binary` values are stored as given (raw record bytes), others as JSON. */
  table<V, K extends Key = Key>(name: string, encoding: 'json' | 'binary' = 'json'): Table<V, K> {
    const t = new Table<V, K>(this.stmts, name, encoding === 'binary');
    this.tables.push(t as unknown as Table<unknown, Key>);
    return t;
  }

  /**
   * Runs `fn` in one write transaction: committed when it returns, rolled back when it throws (the
   * promise then rejects). Reads inside `fn` see its own writes. Called inside a transaction, `fn`
   * joins it. Commits are not synced to disk: a process killed mid-write leaves a journal SQLite
   * replays at the next open; a host crash can tear the file, and the next open rebuilds it.
   */
  transaction<T>(fn: () => T): Promise<T> {
    try {
      return Promise.resolve(this.inTransaction(fn));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  private inTransaction<T>(fn: () => T): T {
    const conn = this.stmts.conn;
    if (conn.inTransaction) return fn();
    conn.exec('BEGIN');
    try {
      const result = fn();
      conn.exec('COMMIT');
      return result;
    } catch (err) {
      conn.exec('ROLLBACK');
      throw err;
    }
  }

  /** The next offset to apply on a partition (0n: nothing applied yet). */
  offset(topic: string, partition: number): bigint {
    return BigInt(this.offsets.get([topic, partition]) ?? '0');
  }

  /** Inside a transaction: the records before `next` are applied. */
  setOffset(topic: string, partition: number, next: bigint): void {
    this.offsets.put([topic, partition], next.toString());
    this.written.put('at', Date.now());
  }

  /** When an offset was last stored (wall clock, ms; null: never). */
  writtenAt(): number | null {
    return this.written.get('at') ?? null;
  }

  /** Drops every view's data and every offset: the views then read their topics from the beginning. */
  clear(): void {
    this.inTransaction(() => {
      for (const t of this.tables) t.clear();
    });
  }

  /** Closes the connection without marking or syncing anything. */
  private discard(): void {
    this.stmts.finalizeAll();
    this.stmts.conn.close();
  }

  /** Closes the store; a store on disk is synced first and marked clean. */
  async close(): Promise<void> {
    const conn = this.stmts.conn;
    if (!conn.isOpen) return;
    const onDisk = this.path !== '';
    if (onDisk) this.inTransaction(() => this.life.put('host', { boot: bootId(), clean: true }));
    this.stmts.finalizeAll();
    conn.close();
    if (onDisk) syncClosed(join(this.path, FILE));
  }
}

/** This boot of the host ('' where the system does not say). */
function bootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return '';
  }
}

/** Puts a closed store's file on disk and drops its (empty) journal, so no stale journal is replayed after a reboot. */
function syncClosed(file: string): void {
  fsyncPath(file);
  rmSync(`${file}-journal`, { force: true });
  fsyncPath(dirname(file));
}

function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** A connection to `file`, or null when it is not a database (pragmas fail on it). */
function connectOrNull(file: string): sqlite.Database | null {
  try {
    return connect(file, 'TRUNCATE');
  } catch {
    return null;
  }
}

/** The layout version the file was written with (0: a new file; null: not a readable database). */
function storedFormat(conn: sqlite.Database): number | null {
  try {
    conn.get('SELECT count(*) FROM sqlite_schema');
    return Number(conn.get('PRAGMA user_version')?.user_version ?? 0);
  } catch {
    return null; // not a database, or a torn one (a host crash: writes are not synced)
  }
}

/**
 * A connection holding its file's lock until it closes (no lock taken and dropped per statement),
 * with writes left to the OS to flush: Kafka, not this file, is what survives a host crash.
 */
function connect(file: string, journal: 'TRUNCATE' | 'MEMORY'): sqlite.Database {
  const conn = new sqlite.Database(file);
  try {
    conn.exec(
      'PRAGMA page_size = 8192; PRAGMA locking_mode = EXCLUSIVE; ' +
        `PRAGMA journal_mode = ${journal}; PRAGMA synchronous = OFF; PRAGMA cache_size = -${CACHE_KIB};`,
    );
  } catch (err) {
    conn.close();
    throw err;
  }
  return conn;
}
