/**
 * An endpoint's ed25519 key pair (issue 35): made by Sluice, the private part `whsk_` + base64 of
 * its PKCS#8 DER (sealed in the record like the HMAC secret), the public part `whpk_` + base64 of
 * its raw 32 bytes, answered at creation and rotation and published as a JWK (RFC 8037) whose
 * `kid` is its RFC 7638 thumbprint, so two keys of one endpoint never share a kid.
 */
import { createHash, generateKeyPairSync } from 'node:crypto';
import {
  PRIVATE_KEY_PREFIX,
  PUBLIC_KEY_PREFIX,
  publicKeyOf,
  rawPublicKey,
} from '../../receiver-sdk/schemes/ed25519.ts';

import type { SigningMode } from './records.ts';

export type { SigningMode };
export const SIGNING_MODES: readonly SigningMode[] = ['hmac', 'ed25519', 'both'];

export interface SigningKeyPair {
  /** `whsk_…`: never leaves Sluice unsealed. */
  privateKey: string;
  /** `whpk_…`. */
  publicKey: string;
}

export function newSigningKeyPair(): SigningKeyPair {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return {
    privateKey: `${PRIVATE_KEY_PREFIX}${privateKey.export({ format: 'der', type: 'pkcs8' }).toString('base64')}`,
    publicKey: `${PUBLIC_KEY_PREFIX}${rawPublicKey(publicKey).toString('base64')}`,
  };
}

export interface Ed25519Jwk {
  kty: 'OKP';
  crv: 'Ed25519';
  x: string;
  kid: string;
  use: 'sig';
  alg: 'EdDSA';
}

/** The JWK of a `whpk_` key, its kid the RFC 7638 thumbprint (SHA-256 of {crv,kty,x}, base64url). */
export function jwkOf(whpk: string): Ed25519Jwk {
  const x = rawPublicKey(publicKeyOf(whpk)).toString('base64url');
  const kid = createHash('sha256').update(`{"crv":"Ed25519","kty":"OKP","x":"${x}"}`).digest('base64url');
  return { kty: 'OKP', crv: 'Ed25519', x, kid, use: 'sig', alg: 'EdDSA' };
}
