/**
 * Verifies `v1a` (ed25519) deliveries with the keys of an endpoint's JWKS
 * (`GET /v1/webhooks/endpoints/{id}/jwks`), so a receiver is configured with a URL and holds no key.
 * The key set is fetched on first use and cached. Standard Webhooks' `v1a` names no key id, so
 * every cached key is tried; when none verifies (a rotation's new key not yet seen), the set is
 * fetched again, at most once per `refreshIntervalMs`, and the keys tried again.
 *
 *   const verifier = createJwksVerifier('https://sluice.example.com/v1/webhooks/endpoints/ep_…/jwks');
 *   const event = await verifier.verify(rawBody, req.headers);
 *
 * Node built-ins only (global fetch): the receiver package ships this file.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import { checkedBody, checkTolerance } from './checked-body.ts';
import type { WebhookBody } from '../core/webhooks/records.ts';
import { verifyV1a } from './schemes/ed25519.ts';
import { type WebhookHeaders, WebhookVerificationError } from './schemes/scheme.ts';
import { STANDARD_TIMESTAMP_HEADER } from './schemes/standard.ts';

export interface JwksVerifierOptions {
  /** As verifyWebhook's: how far the timestamp may be from now; default 300. */
  toleranceSeconds?: number;
  /** The least time between two fetches of the key set (a signature no key verifies asks for one); default 60 s. */
  refreshIntervalMs?: number;
  /** The current time in milliseconds; default Date.now(). */
  now?: () => number;
  /** How the key set is fetched; default the global fetch. */
  fetch?: (url: string) => Promise<Response>;
}

export interface JwksVerifier {
  /** The parsed body; throws WebhookVerificationError, or the fetch's error when no key set was ever fetched. */
  verify(rawBody: string | Buffer, headers: WebhookHeaders): Promise<WebhookBody>;
}

interface Jwk {
  kty?: unknown;
  crv?: unknown;
  x?: unknown;
}

/** The Ed25519 keys of a JWK Set; others are skipped. */
function keysOf(set: unknown): KeyObject[] {
  const keys = (set as { keys?: unknown })?.keys;
  if (!Array.isArray(keys)) throw new TypeError('the JWKS answer has no "keys" array');
  const out: KeyObject[] = [];
  for (const k of keys as Jwk[]) {
    if (k?.kty !== 'OKP' || k.crv !== 'Ed25519' || typeof k.x !== 'string') continue;
    out.push(createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: k.x }, format: 'jwk' }));
  }
  return out;
}

export function createJwksVerifier(jwksUrl: string, opts: JwksVerifierOptions = {}): JwksVerifier {
  const { toleranceSeconds = 300, refreshIntervalMs = 60_000, now = Date.now } = opts;
  const fetchSet = opts.fetch ?? ((url: string) => fetch(url, { headers: { accept: 'application/json' } }));
  checkTolerance(toleranceSeconds);
  let keys: KeyObject[] | null = null;
  let fetchedAt = Number.NEGATIVE_INFINITY;
  let inFlight: Promise<KeyObject[]> | null = null;

  const refresh = (): Promise<KeyObject[]> => {
    inFlight ??= (async () => {
      fetchedAt = now();
      try {
        const res = await fetchSet(jwksUrl);
        if (!res.ok) throw new Error(`the JWKS at ${jwksUrl} answered ${res.status}`);
        keys = keysOf(await res.json());
        return keys;
      } finally {
        inFlight = null;
      }
    })();
    return inFlight;
  };

  return {
    async verify(rawBody, headers) {
      const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody;
      const held = keys ?? (await refresh());
      let timestamp: number;
      try {
        timestamp = verifyV1a(body, headers, held);
      } catch (err) {
        // Only a signature no held key verifies asks for the set again (a new key after a rotation).
        const unknownKey = err instanceof WebhookVerificationError && err.code === 'SIGNATURE_MISMATCH';
        if (!unknownKey || now() - fetchedAt < refreshIntervalMs) throw err;
        timestamp = verifyV1a(body, headers, await refresh().catch(() => held));
      }
      return checkedBody(body, timestamp, STANDARD_TIMESTAMP_HEADER, toleranceSeconds, opts.now?.());
    },
  };
}
