/**
 * Receiver-side verification of a Sluice webhook, either scheme:
 *
 * - Sluice's: the HMAC-SHA256 signature over the raw body in X-Service-Signature-256
 *   (or X-Service-Signature-256-Previous, signed with the previous secret during a rotation),
 *   compared in constant time; the timestamp within a window (300 s by default); and the signed
 *   body's `timestamp` equal to the `X-Service-Timestamp` header.
 * - Standard Webhooks: any `v1,` entry of `webhook-signature` over `{webhook-id}.{webhook-timestamp}.{body}`,
 *   and `webhook-timestamp` within the window.
 *
 * `scheme: 'auto'` (the default) checks Sluice's headers when they are there, else the standard
 * ones. Returns the parsed body.
 *
 *   import { verifyWebhook, WebhookVerificationError } from 'sluice/webhooks';
 *   const event = verifyWebhook(rawBody, req.headers, process.env.WEBHOOK_SECRET!);
 *   // event.id is the dedupe key: deliveries are at-least-once.
 *
 * Pass the body exactly as received (a Buffer or the undecoded string): re-serialized JSON fails.
 * While switching secrets, pass both: `verifyWebhook(body, headers, [newSecret, oldSecret])`.
 */
import { timingSafeEqual } from 'node:crypto';
import { SluiceBaseError } from './errors.ts';
import type { WebhookBody } from './webhooks/records.ts';
import {
  PREVIOUS_SIGNATURE_HEADER,
  SIGNATURE_HEADER,
  STANDARD_ID_HEADER,
  STANDARD_SIGNATURE_HEADER,
  STANDARD_TIMESTAMP_HEADER,
  TIMESTAMP_HEADER,
  standardSignature,
  webhookHmac,
} from './webhooks/signing.ts';

export type { WebhookBody };

export type WebhookVerificationCode =
  | 'SIGNATURE_MISSING'
  | 'SIGNATURE_MISMATCH'
  | 'TIMESTAMP_MISSING'
  | 'TIMESTAMP_OUT_OF_WINDOW'
  | 'TIMESTAMP_MISMATCH'
  | 'BODY_INVALID';

/** Why a delivery was refused; never retriable (the same bytes fail the same way). */
export class WebhookVerificationError extends SluiceBaseError<WebhookVerificationCode> {
  constructor(code: WebhookVerificationCode, message: string) {
    super(code, message);
  }
}

export type WebhookHeaders = Record<string, string | string[] | undefined> | Headers;

export interface VerifyWebhookOptions {
  /**
   * How far the timestamp may be from now, either way; default 300
   * (a retry hours later is signed afresh, so 300 s suffices).
   */
  toleranceSeconds?: number;
  /** The current time in milliseconds; default Date.now(). */
  now?: number;
  /**
   * Which signature to check: 'sluice' (X-Service-*), 'standard' (webhook-*),
   * or 'auto' (default: Sluice's when present, else the standard one).
   */
  scheme?: 'auto' | 'sluice' | 'standard';
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

/** Every `v1,<base64>` entry of the webhook-signature header(s) (space-separated). */
function standardCandidates(values: string[]): Buffer[] {
  const out: Buffer[] = [];
  for (const value of values) {
    for (const part of value.trim().split(/\s+/)) {
      const m = /^v1,([A-Za-z0-9+/]{43}=)$/.exec(part);
      if (m) out.push(Buffer.from(m[1], 'base64'));
    }
  }
  return out;
}

/** True when any candidate equals any expected MAC; every pair is compared, each in constant time. */
function anyMatch(candidates: Buffer[], expected: Buffer[]): boolean {
  let matched = false;
  for (const e of expected)
    for (const c of candidates) matched = (c.length === e.length && timingSafeEqual(c, e)) || matched;
  return matched;
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
  return (
    typeof b.id === 'string' &&
    typeof b.type === 'string' &&
    typeof b.tenant_id === 'string' &&
    typeof b.created_at === 'string' &&
    Number.isInteger(b.timestamp) &&
    'data' in b
  );
}

export function verifyWebhook(
  rawBody: string | Buffer,
  headers: WebhookHeaders,
  secret: string | readonly string[],
  { toleranceSeconds = 300, now, scheme = 'auto' }: VerifyWebhookOptions = {},
): WebhookBody {
  const secrets = typeof secret === 'string' ? [secret] : [...(secret ?? [])];
  if (secrets.length === 0 || secrets.some((s) => typeof s !== 'string' || s.length === 0))
    throw new TypeError('verifyWebhook: the endpoint secret is required');
  if (!Number.isFinite(toleranceSeconds) || toleranceSeconds < 0)
    throw new TypeError('verifyWebhook: toleranceSeconds must be a non-negative number');
  if (scheme !== 'auto' && scheme !== 'sluice' && scheme !== 'standard')
    throw new TypeError(`verifyWebhook: unknown scheme "${String(scheme)}"`);
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody;
  const useStandard =
    scheme === 'standard' ||
    (scheme === 'auto' &&
      headerValues(headers, SIGNATURE_HEADER).length === 0 &&
      headerValues(headers, STANDARD_SIGNATURE_HEADER).length > 0);
  const timestamp = useStandard ? checkStandard(body, headers, secrets) : checkSluice(body, headers, secrets);

  const nowSeconds = Math.floor((now ?? Date.now()) / 1000);
  if (Math.abs(nowSeconds - timestamp) > toleranceSeconds) {
    throw new WebhookVerificationError(
      'TIMESTAMP_OUT_OF_WINDOW',
      `the timestamp ${timestamp} is ${nowSeconds - timestamp} s from now; at most ${toleranceSeconds} s are accepted`,
    );
  }

  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw new WebhookVerificationError('BODY_INVALID', 'the body is not JSON');
  }
  if (!isWebhookBody(parsed))
    throw new WebhookVerificationError(
      'BODY_INVALID',
      'the body is not a Sluice webhook ({id, type, tenant_id, created_at, timestamp, data})',
    );
  // Sluice's timestamp header is not signed; the body is. They must agree, so a replayed body
  // cannot borrow a fresh header. (The standard scheme signs its timestamp, and Sluice makes both equal.)
  if (parsed.timestamp !== timestamp) {
    const header = useStandard ? STANDARD_TIMESTAMP_HEADER : TIMESTAMP_HEADER;
    throw new WebhookVerificationError(
      'TIMESTAMP_MISMATCH',
      `the ${header} header (${timestamp}) differs from the signed body's timestamp (${parsed.timestamp})`,
    );
  }
  return parsed;
}

