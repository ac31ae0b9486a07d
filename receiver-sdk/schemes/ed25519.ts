/**
 * Standard Webhooks' asymmetric signature: `webhook-signature: v1a,<base64>`, ed25519 over
 * `{webhook-id}.{webhook-timestamp}.{body}` (the content `v1` signs). Sluice holds the private key
 * (`whsk_` + base64 of its PKCS#8 DER, sealed like every secret); a receiver holds only the public
 * key, `whpk_` + base64 of its raw 32 bytes, or finds it in the endpoint's JWKS. During a
 * rotation's overlap both keys sign: two `v1a,` entries. With `signing: "both"` the `v1` entries
 * come first and the `v1a` ones after them, space-separated in the one header.
 * Node built-ins only: the receiver package ships this file.
 */
import { createPrivateKey, createPublicKey, type KeyObject, sign, verify } from 'node:crypto';
import { LruMap } from '../../core/lru.ts';
import { headerValues, WebhookVerificationError, type SignedParts } from './scheme.ts';
import {
  STANDARD_ID_HEADER,
  STANDARD_SIGNATURE_HEADER,
  STANDARD_TIMESTAMP_HEADER,
  standardHeaders,
} from './standard.ts';

export const PUBLIC_KEY_PREFIX = 'whpk_';
export const PRIVATE_KEY_PREFIX = 'whsk_';

/** The DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410): the raw 32 bytes follow it. */
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

const privateKeys = new LruMap<string, KeyObject>(4096);
const publicKeys = new LruMap<string, KeyObject>(4096);

/** The private key of a `whsk_` string, made once per key. */
export function privateKeyOf(whsk: string): KeyObject {
  const cached = privateKeys.get(whsk);
  if (cached) return cached;
  const der = Buffer.from(whsk.slice(PRIVATE_KEY_PREFIX.length), 'base64');
  return privateKeys.set(whsk, createPrivateKey({ key: der, format: 'der', type: 'pkcs8' }));
}

/** The raw 32 bytes of an Ed25519 public key. */
export function rawPublicKey(key: KeyObject): Buffer {
  return key.export({ format: 'der', type: 'spki' }).subarray(SPKI_PREFIX.length);
}

/** The public key of a `whpk_` string (or of the bare base64 of 32 raw bytes); TypeError when it is not one. */
export function publicKeyOf(whpk: string): KeyObject {
  const cached = publicKeys.get(whpk);
  if (cached) return cached;
  const raw = Buffer.from(whpk.startsWith(PUBLIC_KEY_PREFIX) ? whpk.slice(PUBLIC_KEY_PREFIX.length) : whpk, 'base64');
  if (raw.length !== 32) throw new TypeError('an ed25519 public key is `whpk_` + base64 of its 32 raw bytes');
  return publicKeys.set(whpk, createPublicKey({ key: Buffer.concat([SPKI_PREFIX, raw]), format: 'der', type: 'spki' }));
}

const signedContent = (id: string, timestamp: number | string, rawBody: string | Buffer): Buffer =>
  Buffer.concat([Buffer.from(`${id}.${timestamp}.`), typeof rawBody === 'string' ? Buffer.from(rawBody) : rawBody]);

/** The ed25519 signature of `{id}.{timestamp}.{body}` under a `whsk_` key. */
export function v1aSignature(whsk: string, id: string, timestamp: number, rawBody: string | Buffer): Buffer {
  return sign(null, signedContent(id, timestamp, rawBody), privateKeyOf(whsk));
}

/**
 * Adds a `v1a,` entry per private key (current first) to `webhook-signature`, after the `v1`
 * entries already there, and the id and timestamp headers the content is signed with.
 */
export function signV1a(headers: Record<string, string>, keys: readonly string[], parts: SignedParts): void {
  const { id, timestamp, rawBody } = parts;
  headers[STANDARD_ID_HEADER] = id;
  headers[STANDARD_TIMESTAMP_HEADER] = String(timestamp);
  const entries = keys.map((k) => `v1a,${v1aSignature(k, id, timestamp, rawBody).toString('base64')}`);
  const before = headers[STANDARD_SIGNATURE_HEADER];
  headers[STANDARD_SIGNATURE_HEADER] = before ? `${before} ${entries.join(' ')}` : entries.join(' ');
}

/** Every `v1a,<base64>` entry (64-byte signatures) of the webhook-signature header(s). */
function candidates(values: string[]): Buffer[] {
  const out: Buffer[] = [];
  for (const value of values)
    for (const part of value.trim().split(/\s+/)) {
      const m = /^v1a,([A-Za-z0-9+/]{86}==)$/.exec(part);
      if (m) out.push(Buffer.from(m[1], 'base64'));
    }
  return out;
}

/** Whether the headers carry a `v1a,` entry. */
export function carriesV1a(headers: Parameters<typeof headerValues>[0]): boolean {
  return headerValues(headers, STANDARD_SIGNATURE_HEADER).some((v) => /(^|\s)v1a,/.test(v));
}

/**
 * Checks the `v1a` entries against each public key; returns the signed timestamp, or throws
 * WebhookVerificationError (SIGNATURE_MISSING, TIMESTAMP_MISSING, SIGNATURE_MISMATCH).
 */
export function verifyV1a(
  body: Buffer,
  headers: Parameters<typeof headerValues>[0],
  keys: readonly KeyObject[],
): number {
  const { signatures, id, timestamp } = standardHeaders(headers);
  const sigs = candidates(signatures);
  if (sigs.length === 0)
    throw new WebhookVerificationError(
      'SIGNATURE_MISSING',
      `the ${STANDARD_SIGNATURE_HEADER} header has no "v1a,<base64>" entry`,
    );
  const content = signedContent(id, timestamp, body);
  // Every pair is checked, so the time does not tell which key or entry matched.
  let matched = false;
  for (const key of keys) for (const sig of sigs) matched = verify(null, content, key, sig) || matched;
  if (!matched)
    throw new WebhookVerificationError('SIGNATURE_MISMATCH', 'no v1a signature matches the body and public key');
  return timestamp;
}
