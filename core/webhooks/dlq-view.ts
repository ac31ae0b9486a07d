/**
 * The DLQ as every node sees it: `sluice.dlq` (key tenant) holds dead-lettered deliveries and
 * replay markers. The view keeps each tenant's entries minus the replayed and the expired ones
 * (expires_at = dead_lettered_at + 7 days / SLUICE_TIME_SCALE; the topic's retention removes the
 * records themselves later), listed oldest first with an opaque cursor.
 *
 *   ctx.dlq.list('acme', { endpoint_id, event_type, limit: 100, after }, now) // { data, next_cursor }
 *
 * It lives in the process's on-disk store (core/store), not in the heap: entries by (tenant,
 * dead_lettered_at, id) as their expiry (8 bytes) and the record's JSON, so an unfiltered list is one
 * range read of the entries themselves from the cursor on, and a page's body is their JSON spliced
 * together, never parsed (parsing and serialising a page of 100 cost ~2 ms; splicing 0.1 ms); their
 * times by (tenant, id); and one index per filter, keyed so that every filtered list is a range
 * read in (dead_lettered_at, id) order that starts at the cursor:
 *
 *   [tenant, 'ep', endpoint_id, deadMs, id]     [tenant, 'type', event_type, deadMs, id]
 *   [tenant, 'ep+type', endpoint_id, event_type, deadMs, id]
 *
 * each holding the entry's expiry, so expired entries are skipped without reading them. Replayed
 * ids are kept (until the entry would have expired) so a repeated dead-letter of one stays gone.
 * Expired entries and replay marks are swept from the store by lists and, a few per record, as
 * records arrive, so a store that nobody lists (a dispatcher's) does not grow for ever.
 */
import type { StateRecord, StoredView } from '../kafka/state-consumer.ts';
import { addToCount, type Table, type ViewStore } from '../store/view-store.ts';
import type { DlqEntry, DlqReplayMarker } from './records.ts';
import { pageOf, type Position } from '../paging.ts';
import { systemClock, type Clock } from '../clock.ts';

export interface DlqFilter {
  endpoint_id?: string;
  event_type?: string;
}

/** How long a replay mark of an entry this view never held is kept. */
const REPLAYED_UNKNOWN_MS = 8 * 24 * 3600_000;
/**
 * Most expired entries a list's sweep removes (one write transaction, ~50 µs an entry, run on the
 * event loop after the list answered), and each record applied.
 */
const SWEEP_BATCH = 100;
const SWEEP_PER_RECORD = 4;

type IndexKey = (string | number)[];
/** [at, 'e', tenant, id] (an entry expires) or [at, 'r', id] (a replay mark lapses). */
type ExpiryKey = [number, 'e', string, string] | [number, 'r', string];

export class DlqView implements StoredView {
  private store!: ViewStore;
  private entries!: Table<Buffer, [string, number, string]>;
  /** [tenant, id] → dead_lettered_at (ms): where the entry is in `entries`. */
  private ids!: Table<number, [string, string]>;
  /** Index key → the entry's expiry (ms). */
  private index!: Table<number, IndexKey>;
  /** Replayed entry id → until when the mark holds (ms). */
  private replayed!: Table<number, string>;
  private expiry!: Table<number, ExpiryKey>;
  /** Tenant → its entries in the store (expired ones not yet swept included): the gauge reads it. */
  private counts!: Table<number, string>;
  private sweeping = false;

  constructor(
    readonly topic: string,
    private readonly clock: Clock = systemClock,
  ) {}

  attach(store: ViewStore): void {
    this.store = store;
    this.entries = store.table('dlq.entries', 'binary');
    this.ids = store.table('dlq.ids');
    this.index = store.table('dlq.index');
    this.replayed = store.table('dlq.replayed');
    this.expiry = store.table('dlq.expiry');
    this.counts = store.table('dlq.counts');
  }

  /** Runs inside the state consumer's store transaction. */
  apply(r: StateRecord): void {
    this.sweepNow(this.clock.now(), SWEEP_PER_RECORD);
    if (r.value === null) return;
    let v: DlqEntry | DlqReplayMarker;
    try {
      v = JSON.parse(r.value.toString('utf8'));
    } catch {
      return;
    }
    if ((v as DlqReplayMarker).kind === 'replayed') {
      const m = v as DlqReplayMarker;
      const held = this.read(m.tenant_id, m.id);
      const until = held ? Date.parse(held.expires_at) : Date.parse(m.replayed_at) + REPLAYED_UNKNOWN_MS;
      this.replayed.put(m.id, until);
      this.expiry.put([until, 'r', m.id], 0);
      if (held) this.remove(held);
      return;
    }
    const e = v as DlqEntry;
    if (![e.id, e.tenant_id, e.endpoint_id, e.event_type].every((s) => typeof s === 'string')) return;
    const deadMs = Date.parse(e.dead_lettered_at);
    const expiresMs = Date.parse(e.expires_at);
    if (!Number.isFinite(deadMs) || !Number.isFinite(expiresMs)) return;
    // Replayed, or the same dead-letter repeated after a crash.
    if (this.replayed.get(e.id) !== undefined || this.ids.doesExist([e.tenant_id, e.id])) return;
    this.entries.put([e.tenant_id, deadMs, e.id], storedEntry(expiresMs, r.value));
    this.ids.put([e.tenant_id, e.id], deadMs);
    addToCount(this.counts, e.tenant_id, 1);
    for (const key of indexKeys(e, deadMs)) this.index.put(key, expiresMs);
    this.expiry.put([expiresMs, 'e', e.tenant_id, e.id], 0);
  }

