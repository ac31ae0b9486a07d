/**
 * Signing of outbound webhooks, two schemes with one per-endpoint secret `whsec_<base64>`:
 *
 * - Sluice's own: `X-Service-Signature-256: sha256=<hex>`, HMAC-SHA256 over the raw
 *   body keyed with the whole secret string as UTF-8 bytes; the body pins `timestamp`, equal to
 *   X-Service-Timestamp.
 * - Standard Webhooks (standardwebhooks.com): `webhook-signature: v1,<base64>`, HMAC-SHA256 over
 *   `{webhook-id}.{webhook-timestamp}.{body}` keyed with the bytes the base64 after `whsec_`
 *   decodes to (secrets made before this scheme are base64url: the same bytes, see docs/webhooks.md).
 *
 * During a rotation's overlap both secrets sign: two `v1,` entries, and the old secret's Sluice
 * signature in X-Service-Signature-256-Previous. Every attempt is signed afresh, so a retry hours
 * later still passes a 300-second replay window.
 *
 * Only node:crypto here: the verifier (core/webhook-verify.ts) imports it in the receiver package.
 */
import { createHmac, createSecretKey, randomBytes, type KeyObject } from 'node:crypto';
import type { EventRecord, WebhookBody } from './records.ts';
import { LruMap } from '../lru.ts';

export const SIGNATURE_HEADER = 'x-service-signature-256';
export const PREVIOUS_SIGNATURE_HEADER = 'x-service-signature-256-previous';
export const TIMESTAMP_HEADER = 'x-service-timestamp';
export const EVENT_ID_HEADER = 'x-service-event-id';
export const EVENT_TYPE_HEADER = 'x-service-event-type';
export const ATTEMPT_HEADER = 'x-service-delivery-attempt';
export const STANDARD_ID_HEADER = 'webhook-id';
export const STANDARD_TIMESTAMP_HEADER = 'webhook-timestamp';
export const STANDARD_SIGNATURE_HEADER = 'webhook-signature';

export const SECRET_PREFIX = 'whsec_';

/** A new endpoint secret: `whsec_` + 32 random bytes in standard base64 (the Standard Webhooks form). */
export function newEndpointSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
}

/**
 * The two HMAC keys of a secret, made once: a delivery signs with both, and the secrets of the
 * endpoints being delivered to are signed with again and again.
 */
interface SecretKeys {
  sluice: KeyObject;
  standard: KeyObject;
}
const keyCache = new LruMap<string, SecretKeys>(4096);

function keysOf(secret: string): SecretKeys {
  return (
    keyCache.get(secret) ??
    keyCache.set(secret, {
      sluice: createSecretKey(Buffer.from(secret, 'utf8')),
      standard: createSecretKey(standardKey(secret)),
    })
  );
}

/** HMAC-SHA256 of the raw body keyed with the endpoint secret's UTF-8 bytes: Sluice's scheme. */
export function webhookHmac(secret: string, rawBody: string | Buffer): Buffer {
  return createHmac('sha256', keysOf(secret).sluice).update(rawBody).digest();
}

export function hmacHex(secret: string, rawBody: string | Buffer): string {
  return webhookHmac(secret, rawBody).toString('hex');
}

/** The Standard Webhooks key: the bytes of the base64 after `whsec_` (standard or URL alphabet, padding optional). */
export function standardKey(secret: string): Buffer {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  return Buffer.from(encoded, 'base64');
}

/** HMAC-SHA256 of `{id}.{timestamp}.{body}` with the Standard Webhooks key, in base64. */
export function standardSignature(
  secret: string,
  id: string,
  timestamp: number | string,
  rawBody: string | Buffer,
): Buffer {
  return createHmac('sha256', keysOf(secret).standard).update(`${id}.${timestamp}.`).update(rawBody).digest();
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
  const signers = previous ? [current, previous] : [current];
  return {
    rawBody,
    timestamp,
    headers: {
      'content-type': 'application/json',
      'user-agent': 'Sluice-Webhooks/1',
      [SIGNATURE_HEADER]: `sha256=${hmacHex(current, rawBody)}`,
      ...(previous ? { [PREVIOUS_SIGNATURE_HEADER]: `sha256=${hmacHex(previous, rawBody)}` } : {}),
      [TIMESTAMP_HEADER]: String(timestamp),
      [EVENT_ID_HEADER]: event.id,
      [EVENT_TYPE_HEADER]: event.type,
      [ATTEMPT_HEADER]: String(attempt),
      [STANDARD_ID_HEADER]: event.id,
      [STANDARD_TIMESTAMP_HEADER]: String(timestamp),
      [STANDARD_SIGNATURE_HEADER]: signers
        .map((s) => `v1,${standardSignature(s, event.id, timestamp, rawBody).toString('base64')}`)
        .join(' '),
    },
  };
}
