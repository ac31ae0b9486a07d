/**
 * Every node's view of `sluice.audit`: each tenant's chain tail (what the tenant's next entry links
 * to), entries by id (idempotent retries), each tenant's entries in log order (GET /v1/audit), and
 * the first broken link seen, if any.
 *
 * It lives in the process's on-disk store (core/store): entries as their record's JSON under
 * [tenant, seq, offset], so a tenant's page is a range read from the cursor; id → that key; each
 * tenant's tail (seq, hash); and four small records (the log's last entry, first broken link,
 * records read, whether per-tenant chains have begun: see checkAppended in entry.ts).
 */
import type { StateRecord, StoredView } from '../kafka/state-consumer.ts';
import type { Table, ViewStore } from '../store/view-store.ts';
import { checkAppended, parseEntry, type AuditEntry, type ChainLink } from './entry.ts';

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
  private tails!: Table<ChainLink, string>;

  constructor(readonly topic: string) {}

  attach(store: ViewStore): void {
    this.entries = store.table('audit.entries', 'binary');
    this.ids = store.table('audit.ids');
    this.meta = store.table('audit.meta');
    this.tails = store.table('audit.tails');
  }

  /** Runs inside the state consumer's store transaction. */
  apply(r: StateRecord): void {
    this.meta.put('count', this.count + 1);
    const e = parseEntry(r.value);
    let problem: string | null = 'not JSON';
    if (e !== null) {
      const tenant = typeof e.tenant_id === 'string' ? this.tenantTail(e.tenant_id) : null;
      const checked = checkAppended({ tenant, global: this.tail(), perTenant: this.perTenant }, e);
      problem = checked.problem;
      if (checked.opensPerTenant) this.meta.put('per-tenant', true);
    }
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
    this.tails.put(e.tenant_id, { seq: e.seq, hash: e.hash });
  }

  /** Whether an entry linked only per tenant has been read (from then on no global link is accepted). */
  private get perTenant(): boolean {
    return this.meta.get('per-tenant') === true;
  }

  /**
   * The entry a tenant's next entry links to (null: the tenant has none). A store written before
   * the tails were kept has none of them: there the tenant's last entry by key is its last in log
   * order, as those entries are numbered by the one global chain.
   */
  tenantTail(tenantId: string): ChainLink | null {
    const kept = this.tails.get(tenantId);
    if (kept) return kept;
    for (const { value } of this.entries.getRange({
      start: [tenantId, Infinity],
      end: [tenantId],
      reverse: true,
      limit: 1,
    })) {
      const e = JSON.parse(value.toString('utf8')) as AuditEntry;
      return { seq: e.seq, hash: e.hash };
    }
    return null;
  }

  /** Every tenant's chain tail (its entry count, when its chain is whole, and the hash to compare). */
  heads(): Record<string, ChainLink> {
    const out: Record<string, ChainLink> = {};
    for (const { key, value } of this.tails.getRange()) out[key] = value;
    return out;
  }

  /** Records read, well-formed or not. */
  get count(): number {
    return (this.meta.get('count') as number | undefined) ?? 0;
  }

  get firstBroken(): BrokenLink | null {
    return (this.meta.get('broken') as BrokenLink | undefined) ?? null;
  }

  /** The log's last entry, of whichever tenant (null: the log is empty). */
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