  /**
   * Live entries per tenant, for the operator's gauge: the stored counts less the entries expired
   * and not yet swept (read from the expiry index, oldest first: few, as sweeps keep up). It reads
   * one key per tenant, not one per entry: a scrape of a DLQ of millions costs what one of ten does.
   */
  sizes(nowMs: number): Map<string, number> {
    const out = new Map<string, number>();
    for (const { key, value } of this.counts.getRange({})) out.set(key, value);
    for (const tenant of this.expiredUnswept(nowMs)) {
      const n = out.get(tenant);
      if (n !== undefined) out.set(tenant, n - 1);
    }
    this.sweep(nowMs);
    return out;
  }

  /** The tenant of each entry expired by `nowMs` and not swept yet (few: sweeps keep up). */
  private *expiredUnswept(nowMs: number): Generator<string> {
    for (const key of this.expiry.getKeys({ end: [nowMs, 'f'] })) if (key[1] === 'e') yield key[2];
  }

  private read(tenantId: string, id: string): DlqEntry | undefined {
    const deadMs = this.ids.get([tenantId, id]);
    return deadMs === undefined ? undefined : this.readAt(tenantId, { key: deadMs, id });
  }

  /** The entry at a listed position (its dead_lettered_at and id). */
  private readAt(tenantId: string, p: Position): DlqEntry | undefined {
    const json = this.jsonAt(tenantId, p);
    return json === undefined ? undefined : (JSON.parse(json) as DlqEntry);
  }

  /** The entry's JSON at a listed position. */
  private jsonAt(tenantId: string, p: Position): string | undefined {
    const stored = this.entries.get([tenantId, p.key, p.id]);
    return stored === undefined ? undefined : entryJson(stored);
  }

  private remove(e: DlqEntry): void {
    this.entries.remove([e.tenant_id, Date.parse(e.dead_lettered_at), e.id]);
    this.ids.remove([e.tenant_id, e.id]);
    this.expiry.remove([Date.parse(e.expires_at), 'e', e.tenant_id, e.id]);
    addToCount(this.counts, e.tenant_id, -1);
    for (const key of indexKeys(e, Date.parse(e.dead_lettered_at))) this.index.remove(key);
  }

  /** The entry when it belongs to `tenantId` and is still listed. */
  get(tenantId: string, id: string, nowMs: number): DlqEntry | undefined {
    const e = this.read(tenantId, id);
    return e && Date.parse(e.expires_at) > nowMs ? e : undefined;
  }

  /** Every listed entry of the tenant that passes the filter, oldest first, read one at a time. */
  *stream(tenantId: string, filter: DlqFilter, nowMs: number): Generator<DlqEntry> {
    this.sweep(nowMs);
    for (const p of this.listed(tenantId, filter, null, nowMs)) {
      const e = p.json !== undefined ? (JSON.parse(p.json) as DlqEntry) : this.readAt(tenantId, p);
      if (e) yield e;
    }
  }

  /** How many entries `stream` would give: from the tenant's count, or a filter's index alone. */
  count(tenantId: string, filter: DlqFilter, nowMs: number): number {
    if (unfiltered(filter)) {
      let n = this.counts.get(tenantId) ?? 0;
      for (const tenant of this.expiredUnswept(nowMs)) if (tenant === tenantId) n--;
      return n;
    }
    let n = 0;
    for (const _ of this.listed(tenantId, filter, null, nowMs)) n++;
    return n;
  }

  list(
    tenantId: string,
    q: DlqFilter & { limit: number; after: Position | null },
    nowMs: number,
  ): { data: DlqEntry[]; next_cursor: string | null } {
    const page = this.page(tenantId, q, nowMs);
    return { data: page.data.map((json) => JSON.parse(json) as DlqEntry), next_cursor: page.next_cursor };
  }

  /** `list` as the JSON body of `GET /v1/webhooks/dlq`: the stored entries' JSON, never parsed. */
  listJson(tenantId: string, q: DlqFilter & { limit: number; after: Position | null }, nowMs: number): string {
    const page = this.page(tenantId, q, nowMs);
    return `{"data":[${page.data.join(',')}],"next_cursor":${JSON.stringify(page.next_cursor)}}`;
  }

