/**
 * One named table of a view store: an ordered map from keys (strings, numbers or arrays of them,
 * ordered as lmdb orders them: ordered-binary's encoding, compared byte by byte) to values (JSON, or
 * raw bytes for `binary` tables). Reads run on the store's SQLite connection at once; writes made
 * inside `ViewStore.transaction` commit with it.
 *
 *   const index = store.table<number, [string, number, string]>('dlq.index');
 *   index.put(['acme', 1700000000000, 'dl_1'], expiresMs);
 *   for (const { key, value } of index.getRange({ start: ['acme'], end: ['acme', Infinity], limit: 100 })) ...
 *
 * A range is read in growing batches (32 rows, or as many as the caller expects, doubling to 1,024),
 * each its own statement run to its end, so no SQLite cursor stays open while a caller walks a range
 * across turns of the event loop.
 */
import { readKey, toBufferKey } from 'ordered-binary';
import type { Database as Connection, Statement } from 'node-sqlite3-wasm';

type KeyPart = string | number;
export type Key = KeyPart | readonly KeyPart[];

export interface Range<K extends Key> {
  /** Where the walk starts (inclusive); from the first key in walking order when absent. */
  start?: K | readonly KeyPart[];
  /** Where it stops (exclusive); at the last key in walking order when absent. */
  end?: K | readonly KeyPart[];
  limit?: number;
  /** Largest key first (then `start` is the upper bound). */
  reverse?: boolean;
  /**
   * How many rows the caller expects to walk (a page and one more): the first batch reads that
   * many (at most 1,024) instead of 32, so a page of 100 is one statement, not three reading 224.
   */
  expect?: number;
}

const FIRST_BATCH = 32;
const MAX_BATCH = 1024;

/** Prepared statements of one connection, finalized when it closes. */
export class Statements {
  private readonly byText = new Map<string, Statement>();
  constructor(readonly conn: Connection) {}

  get(sql: string): Statement {
    let stmt = this.byText.get(sql);
    if (!stmt) {
      stmt = this.conn.prepare(sql);
      this.byText.set(sql, stmt);
    }
    return stmt;
  }

  finalizeAll(): void {
    for (const stmt of this.byText.values()) stmt.finalize();
    this.byText.clear();
  }
}

export class Table<V, K extends Key = Key> {
  private readonly name: string;

  constructor(
    private readonly stmts: Statements,
    name: string,
    private readonly binary: boolean,
  ) {
    this.name = `"${name.replaceAll('"', '""')}"`;
    stmts.conn.exec(`CREATE TABLE IF NOT EXISTS ${this.name} (k BLOB PRIMARY KEY, v) WITHOUT ROWID`);
  }

  get(key: K): V | undefined {
    const row = this.stmts.get(`SELECT v FROM ${this.name} WHERE k = ?`).get([encodeKey(key)]);
    return row ? this.decode(row.v) : undefined;
  }

  doesExist(key: K): boolean {
    return this.stmts.get(`SELECT 1 FROM ${this.name} WHERE k = ?`).get([encodeKey(key)]) !== null;
  }

  put(key: K, value: V): void {
    this.stmts
      .get(`INSERT OR REPLACE INTO ${this.name} (k, v) VALUES (?, ?)`)
      .run([encodeKey(key), this.encode(value)]);
  }

  remove(key: K): void {
    this.stmts.get(`DELETE FROM ${this.name} WHERE k = ?`).run([encodeKey(key)]);
  }

  /** Writes the value unless the key is there already; true when it wrote. */
  putNew(key: K, value: V): boolean {
    const sql = `INSERT OR IGNORE INTO ${this.name} (k, v) VALUES (?, ?)`;
    return this.stmts.get(sql).run([encodeKey(key), this.encode(value)]).changes > 0;
  }

  /** Removes every key from `start` (inclusive) to `end` (exclusive); returns how many. */
  removeRange(start: K | readonly KeyPart[], end: K | readonly KeyPart[]): number {
    const sql = `DELETE FROM ${this.name} WHERE k >= ? AND k < ?`;
    return this.stmts.get(sql).run([encodeKey(start), encodeKey(end)]).changes;
  }

