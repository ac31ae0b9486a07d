/**
 * What every verification checks after the signature (verify.ts, jwks-verifier.ts): the signed
 * timestamp within the window, the body a Sluice webhook, and its `timestamp` equal to the header's.
 */
import type { WebhookBody } from '../core/webhooks/records.ts';
import { WebhookVerificationError } from './schemes/scheme.ts';

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

export function checkTolerance(toleranceSeconds: number): void {
  if (!Number.isFinite(toleranceSeconds) || toleranceSeconds < 0)
    throw new TypeError('verifyWebhook: toleranceSeconds must be a non-negative number');
}

/**
 * After the signature: the timestamp it vouches for within the window, the body a Sluice webhook,
 * and its `timestamp` equal to the header's. Answers the parsed body.
 */
export function checkedBody(
  body: Buffer,
  timestamp: number,
  header: string,
  toleranceSeconds: number,
  now: number | undefined,
): WebhookBody {
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
    throw new WebhookVerificationError(
      'TIMESTAMP_MISMATCH',
      `the ${header} header (${timestamp}) differs from the signed body's timestamp (${parsed.timestamp})`,
    );
  }
  return parsed;
}
