/**
 * The state the bench fills Kafka with, generated from an index so that any entry's list position
 * (and so a cursor to any depth) is known without keeping them all. Big's DLQ entry i: endpoint
 * i % 50, type ⌊i / 50⌋ % 4, dead-lettered in index order. Endpoints are ACTIVE and point at the
 * bench receiver; only the measured small tenant gets events.
 */
import { seal, newSecret } from '../../core/secrets.ts';
import type { DlqEntry, EndpointRecord } from '../../core/webhooks/records.ts';
import type { OutRecord } from '../../core/kafka/producers.ts';

export const EVENT_TYPES = ['inference.completed', 'inference.failed', 'pipeline.failed', 'telemetry.exported'];
export const BIG = 'big';
const DAY_MS = 24 * 3600_000;

/** The counts at `scale`; `ports`: the receiver's, the endpoints point at. */
export function makePlan(scale: number, ports: number[], t0 = Date.now()) {
  return {
    bigEndpoints: Math.round(100_000 * scale),
    smallTenants: Math.round(1_000 * scale),
    dlq: Math.round(1_000_000 * scale),
    dlqEndpoints: 50,
    dlqPerSmall: 3,
    /** JSON bytes of one DLQ entry, near enough. */
    entryBytes: 1024,
    /** The oldest entry is dead-lettered `spanMs` before `t0`; none expires during the run (7 days). */
    spanMs: 6 * DAY_MS,
    t0,
    ports,
  };
}
export type Plan = ReturnType<typeof makePlan>;

export const smallTenant = (i: number) => `small-${String(i).padStart(4, '0')}`;
export const bigEndpointId = (i: number) => `ep_big_${String(i).padStart(6, '0')}`;
const smallEndpointId = (tenant: string, j: number) => `ep_${tenant}_${j}`;

/** Big endpoint i: every fifth takes every event, the others one type. */
export function bigEndpoint(p: Plan, masterKey: Buffer, i: number): EndpointRecord {
  const events = i % 5 === 0 ? ['*'] : [EVENT_TYPES[i % 4]];
  return endpoint(p, masterKey, bigEndpointId(i), BIG, events, p.t0 - 30 * DAY_MS + i * 10, i);
}

/** Small tenant t's endpoint j (of 3): all three take `inference.completed` (one through '*'). */
export function smallEndpoint(p: Plan, masterKey: Buffer, t: number, j: number): EndpointRecord {
  const tenant = smallTenant(t);
  const events = [['inference.completed'], ['*'], ['pipeline.failed', 'inference.completed']][j];
  const created = p.t0 - 20 * DAY_MS + t * 10 + j;
  return endpoint(p, masterKey, smallEndpointId(tenant, j), tenant, events, created, t * 3 + j);
}

// n: which receiver port it points at.
function endpoint(p: Plan, key: Buffer, id: string, tenant: string, events: string[], created: number, n: number) {
  const e: EndpointRecord = {
    id,
    tenant_id: tenant,
    url: `http://127.0.0.1:${p.ports[n % p.ports.length]}/hook`,
    events,
    metadata: { bench: 'state' },
    secret_sealed: seal(key, newSecret('whsec')),
    state: 'ACTIVE',
    created_at: created,
    updated_at: created,
    verified_at: created,
  };
  return e;
}

export const endpointRecord = (e: EndpointRecord): OutRecord => ({ key: e.id, value: JSON.stringify(e) });

/** Where big's DLQ entry i sits in the list, (dead-lettered ms, id), and what it matches. */
export function bigDlqPosition(p: Plan, i: number) {
  return {
    deadMs: p.t0 - p.spanMs + Math.floor((i * p.spanMs) / p.dlq),
    id: `dlq_big_${String(i).padStart(8, '0')}`,
    endpoint_id: bigEndpointId(i % p.dlqEndpoints),
    event_type: EVENT_TYPES[Math.floor(i / p.dlqEndpoints) % EVENT_TYPES.length],
  };
}

/** A DLQ list cursor: the position of the entry the page starts after. */
export const cursorOf = (pos: { deadMs: number; id: string }) => `${pos.deadMs}.${pos.id}`;

export function bigDlqEntry(p: Plan, i: number): DlqEntry {
  const pos = bigDlqPosition(p, i);
  return dlqEntry(pos.id, BIG, pos.endpoint_id, pos.event_type, pos.deadMs, p.entryBytes);
}

/** Small tenants' DLQ entry k: tenant ⌊k / dlqPerSmall⌋, spread over the same span as big's. */
export function smallDlqEntry(p: Plan, k: number): DlqEntry {
  const tenant = smallTenant(Math.floor(k / p.dlqPerSmall));
  const j = k % p.dlqPerSmall;
  const deadMs = p.t0 - p.spanMs + Math.floor((k * p.spanMs) / (p.smallTenants * p.dlqPerSmall));
  const endpointId = smallEndpointId(tenant, j % 3);
  return dlqEntry(`dlq_${tenant}_${j}`, tenant, endpointId, 'inference.completed', deadMs, p.entryBytes);
}

/** A dead-lettered delivery of `bytes` JSON bytes (the event's `data.pad` takes up the rest). */
export function dlqEntry(id: string, tenant: string, endpointId: string, type: string, deadMs: number, bytes: number) {
  const iso = (ms: number) => new Date(ms).toISOString();
  const firstMs = deadMs - 72 * 3600_000;
  const event = { id: `evt_${id.slice(4)}`, tenant_id: tenant, type, data: { pad: '' }, created_at: firstMs };
  const entry: DlqEntry = {
    id,
    event_id: event.id,
    endpoint_id: endpointId,
    tenant_id: tenant,
    event_type: type,
    attempts: 12,
    last_status: 503,
    last_error: 'HTTP 503 from the endpoint',
    first_attempt_at: iso(firstMs),
    last_attempt_at: iso(deadMs),
    dead_lettered_at: iso(deadMs),
    expires_at: iso(deadMs + 7 * DAY_MS),
    payload: event,
  };
  entry.payload.data = { pad: 'x'.repeat(Math.max(0, bytes - JSON.stringify(entry).length)) };
  return entry;
}

export const dlqRecord = (e: DlqEntry): OutRecord => ({ key: e.tenant_id, value: JSON.stringify(e) });
