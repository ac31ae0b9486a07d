/**
 * Receiver-side verification of a Sluice webhook, in any of its signature schemes (schemes/):
 *
 * - Sluice's: the HMAC-SHA256 signature over the raw body in X-Service-Signature-256
 *   (or X-Service-Signature-256-Previous, signed with the previous secret during a rotation),
 *   compared in constant time, and the signed body's `timestamp` equal to the `X-Service-Timestamp` header.
 * - Standard Webhooks: any `v1,` entry of `webhook-signature` over `{webhook-id}.{webhook-timestamp}.{body}`.
 *
 * Either way the timestamp must be within a window (300 s by default). `scheme: 'auto'` (the
 * default) checks the first scheme whose signature the headers carry: Sluice's when its headers are
 * there, else the standard one. Returns the parsed body.
 *
 *   import { verifyWebhook, WebhookVerificationError } from 'sluice/webhooks';
 *   const event = verifyWebhook(rawBody, req.headers, process.env.WEBHOOK_SECRET!);
 *   // event.id is the dedupe key: deliveries are at-least-once.
 *
 * Pass the body exactly as received (a Buffer or the undecoded string): re-serialized JSON fails.
 * While switching secrets, pass both: `verifyWebhook(body, headers, [newSecret, oldSecret])`.
 */
import type { WebhookBody } from './records.ts';
import { SIGNATURE_SCHEMES, type SchemeName } from './schemes/index.ts';
import { type WebhookHeaders, WebhookVerificationError } from './schemes/scheme.ts';

export type { WebhookBody, WebhookHeaders, SchemeName };
export { WebhookVerificationError, type WebhookVerificationCode } from './schemes/scheme.ts';

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
   * or 'auto' (default: the first scheme the headers carry, Sluice's when both).
   */
  scheme?: 'auto' | SchemeName;
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
  const checked =
    scheme === 'auto'
      ? (SIGNATURE_SCHEMES.find((s) => s.carries(headers)) ?? SIGNATURE_SCHEMES[0])
      : SIGNATURE_SCHEMES.find((s) => s.name === scheme);
  if (checked === undefined) throw new TypeError(`verifyWebhook: unknown scheme "${String(scheme)}"`);
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody;
  const timestamp = checked.verify(body, headers, secrets);

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
    const header = checked.timestampHeader;
    throw new WebhookVerificationError(
      'TIMESTAMP_MISMATCH',
      `the ${header} header (${timestamp}) differs from the signed body's timestamp (${parsed.timestamp})`,
    );
  }
  return parsed;
}
