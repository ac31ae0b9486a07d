/**
 * Signing of outbound webhooks: every attempt is signed afresh in each signature scheme
 * (schemes/index.ts: Sluice's `X-Service-Signature-256` and Standard Webhooks' `webhook-signature`),
 * all keyed from the endpoint's one secret `whsec_<base64>`. During a rotation's overlap both
 * secrets sign. A new timestamp every attempt, so a retry hours later still passes a 300-second
 * replay window.
 */
import { randomBytes } from 'node:crypto';
import type { EventRecord, WebhookBody } from './records.ts';
import { SIGNATURE_SCHEMES } from './schemes/index.ts';
import { SECRET_PREFIX } from './schemes/scheme.ts';

export const EVENT_ID_HEADER = 'x-service-event-id';
export const EVENT_TYPE_HEADER = 'x-service-event-type';
export const ATTEMPT_HEADER = 'x-service-delivery-attempt';

/** A new endpoint secret: `whsec_` + 32 random bytes in standard base64 (the Standard Webhooks form). */
export function newEndpointSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
}

/**
 * The body of an event at a timestamp, made once per (event, second): the deliveries of one event
 * to its endpoints (one DeliverySet) share the event object and, within a second, the same body.
 */
const bodies = new WeakMap<EventRecord, { timestamp: number; rawBody: string }>();
function bodyOf(event: EventRecord, timestamp: number): string {
  const held = bodies.get(event);
  if (held !== undefined && held.timestamp === timestamp) return held.rawBody;
  const body: WebhookBody = {
    id: event.id,
    type: event.type,
    tenant_id: event.tenant_id,
    created_at: new Date(event.created_at).toISOString(),
    timestamp,
    data: event.data,
  };
  const rawBody = JSON.stringify(body);
  bodies.set(event, { timestamp, rawBody });
  return rawBody;
}

export interface SignedDelivery {
  rawBody: string;
  headers: Record<string, string>;
  timestamp: number;
}

/** The secrets that sign now: the current one first, then the previous one while its overlap lasts. */
export interface SigningSecrets {
  current: string;
  previous?: string | null;
}

export function signDelivery(
  secrets: SigningSecrets | string,
  event: EventRecord,
  attempt: number,
  nowMs: number,
): SignedDelivery {
  const { current, previous } = typeof secrets === 'string' ? { current: secrets, previous: null } : secrets;
  const timestamp = Math.floor(nowMs / 1000);
  const rawBody = bodyOf(event, timestamp);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': 'Sluice-Webhooks/1',
    [EVENT_ID_HEADER]: event.id,
    [EVENT_TYPE_HEADER]: event.type,
    [ATTEMPT_HEADER]: String(attempt),
  };
  const signers = previous ? [current, previous] : [current];
  const parts = { id: event.id, timestamp, rawBody };
  for (const scheme of SIGNATURE_SCHEMES) scheme.sign(headers, signers, parts);
  return { rawBody, timestamp, headers };
}
