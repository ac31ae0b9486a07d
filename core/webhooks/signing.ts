/**
 * Signing of outbound webhooks (spec 6.2): HMAC-SHA256 over the raw body, keyed with the endpoint
 * secret as UTF-8 bytes; the body pins `timestamp`, equal to X-Service-Timestamp. Every attempt is
 * signed afresh, so a retry hours later still passes a 300-second replay window.
 */
import { createHmac } from 'node:crypto';
import type { EventRecord, WebhookBody } from './records.ts';

export const SIGNATURE_HEADER = 'x-service-signature-256';
export const TIMESTAMP_HEADER = 'x-service-timestamp';
export const EVENT_ID_HEADER = 'x-service-event-id';
export const EVENT_TYPE_HEADER = 'x-service-event-type';
export const ATTEMPT_HEADER = 'x-service-delivery-attempt';

/** HMAC-SHA256 of the raw body keyed with the endpoint secret's UTF-8 bytes: the one definition. */
export function webhookHmac(secret: string, rawBody: string | Buffer): Buffer {
  return createHmac('sha256', Buffer.from(secret, 'utf8')).update(rawBody).digest();
}

export function hmacHex(secret: string, rawBody: string | Buffer): string {
  return webhookHmac(secret, rawBody).toString('hex');
}

export interface SignedDelivery {
  rawBody: string;
  headers: Record<string, string>;
  timestamp: number;
}

export function signDelivery(secret: string, event: EventRecord, attempt: number, nowMs: number): SignedDelivery {
  const timestamp = Math.floor(nowMs / 1000);
  const body: WebhookBody = {
    id: event.id,
    type: event.type,
    tenant_id: event.tenant_id,
    created_at: new Date(event.created_at).toISOString(),
    timestamp,
    data: event.data,
  };
  const rawBody = JSON.stringify(body);
  return {
    rawBody,
    timestamp,
    headers: {
      'content-type': 'application/json',
      'user-agent': 'Sluice-Webhooks/1',
      [SIGNATURE_HEADER]: `sha256=${hmacHex(secret, rawBody)}`,
      [TIMESTAMP_HEADER]: String(timestamp),
      [EVENT_ID_HEADER]: event.id,
      [EVENT_TYPE_HEADER]: event.type,
      [ATTEMPT_HEADER]: String(attempt),
    },
  };
}