  /** Removes the first `n` keys from `start` (inclusive) to `end` (exclusive); returns how many. */
  removeFirst(start: K | readonly KeyPart[], end: K | readonly KeyPart[], n: number): number {
    const first = `SELECT k FROM ${this.name} WHERE k >= ? AND k < ? ORDER BY k LIMIT ?`;
    const sql = `DELETE FROM ${this.name} WHERE k IN (${first})`;
    return this.stmts.get(sql).run([encodeKey(start), encodeKey(end), n]).changes;
  }

  *getRange(range: Range<K> = {}): Generator<{ key: K; value: V }> {
    for (const row of this.rows(range, 'k, v')) yield { key: decodeKey(row.k) as K, value: this.decode(row.v) };
  }

  *getKeys(range: Range<K> = {}): Generator<K> {
    for (const row of this.rows(range, 'k')) yield decodeKey(row.k) as K;
  }

  clear(): void {
    this.stmts.conn.exec(`DELETE FROM ${this.name}`);
  }

  private *rows(range: Range<K>, columns: string): Generator<Record<string, unknown>> {
    const end = range.end === undefined ? null : encodeKey(range.end);
    let from = range.start === undefined ? null : encodeKey(range.start);
    let after = false; // after the first batch, `from` is the last key read: exclusive
    let left = range.limit ?? Number.POSITIVE_INFINITY;
    let batch = Math.min(Math.max(range.expect ?? FIRST_BATCH, 1), MAX_BATCH);
    const down = range.reverse === true;
    while (left > 0) {
      const where: string[] = [];
      const args: (Uint8Array | number)[] = [];
      if (from) {
        where.push(`k ${down ? '<' : '>'}${after ? '' : '='} ?`);
        args.push(from);
      }
      if (end) {
        where.push(`k ${down ? '>' : '<'} ?`);
        args.push(end);
      }
      const n = Math.min(left, batch);
      args.push(n);
      const cond = where.length ? ` WHERE ${where.join(' AND ')}` : '';
      const order = down ? 'DESC' : 'ASC';
      const rows = this.stmts.get(`SELECT ${columns} FROM ${this.name}${cond} ORDER BY k ${order} LIMIT ?`).all(args);
      for (const row of rows) yield row;
      if (rows.length < n) return;
      left -= n;
      from = rows[rows.length - 1].k as Uint8Array;
      after = true;
      batch = Math.min(batch * 2, MAX_BATCH);
    }
  }

  private encode(value: V): Uint8Array | string {
    return this.binary ? (value as Uint8Array) : JSON.stringify(value);
  }

  private decode(v: unknown): V {
    if (!this.binary) return JSON.parse(v as string) as V;
    const bytes = v as Uint8Array; // a copy out of SQLite's memory: a Buffer over it copies nothing
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) as V;
  }
}

/**
 * Adds `delta` to a count kept in `table` (a missing key counts 0) and returns the new count; a count
 * that falls to 0 or below is removed rather than kept.
 */
export function addToCount<K extends Key>(table: Table<number, K>, key: K, delta: number): number {
  const n = (table.get(key) ?? 0) + delta;
  if (n > 0) table.put(key, n);
  else table.remove(key);
  return n;
}

/** The key's ordered bytes (a slice ordered-binary never writes over again). */
function encodeKey(key: Key | readonly KeyPart[]): Uint8Array {
  return toBufferKey(key as KeyPart[]);
}

/**
 * Where a key read from SQLite is decoded. ordered-binary reads a number through a DataView whose
 * length it rounds up to a multiple of 4; over a key in a buffer of its own size (what the driver
 * hands out) that throws, and it catches and retries: 16 µs a key instead of 0.6, two thirds of a
 * DLQ page's time. Here the key is copied into a buffer with room past its end.
 */
const scratch = Buffer.allocUnsafeSlow(4096);
const ROOM = 8;

function decodeKey(bytes: unknown): Key {
  const u8 = bytes as Uint8Array;
  // A longer key gets a buffer of its own, sized to a multiple of 4 so the rounded view fits too.
  const into = u8.byteLength + ROOM <= scratch.length ? scratch : Buffer.alloc((u8.byteLength + ROOM + 3) & ~3);
  into.set(u8);
  return readKey(into, 0, u8.byteLength) as Key;
}
