/**
 * Building the unit of delivery: one DeliveryRecord per (event, endpoint). Shared by the fan-out
 * (events → deliveries) and DLQ replay (entry → a fresh delivery, attempt 1).
 *
 *   const rec = newDelivery(event, endpoint.id, now);                       // fan-out: stable id
 *   const again = newDelivery(entry.payload, entry.endpoint_id, now, true); // replay: new id
 */
import { createHash } from 'node:crypto';
import { newId } from '../secrets.ts';
import { KNOWN_EVENT_KINDS, type DeliveryRecord, type EventRecord } from './records.ts';

/** A custom kind is `<word>.<word>` in lowercase. */
export const EVENT_TYPE_PATTERN = /^[a-z][a-z0-9_]{0,31}\.[a-z][a-z0-9_]{0,31}$/;
export const EVENT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
export const MAX_EVENT_DATA_BYTES = 256 * 1024;

/**
 * Kinds only Sluice sends: `ping` and the families `credential.*`, `endpoint.*` and `sluice.*`
 * (every kind Sluice emits now or adds later lives in one of them). A receiver trusts these as
 * Sluice's own word (a `credential.rotated` names the URL to fetch a new secret from), so no
 * tenant may publish them; the contract's EventPublish refuses the same set.
 */
export const RESERVED_FAMILIES = ['credential', 'endpoint', 'sluice'] as const;
export function isReservedKind(type: string): boolean {
  return type === 'ping' || (RESERVED_FAMILIES as readonly string[]).includes(type.slice(0, type.indexOf('.')));
}

/** Sluice's own kinds that travel on `sluice.events` (written there by Sluice, never by a publish). */
const SLUICE_EVENT_KINDS = new Set(['credential.rotated', 'credential.revoked', 'endpoint.disabled']);

export function isPublishableType(type: string): boolean {
  return (
    !isReservedKind(type) && ((KNOWN_EVENT_KINDS as readonly string[]).includes(type) || EVENT_TYPE_PATTERN.test(type))
  );
}

/**
 * The fan-out derives the delivery id from (tenant, event, endpoint), so a fan-out repeated after a
 * crash yields the same id (and the same DLQ entry id later); a replay asks for a fresh one.
 */
export function newDelivery(event: EventRecord, endpointId: string, nowMs: number, fresh = false): DeliveryRecord {
  const deliveryId = fresh
    ? newId('dlv')
    : `dlv_${createHash('sha256').update(`${event.tenant_id}\0${event.id}\0${endpointId}`).digest('hex').slice(0, 24)}`;
  return {
    delivery_id: deliveryId,
    endpoint_id: endpointId,
    tenant_id: event.tenant_id,
    event,
    attempt: 1,
    first_attempt_at: null,
    due_at: nowMs,
    last_status: null,
    last_error: null,
    last_attempt_at: null,
  };
}

/**
 * The JSON of a delivery record, with the event's JSON made once by the caller: a fan-out to N
 * endpoints serialises the event (and its data, up to 256 KiB) once instead of N times.
 */
export function deliveryJson(rec: DeliveryRecord, eventJson: string): string {
  const { event: _event, ...rest } = rec;
  return `${JSON.stringify(rest).slice(0, -1)},"event":${eventJson}}`;
}

