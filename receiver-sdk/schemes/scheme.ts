/**
 * What a signature scheme is: a name, how the dispatcher signs a delivery with it and how a receiver
 * checks that signature. Every scheme keys its MAC from the endpoint's one secret `whsec_<base64>`.
 * The schemes are listed in index.ts; the dispatcher's signing (../signing.ts) and the receiver's
 * verifier (../verify.ts) both go through that list, so a new scheme is one file here and one entry
 * there. Node built-ins only: the receiver package ships these files.
 */
import { createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto';
import { SluiceBaseError } from '../../core/errors.ts';
import { LruMap } from '../../core/lru.ts';

export const SECRET_PREFIX = 'whsec_';

/** What a delivery's signature covers: the event id, the unix-seconds timestamp and the raw body. */
export interface SignedParts {
  id: string;
  timestamp: number;
  rawBody: string | Buffer;
}

export type WebhookHeaders = Record<string, string | string[] | undefined> | Headers;

export interface SignatureScheme<Name extends string = string> {
  readonly name: Name;
  /** Adds the scheme's headers to `headers`: one signature per secret, the current one first. */
  sign(headers: Record<string, string>, secrets: readonly string[], parts: SignedParts): void;
  /** Whether the headers carry this scheme's signature (`scheme: 'auto'` checks the first scheme they carry). */
  carries(headers: WebhookHeaders): boolean;
  /** The header that holds the timestamp `verify` returns. */
  readonly timestampHeader: string;
  /**
   * Checks the signature of `body` against each secret; returns the timestamp it vouches for, or
   * throws WebhookVerificationError (SIGNATURE_MISSING, SIGNATURE_MISMATCH, TIMESTAMP_MISSING).
   */
  verify(body: Buffer, headers: WebhookHeaders, secrets: readonly string[]): number;
}

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

/** The HMAC key of each secret, made once: the secrets of the endpoints being delivered to sign again and again. */
export function cachedKeys(keyBytes: (secret: string) => Buffer): (secret: string) => KeyObject {
  const keys = new LruMap<string, KeyObject>(4096);
  return (secret) => keys.get(secret) ?? keys.set(secret, createSecretKey(keyBytes(secret)));
}

/** Every value of header `name` (lower case), from a plain object or a fetch `Headers`. */
export function headerValues(headers: WebhookHeaders, name: string): string[] {
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

/** SIGNATURE_MISSING, saying `detail`, unless the headers carry what the scheme signs with. */
export function mustCarry(carried: boolean, detail: string): void {
  if (!carried) throw new WebhookVerificationError('SIGNATURE_MISSING', detail);
}

/**
 * SIGNATURE_MISMATCH unless a candidate read from the headers equals an expected MAC (every pair is
 * compared, each in constant time); `unreadable` says what is wrong when no candidate could be read.
 */
export function mustMatch(candidates: Buffer[], expected: Buffer[], unreadable: string): void {
  let matched = false;
  for (const e of expected)
    for (const c of candidates) matched = (c.length === e.length && timingSafeEqual(c, e)) || matched;
  if (!matched)
    throw new WebhookVerificationError(
      'SIGNATURE_MISMATCH',
      candidates.length === 0 ? unreadable : 'the signature does not match the body and secret',
    );
}

/** The one value of header `name` as unix seconds, or TIMESTAMP_MISSING. */
export function unixSeconds(headers: WebhookHeaders, name: string): number {
  const values = headerValues(headers, name);
  if (values.length !== 1 || !/^\d{1,12}$/.test(values[0].trim())) {
    throw new WebhookVerificationError('TIMESTAMP_MISSING', `the ${name} header is missing or not unix seconds`);
  }
  return Number(values[0].trim());
}
