/**
 * Every node's view of `sluice.audit`: the chain's tail (what the next entry links to), entries by
 * id (idempotent retries), each tenant's entries in log order (GET /v1/audit), and the first broken
 * link seen, if any.
 */
import type { StateRecord, StateView } from '../kafka/state-consumer.ts';
import { checkLink, parseEntry, type AuditEntry } from './entry.ts';

export interface BrokenLink {
  offset: string;
  seq: number | null;
  id: string | null;
  problem: string;
}

export class AuditView implements StateView {
  private last: AuditEntry | null = null;
  private readonly byId = new Map<string, AuditEntry>();
  private readonly byTenant = new Map<string, AuditEntry[]>();
  firstBroken: BrokenLink | null = null;
  /** Records read, well-formed or not. */
  count = 0;

  constructor(readonly topic: string) {}

  apply(r: StateRecord): void {
    this.count++;
    const e = parseEntry(r.value);
    const problem = e === null ? 'not JSON' : checkLink(this.last, e);
    if (problem && !this.firstBroken) this.firstBroken = { offset: r.offset, seq: e?.seq ?? null, id: e?.id ?? null, problem };
    if (e === null || typeof e.hash !== 'string' || !Number.isInteger(e.seq)) return;
    this.last = e;
    this.byId.set(e.id, e);
    const list = this.byTenant.get(e.tenant_id) ?? [];
    list.push(e);
    this.byTenant.set(e.tenant_id, list);
  }

  /** The entry the next append links to (null: the log is empty). */
  tail(): AuditEntry | null {
    return this.last;
  }

  get(id: string): AuditEntry | undefined {
    return this.byId.get(id);
  }

  /** A tenant's entries with seq > afterSeq, in log order. */
  page(tenantId: string, afterSeq: number, limit: number): { data: AuditEntry[]; more: boolean } {
    const list = this.byTenant.get(tenantId) ?? [];
    let lo = 0;
    let hi = list.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (list[mid].seq <= afterSeq) lo = mid + 1;
      else hi = mid;
    }
    const data = list.slice(lo, lo + limit);
    return { data, more: lo + limit < list.length };
  }
}

export function findAuditView(views: readonly StateView[]): AuditView | null {
  return (views.find((v) => v instanceof AuditView) as AuditView | undefined) ?? null;
}
