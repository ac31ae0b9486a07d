/**
 * Every node's view of `sluice.audit`: the chain's tail (what the next entry links to), entries by
 * id (idempotent retries), each tenant's entries in log order (GET /v1/audit), and the first broken
 * link seen, if any.
 *
 * It lives in the process's on-disk store (core/store): entries as their record's JSON under
 * [tenant, seq, offset], so a tenant's page is a range read from the cursor; id → that key; and
 * three small records (tail, first broken link, records read).
 */
import type { StateRecord, StoredView } from '../kafka/state-consumer.ts';
import type { Table, ViewStore } from '../store/view-store.ts';
import { checkLink, parseEntry, type AuditEntry } from './entry.ts';

export interface BrokenLink {
  offset: string;
  seq: number | null;
  id: string | null;
  problem: string;
}

type EntryKey = [string, number, number];

export class AuditView implements StoredView {
  private entries!: Table<Buffer, EntryKey>;
  private ids!: Table<EntryKey, string>;
  private meta!: Table<unknown, string>;

  constructor(readonly topic: string) {}

  attach(store: ViewStore): void {
    this.entries = store.table('audit.entries', 'binary');
    this.ids = store.table('audit.ids');
    this.meta = store.table('audit.meta');
  }

  /** Runs inside the state consumer's store transaction. */
  apply(r: StateRecord): void {
    this.meta.put('count', this.count + 1);
    const e = parseEntry(r.value);
    const problem = e === null ? 'not JSON' : checkLink(this.tail(), e);
    if (problem && !this.firstBroken)
      this.meta.put('broken', {
        offset: r.offset,
        seq: e?.seq ?? null,
        id: e?.id ?? null,
        problem,
      } satisfies BrokenLink);
    if (e === null || typeof e.hash !== 'string' || !Number.isInteger(e.seq)) return;
    this.meta.put('tail', e);
    // A malformed entry still becomes the tail (as it would in memory) but is not listed.
    if (typeof e.tenant_id !== 'string' || typeof e.id !== 'string') return;
    const key: EntryKey = [e.tenant_id, e.seq, Number(r.offset)];
    this.entries.put(key, r.value!);
    this.ids.put(e.id, key);
  }

  /** Records read, well-formed or not. */
  get count(): number {
    return (this.meta.get('count') as number | undefined) ?? 0;
  }

  get firstBroken(): BrokenLink | null {
    return (this.meta.get('broken') as BrokenLink | undefined) ?? null;
  }

  /** The entry the next append links to (null: the log is empty). */
  tail(): AuditEntry | null {
    return (this.meta.get('tail') as AuditEntry | undefined) ?? null;
  }

  get(id: string): AuditEntry | undefined {
    const key = this.ids.get(id);
    return key === undefined ? undefined : this.read(key);
  }

  /** A tenant's entries with seq > afterSeq, in log order. */
  page(tenantId: string, afterSeq: number, limit: number): { data: AuditEntry[]; more: boolean } {
    const data: AuditEntry[] = [];
    for (const { value } of this.entries.getRange({
      start: [tenantId, afterSeq, Infinity],
      end: [tenantId, Infinity],
      limit: limit + 1,
    })) {
      data.push(JSON.parse(value.toString('utf8')) as AuditEntry);
    }
    const more = data.length > limit;
    return { data: data.slice(0, limit), more };
  }

  private read(key: EntryKey): AuditEntry | undefined {
    const raw = this.entries.get(key);
    return raw === undefined ? undefined : (JSON.parse(raw.toString('utf8')) as AuditEntry);
  }
}
