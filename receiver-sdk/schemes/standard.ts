/**
 * Standard Webhooks (standardwebhooks.com): `webhook-signature: v1,<base64>`, HMAC-SHA256 over
 * `{webhook-id}.{webhook-timestamp}.{body}` keyed with the bytes the base64 after `whsec_` decodes
 * to (secrets made before this scheme are base64url: the same bytes, see docs/webhooks.md). During a
 * rotation's overlap both secrets sign: two space-separated `v1,` entries.
 */
import { createHmac } from 'node:crypto';
import {
  cachedKeys,
  headerValues,
  mustCarry,
  mustMatch,
  SECRET_PREFIX,
  type SignatureScheme,
  unixSeconds,
} from './scheme.ts';

export const STANDARD_ID_HEADER = 'webhook-id';
export const STANDARD_TIMESTAMP_HEADER = 'webhook-timestamp';
export const STANDARD_SIGNATURE_HEADER = 'webhook-signature';

/** The Standard Webhooks key: the bytes of the base64 after `whsec_` (standard or URL alphabet, padding optional). */
export function standardKey(secret: string): Buffer {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  return Buffer.from(encoded, 'base64');
}

const keyOf = cachedKeys(standardKey);

/** HMAC-SHA256 of `{id}.{timestamp}.{body}` with the Standard Webhooks key. */
export function standardSignature(
  secret: string,
  id: string,
  timestamp: number | string,
  rawBody: string | Buffer,
): Buffer {
  return createHmac('sha256', keyOf(secret)).update(`${id}.${timestamp}.`).update(rawBody).digest();
}

/**
 * The three Standard Webhooks headers every scheme on them reads (`v1` here, `v1a` in ed25519.ts):
 * the signature header's values, the one webhook-id and the timestamp; SIGNATURE_MISSING or
 * TIMESTAMP_MISSING when they are not there.
 */
export function standardHeaders(headers: Parameters<typeof headerValues>[0]): {
  signatures: string[];
  id: string;
  timestamp: number;
} {
  const signatures = headerValues(headers, STANDARD_SIGNATURE_HEADER);
  const ids = headerValues(headers, STANDARD_ID_HEADER);
  mustCarry(
    signatures.length > 0 && ids.length === 1,
    `the ${STANDARD_SIGNATURE_HEADER} or ${STANDARD_ID_HEADER} header is missing`,
  );
  return { signatures, id: ids[0], timestamp: unixSeconds(headers, STANDARD_TIMESTAMP_HEADER) };
}

/** Every `v1,<base64>` entry of the webhook-signature header(s) (space-separated). */
function candidates(values: string[]): Buffer[] {
  const out: Buffer[] = [];
  for (const value of values) {
    for (const part of value.trim().split(/\s+/)) {
      const m = /^v1,([A-Za-z0-9+/]{43}=)$/.exec(part);
      if (m) out.push(Buffer.from(m[1], 'base64'));
    }
  }
  return out;
}

export const standardScheme: SignatureScheme<'standard'> = {
  name: 'standard',
  timestampHeader: STANDARD_TIMESTAMP_HEADER,
  sign(headers, secrets, { id, timestamp, rawBody }) {
    headers[STANDARD_ID_HEADER] = id;
    headers[STANDARD_TIMESTAMP_HEADER] = String(timestamp);
    headers[STANDARD_SIGNATURE_HEADER] = secrets
      .map((s) => `v1,${standardSignature(s, id, timestamp, rawBody).toString('base64')}`)
      .join(' ');
  },
  carries: (headers) => headerValues(headers, STANDARD_SIGNATURE_HEADER).length > 0,
  verify(body, headers, secrets) {
    const { signatures, id, timestamp } = standardHeaders(headers);
    const expected = secrets.map((s) => standardSignature(s, id, timestamp, body));
    mustMatch(candidates(signatures), expected, `the ${STANDARD_SIGNATURE_HEADER} header has no "v1,<base64>" entry`);
    return timestamp;
  },
};
