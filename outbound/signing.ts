/**
 * Signing of outbound webhooks: every attempt is signed afresh in each signature scheme
 * (schemes/index.ts: Sluice's `X-Service-Signature-256` and Standard Webhooks' `webhook-signature`),
 * all keyed from the endpoint's one secret `whsec_<base64>`, and, for an endpoint whose `signing` is
 * `ed25519` or `both`, Standard Webhooks' `v1a` (ed25519, schemes/ed25519.ts) with its private key
 * (`ed25519` alone: no HMAC header at all). During a rotation's overlap both secrets (and keys)
 * sign. A new timestamp every attempt, so a retry hours later still passes a 300-second replay window.
 */
import { randomBytes } from 'node:crypto';
import type { EventRecord, SigningMode, WebhookBody } from '../core/webhooks/records.ts';
import { signV1a } from '../receiver-sdk/schemes/ed25519.ts';
import { SIGNATURE_SCHEMES } from '../receiver-sdk/schemes/index.ts';
import { SECRET_PREFIX } from '../receiver-sdk/schemes/scheme.ts';

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
  /** Which signatures to make; absent: `hmac` (the HMAC schemes only). */
  signing?: SigningMode;
  /** The ed25519 private keys (`whsk_`), current first, for `ed25519` and `both`. */
  keys?: readonly string[];
}

export function signDelivery(
  secrets: SigningSecrets | string,
  event: EventRecord,
  attempt: number,
  nowMs: number,
): SignedDelivery {
  const given: SigningSecrets = typeof secrets === 'string' ? { current: secrets } : secrets;
  const { current, previous } = given;
  const keys = given.keys ?? [];
  // A mode that asks for ed25519 without a key (never written so) signs with HMAC: never unsigned.
  const asymmetric = given.signing !== undefined && given.signing !== 'hmac' && keys.length > 0;
  const hmac = !asymmetric || given.signing === 'both';
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
  if (hmac) for (const scheme of SIGNATURE_SCHEMES) scheme.sign(headers, signers, parts);
  if (asymmetric) signV1a(headers, keys, parts);
  return { rawBody, timestamp, headers };
}
