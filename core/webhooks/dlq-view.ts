/**
 * The DLQ as every node sees it: `sluice.dlq` (key tenant) holds dead-lettered deliveries and
 * replay markers. The view keeps each tenant's entries minus the replayed and the expired ones
 * (expires_at = dead_lettered_at + 7 days / SLUICE_TIME_SCALE; the topic's retention removes the
 * records themselves later), listed oldest first with an opaque cursor.
 *
 *   ctx.dlq.list('acme', { endpoint_id, event_type, limit: 100, cursor }, now) // { data, next_cursor }
 */
import type { StateRecord, StateView } from '../kafka/state-consumer.ts';
import type { DlqEntry, DlqReplayMarker } from './records.ts';
import { pageOf, type Position } from '../paging.ts';

export interface DlqFilter {
  endpoint_id?: string;
  event_type?: string;
}

interface Held {
  entry: DlqEntry;
  deadMs: number;
  expiresMs: number;
}

export class DlqView implements StateView {
  private readonly tenants = new Map<string, Map<string, Held>>();
  /** Replayed entry ids (until they would have expired): a repeated dead-letter of one stays gone. */
  private readonly replayed = new Map<string, number>();
  private sorted = new Map<string, Held[]>();

  constructor(readonly topic: string) {}

  apply(r: StateRecord): void {
    if (r.value === null) return;
    let v: DlqEntry | DlqReplayMarker;
    try {
      v = JSON.parse(r.value.toString('utf8'));
    } catch {
      return;
    }
    if ((v as DlqReplayMarker).kind === 'replayed') {
      const m = v as DlqReplayMarker;
      const held = this.tenants.get(m.tenant_id)?.get(m.id);
      this.replayed.set(m.id, held?.expiresMs ?? Date.parse(m.replayed_at) + 8 * 24 * 3600_000);
      if (held) this.remove(m.tenant_id, m.id);
      return;
    }
    const e = v as DlqEntry;
    if (typeof e.id !== 'string' || typeof e.tenant_id !== 'string' || this.replayed.has(e.id)) return;
    let t = this.tenants.get(e.tenant_id);
    if (!t) {
      t = new Map();
      this.tenants.set(e.tenant_id, t);
    }
    if (t.has(e.id)) return; // the same dead-letter repeated after a crash
    t.set(e.id, { entry: e, deadMs: Date.parse(e.dead_lettered_at), expiresMs: Date.parse(e.expires_at) });
    this.sorted.delete(e.tenant_id);
  }

  private remove(tenantId: string, id: string): void {
    this.tenants.get(tenantId)?.delete(id);
    this.sorted.delete(tenantId);
  }

  /** The entry when it belongs to `tenantId` and is still listed. */
  get(tenantId: string, id: string, nowMs: number): DlqEntry | undefined {
    const h = this.tenants.get(tenantId)?.get(id);
    return h && h.expiresMs > nowMs ? h.entry : undefined;
  }

  private ordered(tenantId: string, nowMs: number): Held[] {
    let list = this.sorted.get(tenantId);
    const t = this.tenants.get(tenantId);
    if (!t) return [];
    if (list && list.length > 0 && list[0].expiresMs <= nowMs) list = undefined;
    if (!list) {
      for (const [id, h] of t) if (h.expiresMs <= nowMs) t.delete(id);
      for (const [id, until] of this.replayed) if (until <= nowMs) this.replayed.delete(id);
      list = [...t.values()].sort((a, b) => a.deadMs - b.deadMs || (a.entry.id < b.entry.id ? -1 : 1));
      this.sorted.set(tenantId, list);
    }
    return list;
  }

  /** Every listed entry of the tenant that passes the filter, oldest first. */
  all(tenantId: string, filter: DlqFilter, nowMs: number): DlqEntry[] {
    return this.ordered(tenantId, nowMs)
      .filter((h) => h.expiresMs > nowMs && matches(h.entry, filter))
      .map((h) => h.entry);
  }

  list(tenantId: string, q: DlqFilter & { limit: number; after: Position | null }, nowMs: number): { data: DlqEntry[]; next_cursor: string | null } {
    const listed = this.ordered(tenantId, nowMs).filter((h) => h.expiresMs > nowMs && matches(h.entry, q));
    const page = pageOf(listed, (h) => ({ key: h.deadMs, id: h.entry.id }), q.after, q.limit);
    return { data: page.data.map((h) => h.entry), next_cursor: page.next_cursor };
  }
}

function matches(e: DlqEntry, f: DlqFilter): boolean {
  return (f.endpoint_id === undefined || e.endpoint_id === f.endpoint_id) && (f.event_type === undefined || e.event_type === f.event_type);
}


