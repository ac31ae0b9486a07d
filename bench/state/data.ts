/**
 * The state the bench fills Kafka with, generated deterministically from an index so that any
 * entry's list position (and so a cursor to any depth) is known without keeping them all:
 *
 * - tenant `big`: `bigEndpoints` endpoints, and `dlq` DLQ entries over its first `dlqEndpoints`
 *   endpoints and the 4 EVENT_TYPES (entry i: endpoint i % 50, type ⌊i / 50⌋ % 4, so every
 *   (endpoint, type) pair holds 1/200 of them), dead-lettered evenly over the last `spanMs` in
 *   index order, ~1 KB each;
 * - `smallTenants` tenants `small-0000`… with 3 endpoints and `dlqPerSmall` DLQ entries each.
 *
 * Endpoints are ACTIVE and point at the bench receiver; only the measured small tenant gets events.
 */
import { seal, newSecret } from '../../core/secrets.ts';
import type { DlqEntry, EndpointRecord } from '../../core/webhooks/records.ts';
import type { OutRecord } from '../../core/kafka/producers.ts';

export const EVENT_TYPES = [
  'inference.completed',
  'inference.failed',
  'pipeline.failed',
  'telemetry.exported',
] as const;
export const BIG = 'big';
const DAY_MS = 24 * 3600_000;

export interface Plan {
  bigEndpoints: number;
  smallTenants: number;
  dlq: number;
  dlqEndpoints: number;
  dlqPerSmall: number;
  /** JSON bytes of one DLQ entry, near enough. */
  entryBytes: number;
  /** The oldest entry is dead-lettered `spanMs` before `t0`; none expires during the run (7 days). */
  spanMs: number;
  t0: number;
  /** Receiver ports the endpoints point at. */
  ports: number[];
}

export function makePlan(scale: number, ports: number[], t0 = Date.now()): Plan {
  return {
    bigEndpoints: Math.round(100_000 * scale),
    smallTenants: Math.round(1_000 * scale),
    dlq: Math.round(1_000_000 * scale),
    dlqEndpoints: 50,
    dlqPerSmall: 3,
    entryBytes: 1024,
    spanMs: 6 * DAY_MS,
    t0,
    ports,
  };
}

export const smallTenant = (i: number) => `small-${String(i).padStart(4, '0')}`;
export const bigEndpointId = (i: number) => `ep_big_${String(i).padStart(6, '0')}`;
export const smallEndpointId = (tenant: string, j: number) => `ep_${tenant}_${j}`;

/** Big endpoint i: every fifth takes every event, the others one type. */
export function bigEndpoint(p: Plan, masterKey: Buffer, i: number): EndpointRecord {
  const created = p.t0 - 30 * DAY_MS + i * 10;
  return endpoint(p, masterKey, bigEndpointId(i), BIG, i % 5 === 0 ? ['*'] : [EVENT_TYPES[i % 4]], created, i);
}

/** Small tenant t's endpoint j (of 3): all three take `inference.completed` (one through '*'). */
export function smallEndpoint(p: Plan, masterKey: Buffer, t: number, j: number): EndpointRecord {
  const tenant = smallTenant(t);
  const events = [['inference.completed'], ['*'], ['pipeline.failed', 'inference.completed']][j];
  return endpoint(p, masterKey, smallEndpointId(tenant, j), tenant, events, p.t0 - 20 * DAY_MS + t * 10 + j, t * 3 + j);
}

function endpoint(
  p: Plan,
  masterKey: Buffer,
  id: string,
  tenant: string,
  events: string[],
  created: number,
  n: number,
): EndpointRecord {
  return {
    id,
    tenant_id: tenant,
    url: `http://127.0.0.1:${p.ports[n % p.ports.length]}/hook`,
    events,
    metadata: { bench: 'state' },
    secret_sealed: seal(masterKey, newSecret('whsec')),
    state: 'ACTIVE',
    created_at: created,
    updated_at: created,
    verified_at: created,
  };
}

export const endpointRecord = (e: EndpointRecord): OutRecord => ({ key: e.id, value: JSON.stringify(e) });

/** Where big's DLQ entry i sits in the list: (dead-lettered ms, id): its cursor is `${deadMs}.${id}`. */
export function bigDlqPosition(
  p: Plan,
  i: number,
): { deadMs: number; id: string; endpoint_id: string; event_type: string } {
  return {
    deadMs: p.t0 - p.spanMs + Math.floor((i * p.spanMs) / p.dlq),
    id: `dlq_big_${String(i).padStart(8, '0')}`,
    endpoint_id: bigEndpointId(i % p.dlqEndpoints),
    event_type: EVENT_TYPES[Math.floor(i / p.dlqEndpoints) % EVENT_TYPES.length],
  };
}

export const cursorOf = (pos: { deadMs: number; id: string }) => `${pos.deadMs}.${pos.id}`;

export function bigDlqEntry(p: Plan, i: number): DlqEntry {
  const pos = bigDlqPosition(p, i);
  return dlqEntry(pos.id, BIG, pos.endpoint_id, pos.event_type, pos.deadMs, p.entryBytes);
}

export function smallDlqEntry(p: Plan, t: number, j: number): DlqEntry {
  const tenant = smallTenant(t);
  const deadMs = p.t0 - p.spanMs + Math.floor(((t * p.dlqPerSmall + j) * p.spanMs) / (p.smallTenants * p.dlqPerSmall));
  return dlqEntry(
    `dlq_${tenant}_${j}`,
    tenant,
    smallEndpointId(tenant, j % 3),
    'inference.completed',
    deadMs,
    p.entryBytes,
  );
}

/** A dead-lettered delivery of `bytes` JSON bytes (the event's `data.pad` takes up the rest). */
export function dlqEntry(
  id: string,
  tenant: string,
  endpointId: string,
  type: string,
  deadMs: number,
  bytes: number,
): DlqEntry {
  const iso = (ms: number) => new Date(ms).toISOString();
  const entry: DlqEntry = {
    id,
    event_id: `evt_${id.slice(4)}`,
    endpoint_id: endpointId,
    tenant_id: tenant,
    event_type: type,
    attempts: 12,
    last_status: 503,
    last_error: 'HTTP 503 from the endpoint',
    first_attempt_at: iso(deadMs - 72 * 3600_000),
    last_attempt_at: iso(deadMs),
    dead_lettered_at: iso(deadMs),
    expires_at: iso(deadMs + 7 * DAY_MS),
    payload: {
      id: `evt_${id.slice(4)}`,
      tenant_id: tenant,
      type,
      data: { pad: '' },
      created_at: deadMs - 72 * 3600_000,
    },
  };
  const pad = Math.max(0, bytes - JSON.stringify(entry).length);
  entry.payload.data = { pad: 'x'.repeat(pad) };
  return entry;
}

export const dlqRecord = (e: DlqEntry): OutRecord => ({ key: e.tenant_id, value: JSON.stringify(e) });
