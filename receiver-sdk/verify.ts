/**
 * Receiver-side verification of a Sluice webhook, in any of its signature schemes (schemes/):
 *
 * - Sluice's: the HMAC-SHA256 signature over the raw body in X-Service-Signature-256
 *   (or X-Service-Signature-256-Previous, signed with the previous secret during a rotation),
 *   compared in constant time, and the signed body's `timestamp` equal to the `X-Service-Timestamp` header.
 * - Standard Webhooks: any `v1,` entry of `webhook-signature` over `{webhook-id}.{webhook-timestamp}.{body}`.
 * - Standard Webhooks' asymmetric `v1a,` entries (ed25519, same content), checked when the keys given
 *   are the endpoint's public keys (`whpk_…`), or `scheme: 'ed25519'`; with the endpoint's JWKS URL
 *   instead of a key, `createJwksVerifier` (jwks-verifier.ts).
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
import type { WebhookBody } from '../core/webhooks/records.ts';
import { checkedBody, checkTolerance } from './checked-body.ts';
import { SIGNATURE_SCHEMES, type SchemeName } from './schemes/index.ts';
import type { WebhookHeaders } from './schemes/scheme.ts';
import { PUBLIC_KEY_PREFIX, publicKeyOf, verifyV1a } from './schemes/ed25519.ts';
import { STANDARD_TIMESTAMP_HEADER } from './schemes/standard.ts';

export type { WebhookBody, WebhookHeaders, SchemeName };
export { WebhookVerificationError, type WebhookVerificationCode } from './schemes/scheme.ts';
export { createJwksVerifier, type JwksVerifier, type JwksVerifierOptions } from './jwks-verifier.ts';

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
   * 'ed25519' (`v1a` entries, with `whpk_` keys), or 'auto' (default: 'ed25519' when the keys
   * given are `whpk_` public keys, else the first scheme the headers carry, Sluice's when both).
   */
  scheme?: 'auto' | SchemeName | 'ed25519';
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
  checkTolerance(toleranceSeconds);
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody;
  if (scheme === 'ed25519' || (scheme === 'auto' && secrets.every((s) => s.startsWith(PUBLIC_KEY_PREFIX)))) {
    const timestamp = verifyV1a(body, headers, secrets.map(publicKeyOf));
    return checkedBody(body, timestamp, STANDARD_TIMESTAMP_HEADER, toleranceSeconds, now);
  }
  const checked =
    scheme === 'auto'
      ? (SIGNATURE_SCHEMES.find((s) => s.carries(headers)) ?? SIGNATURE_SCHEMES[0])
      : SIGNATURE_SCHEMES.find((s) => s.name === scheme);
  if (checked === undefined) throw new TypeError(`verifyWebhook: unknown scheme "${String(scheme)}"`);
  const timestamp = checked.verify(body, headers, secrets);
  return checkedBody(body, timestamp, checked.timestampHeader, toleranceSeconds, now);
}
