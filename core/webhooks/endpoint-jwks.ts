/**
 * An endpoint's public ed25519 keys as a JWK Set (RFC 7517), for `GET
 * /v1/webhooks/endpoints/{id}/jwks`: the current key, and the previous one while a rotation's
 * overlap lasts (distinct kids). Undefined when the endpoint does not sign with ed25519: the
 * route answers that as it answers an unknown id, so nothing is learned.
 */
import type { EndpointRecord } from './records.ts';
import { type Ed25519Jwk, jwkOf } from './signing-keys.ts';

export function endpointJwks(rec: EndpointRecord | undefined, nowMs: number): { keys: Ed25519Jwk[] } | undefined {
  if (!rec || (rec.signing ?? 'hmac') === 'hmac' || !rec.signing_public_key) return undefined;
  const keys = [jwkOf(rec.signing_public_key)];
  const previous = rec.previous_signing_public_key;
  if (previous && (rec.previous_secret_until ?? 0) > nowMs) keys.push(jwkOf(previous));
  return { keys };
}