  private page(
    tenantId: string,
    q: DlqFilter & { limit: number; after: Position | null },
    nowMs: number,
  ): { data: string[]; next_cursor: string | null } {
    this.sweep(nowMs);
    const page = pageOf(this.listed(tenantId, q, q.after, nowMs, q.limit + 1), (p) => p, q.after, q.limit);
    // An index position whose entry is gone is left out: an undefined would make the body invalid JSON.
    const data = page.data.map((p) => p.json ?? this.jsonAt(tenantId, p)).filter((j): j is string => j !== undefined);
    return { data, next_cursor: page.next_cursor };
  }

  /**
   * Positions of the listed entries from `after` on, lazily: unfiltered, with the entries' JSON
   * (read on the way); filtered, from the one index the filter needs.
   */
  private *listed(
    tenantId: string,
    f: DlqFilter,
    after: Position | null,
    nowMs: number,
    expect?: number,
  ): Generator<Listed> {
    if (unfiltered(f)) {
      const start = after ? [tenantId, after.key, after.id] : [tenantId];
      const end = [tenantId, Number.POSITIVE_INFINITY];
      for (const { key, value } of this.entries.getRange({ start, end, expect })) {
        if (expiryOf(value) > nowMs) yield { key: key[1], id: key[2], json: entryJson(value) };
      }
      return;
    }
    const prefix = indexPrefix(tenantId, f);
    const start = after ? [...prefix, after.key, after.id] : prefix;
    for (const { key, value } of this.index.getRange({ start, end: [...prefix, Infinity], expect })) {
      if (value > nowMs) yield { key: key[key.length - 2] as number, id: key[key.length - 1] as string };
    }
  }

  /** Removes what expired by `nowMs` in a transaction of its own, once the caller's turn ended. */
  private sweep(nowMs: number): void {
    if (this.sweeping || !this.expiredBy(nowMs)) return;
    this.sweeping = true;
    setImmediate(() => {
      void this.store
        .transaction(() => this.sweepNow(nowMs, SWEEP_BATCH))
        .catch(() => {}) // e.g. the store closed meanwhile: the next list sweeps again
        .finally(() => (this.sweeping = false));
    });
  }

  private expiredBy(nowMs: number): boolean {
    for (const key of this.expiry.getKeys({ limit: 1 })) return key[0] <= nowMs;
    return false;
  }

  /** Inside a write transaction: forgets up to `max` entries and marks that expired by `nowMs`. */
  private sweepNow(nowMs: number, max: number): void {
    const due: ExpiryKey[] = [];
    for (const key of this.expiry.getKeys({ limit: max })) {
      if (key[0] > nowMs) break;
      due.push(key);
    }
    for (const key of due) this.forget(key);
  }

  private forget(key: ExpiryKey): void {
    this.expiry.remove(key);
    if (key[1] === 'r') {
      if (this.replayed.get(key[2]) === key[0]) this.replayed.remove(key[2]);
      return;
    }
    const e = this.read(key[2], key[3]);
    if (e && Date.parse(e.expires_at) === key[0]) this.remove(e);
  }
}

/** A listed position, with the entry's JSON when the list read it on the way. */
type Listed = Position & { json?: string };

/** An entry as stored: its expiry (ms, a big-endian double) and the record's JSON. */
function storedEntry(expiresMs: number, record: Buffer): Buffer {
  const stored = Buffer.allocUnsafe(8 + record.length);
  stored.writeDoubleBE(expiresMs, 0);
  record.copy(stored, 8);
  return stored;
}

function expiryOf(stored: Buffer): number {
  return stored.readDoubleBE(0);
}

function entryJson(stored: Buffer): string {
  return stored.toString('utf8', 8);
}

function unfiltered(f: DlqFilter): boolean {
  return f.endpoint_id === undefined && f.event_type === undefined;
}

/** The index a filter reads (never called unfiltered: those lists read the entries). */
function indexPrefix(tenantId: string, f: DlqFilter): IndexKey {
  if (f.endpoint_id !== undefined && f.event_type !== undefined)
    return [tenantId, 'ep+type', f.endpoint_id, f.event_type];
  if (f.endpoint_id !== undefined) return [tenantId, 'ep', f.endpoint_id];
  return [tenantId, 'type', f.event_type!];
}

/** The entry's key in each of the three indexes. */
function indexKeys(e: DlqEntry, deadMs: number): IndexKey[] {
  return [{ endpoint_id: e.endpoint_id }, { event_type: e.event_type }, e].map((f) => [
    ...indexPrefix(e.tenant_id, f),
    deadMs,
    e.id,
  ]);
}