/** Checks a record read from `sluice.events` (data-plane producers write there directly). */
export function parseEventRecord(value: Buffer | null): EventRecord | null {
  if (value === null) return null;
  let v: unknown;
  try {
    v = JSON.parse(value.toString('utf8'));
  } catch {
    return null;
  }
  const e = v as Partial<EventRecord>;
  if (typeof e !== 'object' || e === null) return null;
  if (typeof e.id !== 'string' || !EVENT_ID_PATTERN.test(e.id)) return null;
  if (typeof e.tenant_id !== 'string' || e.tenant_id === '') return null;
  if (typeof e.type !== 'string' || !(isPublishableType(e.type) || SLUICE_EVENT_KINDS.has(e.type))) return null;
  if (typeof e.created_at !== 'number' || !Number.isFinite(e.created_at)) return null;
  return {
    id: e.id,
    tenant_id: e.tenant_id,
    type: e.type,
    data: e.data ?? null,
    created_at: e.created_at,
    ...(typeof e.endpoints_at === 'number' && Number.isSafeInteger(e.endpoints_at)
      ? { endpoints_at: e.endpoints_at }
      : {}),
    // Direct producers are held to the API's bound too: a longer key is no key.
    ...(typeof e.ordering_key === 'string' && e.ordering_key !== '' && Buffer.byteLength(e.ordering_key) <= 128
      ? { ordering_key: e.ordering_key }
      : {}),
  };
}

export function parseDeliveryRecord(value: Buffer | null): DeliveryRecord | null {
  if (value === null) return null;
  try {
    const r: unknown = JSON.parse(value.toString('utf8'));
    return isDeliveryRecord(r) ? r : null;
  } catch {
    return null;
  }
}

/**
 * One record of `sluice.deliveries` for many deliveries: an event and the endpoints it goes to
 * (DELIVERY_SET_MAX at most). The fan-out writes these, one per event (or per 100 endpoints of
 * it), so the event crosses Kafka once, not once per endpoint; the dispatcher makes each pair a
 * DeliveryRecord (newDelivery: the same stable delivery id). DLQ replays write single records.
 */
export interface DeliverySet {
  set: 1;
  event: EventRecord;
  endpoint_ids: string[];
  due_at: number;
  endpoints_at?: number;
}

export const DELIVERY_SET_MAX = 100;

/** The JSON of a DeliverySet, with the event's JSON made once by the caller. */
export function deliverySetJson(
  eventJson: string,
  endpointIds: string[],
  dueAt: number,
  endpointsAt: number | undefined,
): string {
  const at = endpointsAt === undefined ? '' : `,"endpoints_at":${endpointsAt}`;
  return `{"set":1,"due_at":${dueAt}${at},"endpoint_ids":${JSON.stringify(endpointIds)},"event":${eventJson}}`;
}

/**
 * The deliveries of one `sluice.deliveries` record: a set expanded (one per endpoint, attempt 1),
 * or a single DeliveryRecord; null when it is neither.
 */
export function parseDeliveries(value: Buffer | null): DeliveryRecord[] | null {
  if (value === null) return null;
  let v: unknown;
  try {
    v = JSON.parse(value.toString('utf8'));
  } catch {
    return null;
  }
  const s = v as Partial<DeliverySet> & { set?: unknown };
  if (typeof s !== 'object' || s === null) return null;
  if (s.set === undefined) return isDeliveryRecord(v) ? [v] : null;
  const e = s.event as Partial<EventRecord> | undefined;
  if (
    s.set !== 1 ||
    !Array.isArray(s.endpoint_ids) ||
    s.endpoint_ids.length > DELIVERY_SET_MAX ||
    !s.endpoint_ids.every((id) => typeof id === 'string' && id.length > 0) ||
    typeof s.due_at !== 'number' ||
    typeof e !== 'object' ||
    e === null ||
    typeof e.id !== 'string' ||
    typeof e.tenant_id !== 'string' ||
    typeof e.type !== 'string'
  )
    return null;
  const event = e as EventRecord;
  const seen = typeof s.endpoints_at === 'number' ? s.endpoints_at : undefined;
  return s.endpoint_ids.map((id) => {
    const d = newDelivery(event, id, s.due_at!);
    return seen === undefined ? d : { ...d, endpoints_at: seen };
  });
}

function isDeliveryRecord(v: unknown): v is DeliveryRecord {
  const r = v as DeliveryRecord;
  return (
    typeof r.delivery_id === 'string' &&
    typeof r.endpoint_id === 'string' &&
    typeof r.attempt === 'number' &&
    typeof r.event?.id === 'string'
  );
}