function unixSeconds(headers: WebhookHeaders, name: string): number {
  const values = headerValues(headers, name);
  if (values.length !== 1 || !/^\d{1,12}$/.test(values[0].trim())) {
    throw new WebhookVerificationError('TIMESTAMP_MISSING', `the ${name} header is missing or not unix seconds`);
  }
  return Number(values[0].trim());
}

/** Sluice's scheme: the signature headers, then the timestamp header. Returns the timestamp. */
function checkSluice(body: Buffer, headers: WebhookHeaders, secrets: string[]): number {
  const sigValues = [...headerValues(headers, SIGNATURE_HEADER), ...headerValues(headers, PREVIOUS_SIGNATURE_HEADER)];
  if (sigValues.length === 0)
    throw new WebhookVerificationError('SIGNATURE_MISSING', `the ${SIGNATURE_HEADER} header is missing`);
  const timestamp = unixSeconds(headers, TIMESTAMP_HEADER);
  const candidates = signatureCandidates(sigValues);
  if (
    !anyMatch(
      candidates,
      secrets.map((s) => webhookHmac(s, body)),
    )
  ) {
    throw new WebhookVerificationError(
      'SIGNATURE_MISMATCH',
      candidates.length === 0
        ? `the ${SIGNATURE_HEADER} header is not "sha256=<64 hex digits>"`
        : 'the signature does not match the body and secret',
    );
  }
  return timestamp;
}

/** The Standard Webhooks scheme. Returns the (signed) timestamp. */
function checkStandard(body: Buffer, headers: WebhookHeaders, secrets: string[]): number {
  const sigValues = headerValues(headers, STANDARD_SIGNATURE_HEADER);
  const ids = headerValues(headers, STANDARD_ID_HEADER);
  if (sigValues.length === 0 || ids.length !== 1)
    throw new WebhookVerificationError(
      'SIGNATURE_MISSING',
      `the ${STANDARD_SIGNATURE_HEADER} or ${STANDARD_ID_HEADER} header is missing`,
    );
  const timestamp = unixSeconds(headers, STANDARD_TIMESTAMP_HEADER);
  const candidates = standardCandidates(sigValues);
  if (
    !anyMatch(
      candidates,
      secrets.map((s) => standardSignature(s, ids[0], timestamp, body)),
    )
  ) {
    throw new WebhookVerificationError(
      'SIGNATURE_MISMATCH',
      candidates.length === 0
        ? `the ${STANDARD_SIGNATURE_HEADER} header has no "v1,<base64>" entry`
        : 'the signature does not match the body and secret',
    );
  }
  return timestamp;
}
