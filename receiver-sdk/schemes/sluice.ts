/**
 * Sluice's own scheme: `X-Service-Signature-256: sha256=<hex>`, HMAC-SHA256 over the raw body keyed
 * with the whole secret string as UTF-8 bytes. The body pins `timestamp`, equal to
 * X-Service-Timestamp (the header itself is not signed: the verifier compares the two). During a
 * rotation's overlap the previous secret's signature goes in X-Service-Signature-256-Previous.
 */
import { createHmac } from 'node:crypto';
import { cachedKeys, headerValues, mustCarry, mustMatch, type SignatureScheme, unixSeconds } from './scheme.ts';

export const SIGNATURE_HEADER = 'x-service-signature-256';
export const PREVIOUS_SIGNATURE_HEADER = 'x-service-signature-256-previous';
export const TIMESTAMP_HEADER = 'x-service-timestamp';

const keyOf = cachedKeys((secret) => Buffer.from(secret, 'utf8'));

/** HMAC-SHA256 of the raw body keyed with the endpoint secret's UTF-8 bytes. */
export function webhookHmac(secret: string, rawBody: string | Buffer): Buffer {
  return createHmac('sha256', keyOf(secret)).update(rawBody).digest();
}

/** Every `sha256=<hex>` candidate in the signature header(s). */
function candidates(values: string[]): Buffer[] {
  const out: Buffer[] = [];
  for (const value of values) {
    for (const part of value.split(',')) {
      const m = /^\s*sha256=([0-9a-fA-F]{64})\s*$/.exec(part);
      if (m) out.push(Buffer.from(m[1], 'hex'));
    }
  }
  return out;
}

export const sluiceScheme: SignatureScheme<'sluice'> = {
  name: 'sluice',
  timestampHeader: TIMESTAMP_HEADER,
  sign(headers, secrets, { timestamp, rawBody }) {
    headers[SIGNATURE_HEADER] = `sha256=${webhookHmac(secrets[0], rawBody).toString('hex')}`;
    if (secrets.length > 1)
      headers[PREVIOUS_SIGNATURE_HEADER] = `sha256=${webhookHmac(secrets[1], rawBody).toString('hex')}`;
    headers[TIMESTAMP_HEADER] = String(timestamp);
  },
  carries: (headers) => headerValues(headers, SIGNATURE_HEADER).length > 0,
  verify(body, headers, secrets) {
    const sigValues = [...headerValues(headers, SIGNATURE_HEADER), ...headerValues(headers, PREVIOUS_SIGNATURE_HEADER)];
    mustCarry(sigValues.length > 0, `the ${SIGNATURE_HEADER} header is missing`);
    const timestamp = unixSeconds(headers, TIMESTAMP_HEADER);
    const expected = secrets.map((s) => webhookHmac(s, body));
    mustMatch(candidates(sigValues), expected, `the ${SIGNATURE_HEADER} header is not "sha256=<64 hex digits>"`);
    return timestamp;
  },
};
