/** Webhook endpoints, materialized from the compacted `sluice.endpoints` topic. */
import type { StateRecord, StateView } from '../kafka/state-consumer.ts';
import { parseJson } from '../kafka/state-consumer.ts';
import { unseal } from '../secrets.ts';
import type { EndpointRecord } from './records.ts';
import type { SigningSecrets } from './signing.ts';

export class EndpointRegistry implements StateView {
  private readonly endpoints = new Map<string, EndpointRecord>();
  private readonly secrets = new Map<string, string>();
  private readonly previousSecrets = new Map<string, string>();
  /**
   * Per tenant: its endpoints by id, the ids by event kind ('*' included), and a sorted list made on
   * demand and then kept up to date (a change moves one entry: a tenant of 100,000 endpoints is not
   * sorted again after every change).
   */
  private readonly tenants = new Map<string, Tenant>();
  /** Endpoint records read by list and match calls: what a call costs, for tests and metrics. */
  touched = 0;
  /** Called after every change (the dispatcher releases held deliveries when one turns ACTIVE). */
  readonly listeners = new Set<(id: string, rec: EndpointRecord | null) => void>();

  constructor(
    readonly topic: string,
    private readonly masterKey: Buffer,
  ) {}

  apply(r: StateRecord): void {
    const rec = parseJson<EndpointRecord>(r.value);
    const old = this.endpoints.get(r.key);
    if (old && rec && old.tenant_id === rec.tenant_id && old.created_at === rec.created_at && old.id === rec.id)
      this.replace(old, rec);
    else {
      if (old) this.unindex(old);
      if (rec) this.index(rec);
    }
    if (rec === null) this.endpoints.delete(r.key);
    else this.endpoints.set(r.key, rec);
    this.secrets.delete(r.key);
    this.previousSecrets.delete(r.key);
    for (const l of this.listeners) l(r.key, rec);
  }

  private index(rec: EndpointRecord): void {
    let t = this.tenants.get(rec.tenant_id);
    if (!t) {
      t = { byId: new Map(), byKind: new Map(), sorted: null };
      this.tenants.set(rec.tenant_id, t);
    }
    t.byId.set(rec.id, rec);
    indexKinds(t, rec);
    if (t.sorted) t.sorted.splice(place(t.sorted, rec), 0, rec);
  }

  private unindex(rec: EndpointRecord): void {
    const t = this.tenants.get(rec.tenant_id);
    if (!t) return;
    t.byId.delete(rec.id);
    for (const kind of rec.events) t.byKind.get(kind)?.delete(rec.id);
    if (t.sorted) {
      const i = place(t.sorted, rec);
      if (t.sorted[i] === rec) t.sorted.splice(i, 1);
      else t.sorted = null; // not where it belongs: sorted again on demand
    }
    if (t.byId.size === 0) this.tenants.delete(rec.tenant_id);
  }

  /** An update that keeps the endpoint's place in its tenant's list (same tenant, same created_at). */
  private replace(old: EndpointRecord, rec: EndpointRecord): void {
    const t = this.tenants.get(rec.tenant_id)!;
    for (const kind of old.events) t.byKind.get(kind)?.delete(old.id);
    t.byId.set(rec.id, rec);
    indexKinds(t, rec);
    if (t.sorted) {
      const i = place(t.sorted, old);
      if (t.sorted[i] === old) t.sorted[i] = rec;
      else t.sorted = null;
    }
  }

  /** How many endpoints are in each state (the operator's gauge). */
  countByState(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const rec of this.endpoints.values()) out[rec.state] = (out[rec.state] ?? 0) + 1;
    return out;
  }

  get(id: string): EndpointRecord | undefined {
    return this.endpoints.get(id);
  }

  /** The endpoint only when it belongs to `tenantId` (another tenant's endpoint does not exist for the caller). */
  forTenant(id: string, tenantId: string): EndpointRecord | undefined {
    const rec = this.endpoints.get(id);
    return rec && rec.tenant_id === tenantId ? rec : undefined;
  }

  /**
   * The tenant's endpoints, oldest first; reads only that tenant's records. The
   * array is the registry's own, kept up to date: read it at once, do not keep it.
   */
  listTenant(tenantId: string): EndpointRecord[] {
    const t = this.tenants.get(tenantId);
    if (!t) return [];
    if (!t.sorted) {
      t.sorted = [...t.byId.values()].sort((a, b) => (before(a, b) ? -1 : 1));
      this.touched += t.sorted.length;
    }
    return t.sorted;
  }

  /** Endpoints of the tenant whose filter takes this event kind, DISABLED ones left out; reads only those. */
  matching(tenantId: string, eventType: string): EndpointRecord[] {
    const t = this.tenants.get(tenantId);
    if (!t) return [];
    const out: EndpointRecord[] = [];
    for (const kind of [eventType, '*']) {
      for (const id of t.byKind.get(kind) ?? []) {
        const rec = t.byId.get(id)!;
        if (kind === '*' && rec.events.includes(eventType)) continue; // already taken by kind
        if (rec.state === 'DISABLED') continue; // receives nothing until verified again
        out.push(rec);
      }
    }
    this.touched += out.length;
    return out;
  }

  /** The signing secret in clear, unsealed once and kept in memory. */
  secret(id: string): string | undefined {
    const cached = this.secrets.get(id);
    if (cached) return cached;
    const rec = this.endpoints.get(id);
    if (!rec) return undefined;
    const s = unseal(this.masterKey, rec.secret_sealed);
    this.secrets.set(id, s);
    return s;
  }

  /**
   * The secrets that sign a delivery at `nowMs`: the current
   * one, and the previous one while a rotation's overlap lasts.
   */
  signingSecrets(id: string, nowMs: number): SigningSecrets | undefined {
    const current = this.secret(id);
    if (current === undefined) return undefined;
    const rec = this.endpoints.get(id)!;
    if (!rec.previous_secret_sealed || (rec.previous_secret_until ?? 0) <= nowMs) return { current, previous: null };
    let previous = this.previousSecrets.get(id);
    if (previous === undefined) {
      previous = unseal(this.masterKey, rec.previous_secret_sealed);
      this.previousSecrets.set(id, previous);
    }
    return { current, previous };
  }
}

interface Tenant {
  byId: Map<string, EndpointRecord>;
  byKind: Map<string, Set<string>>;
  /** Oldest first (created_at, then id); null until a list asks for it. */
  sorted: EndpointRecord[] | null;
}

function indexKinds(t: Tenant, rec: EndpointRecord): void {
  for (const kind of rec.events) {
    let ids = t.byKind.get(kind);
    if (!ids) {
      ids = new Set();
      t.byKind.set(kind, ids);
    }
    ids.add(rec.id);
  }
}

/** List order: created_at, then id. */
function before(a: EndpointRecord, b: EndpointRecord): boolean {
  return a.created_at < b.created_at || (a.created_at === b.created_at && a.id < b.id);
}

/** Where `rec` is, or goes, in a sorted list (binary search). */
function place(sorted: EndpointRecord[], rec: EndpointRecord): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (before(sorted[mid], rec)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
