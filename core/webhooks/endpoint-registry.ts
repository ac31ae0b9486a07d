/** Webhook endpoints, materialized from the compacted `sluice.endpoints` topic. */
import type { StateRecord, StateView } from '../kafka/state-consumer.ts';
import { parseJson } from '../kafka/state-consumer.ts';
import { unseal } from '../secrets.ts';
import type { EndpointRecord } from './records.ts';

export class EndpointRegistry implements StateView {
  private readonly endpoints = new Map<string, EndpointRecord>();
  private readonly secrets = new Map<string, string>();
  /** Called after every change (the dispatcher releases held deliveries when one turns ACTIVE). */
  readonly listeners = new Set<(id: string, rec: EndpointRecord | null) => void>();

  constructor(readonly topic: string, private readonly masterKey: Buffer) {}

  apply(r: StateRecord): void {
    const rec = parseJson<EndpointRecord>(r.value);
    if (rec === null) this.endpoints.delete(r.key);
    else this.endpoints.set(r.key, rec);
    this.secrets.delete(r.key);
    for (const l of this.listeners) l(r.key, rec);
  }

  get(id: string): EndpointRecord | undefined {
    return this.endpoints.get(id);
  }

  /** The endpoint only when it belongs to `tenantId` (another tenant's endpoint does not exist for the caller). */
  forTenant(id: string, tenantId: string): EndpointRecord | undefined {
    const rec = this.endpoints.get(id);
    return rec && rec.tenant_id === tenantId ? rec : undefined;
  }

  listTenant(tenantId: string): EndpointRecord[] {
    return [...this.endpoints.values()].filter((e) => e.tenant_id === tenantId).sort((a, b) => a.created_at - b.created_at || (a.id < b.id ? -1 : 1));
  }

  /** Endpoints of the tenant whose filter takes this event kind. */
  matching(tenantId: string, eventType: string): EndpointRecord[] {
    return this.listTenant(tenantId).filter((e) => e.events.includes('*') || e.events.includes(eventType));
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
}
