/**
 * Receiver-side verification of a Sluice webhook (spec 6.2): the HMAC-SHA256 signature over the
 * raw body, compared in constant time; the timestamp within a window (300 s by default); and the
 * signed body's `timestamp` equal to the `X-Service-Timestamp` header. Returns the parsed body.
 *
 *   import { verifyWebhook, WebhookVerificationError } from 'sluice/webhooks';
 *   const event = verifyWebhook(rawBody, req.headers, process.env.WEBHOOK_SECRET!);
 *   // event.id is the dedupe key: deliveries are at-least-once.
 *
 * Pass the body exactly as received (a Buffer or the undecoded string): re-serialized JSON fails.
 */
import { timingSafeEqual } from 'node:crypto';
import type { WebhookBody } from './webhooks/records.ts';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, webhookHmac } from './webhooks/signing.ts';

export type { WebhookBody };

export type WebhookVerificationCode =
  | 'SIGNATURE_MISSING'
  | 'SIGNATURE_MISMATCH'
  | 'TIMESTAMP_MISSING'
  | 'TIMESTAMP_OUT_OF_WINDOW'
  | 'TIMESTAMP_MISMATCH'
  | 'BODY_INVALID';

export class WebhookVerificationError extends Error {
  readonly code: WebhookVerificationCode;
  constructor(code: WebhookVerificationCode, message: string) {
    super(message);
    this.name = 'WebhookVerificationError';
    this.code = code;
  }
}

export type WebhookHeaders = Record<string, string | string[] | undefined> | Headers;

export interface VerifyWebhookOptions {
  /** How far the timestamp may be from now, either way; default 300 (spec 6.2). */
  toleranceSeconds?: number;
  /** The current time in milliseconds; default Date.now(). */
  now?: number;
}

function headerValues(headers: WebhookHeaders, name: string): string[] {
  if (typeof (headers as Headers).get === 'function' && typeof (headers as Headers).has === 'function') {
    const v = (headers as Headers).get(name);
    return v === null ? [] : [v];
  }
  const values: string[] = [];
  for (const [k, v] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (k.toLowerCase() !== name || v === undefined) continue;
    values.push(...(Array.isArray(v) ? v : [v]));
  }
  return values;
}

/** Every `sha256=<hex>` candidate in the signature header(s). */
function signatureCandidates(values: string[]): Buffer[] {
  const out: Buffer[] = [];
  for (const value of values) {
    for (const part of value.split(',')) {
      const m = /^\s*sha256=([0-9a-fA-F]{64})\s*$/.exec(part);
      if (m) out.push(Buffer.from(m[1], 'hex'));
    }
  }
  return out;
}

function isWebhookBody(v: unknown): v is WebhookBody {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const b = v as Record<string, unknown>;
  return typeof b.id === 'string' && typeof b.type === 'string' && typeof b.tenant_id === 'string' && typeof b.created_at === 'string' && Number.isInteger(b.timestamp) && 'data' in b;
}

export function verifyWebhook(rawBody: string | Buffer, headers: WebhookHeaders, secret: string, { toleranceSeconds = 300, now }: VerifyWebhookOptions = {}): WebhookBody {
  if (typeof secret !== 'string' || secret.length === 0) throw new TypeError('verifyWebhook: the endpoint secret is required');
  if (!Number.isFinite(toleranceSeconds) || toleranceSeconds < 0) throw new TypeError('verifyWebhook: toleranceSeconds must be a non-negative number');

  const sigValues = headerValues(headers, SIGNATURE_HEADER);
  if (sigValues.length === 0) throw new WebhookVerificationError('SIGNATURE_MISSING', `the ${SIGNATURE_HEADER} header is missing`);
  const tsValues = headerValues(headers, TIMESTAMP_HEADER);
  if (tsValues.length !== 1 || !/^\d{1,12}$/.test(tsValues[0].trim())) {
    throw new WebhookVerificationError('TIMESTAMP_MISSING', `the ${TIMESTAMP_HEADER} header is missing or not unix seconds`);
  }
  const timestamp = Number(tsValues[0].trim());

  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody;
  const expected = webhookHmac(secret, body);
  const candidates = signatureCandidates(sigValues);
  // Compare with every candidate (no early exit), each in constant time.
  let matched = false;
  for (const c of candidates) matched = timingSafeEqual(c, expected) || matched;
  if (!matched) {
    throw new WebhookVerificationError('SIGNATURE_MISMATCH', candidates.length === 0 ? `the ${SIGNATURE_HEADER} header is not "sha256=<64 hex digits>"` : 'the signature does not match the body and secret');
  }

  const nowSeconds = Math.floor((now ?? Date.now()) / 1000);
  if (Math.abs(nowSeconds - timestamp) > toleranceSeconds) {
    throw new WebhookVerificationError('TIMESTAMP_OUT_OF_WINDOW', `the timestamp ${timestamp} is ${nowSeconds - timestamp} s from now; at most ${toleranceSeconds} s are accepted`);
  }

  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw new WebhookVerificationError('BODY_INVALID', 'the body is not JSON');
  }
  if (!isWebhookBody(parsed)) throw new WebhookVerificationError('BODY_INVALID', 'the body is not a Sluice webhook ({id, type, tenant_id, created_at, timestamp, data})');
  // The header is not signed; the body is. They must agree, so a replayed body cannot borrow a fresh header.
  if (parsed.timestamp !== timestamp) {
    throw new WebhookVerificationError('TIMESTAMP_MISMATCH', `the ${TIMESTAMP_HEADER} header (${timestamp}) differs from the signed body's timestamp (${parsed.timestamp})`);
  }
  return parsed;
}
