/** Random identifiers and secrets, keyed hashing and constant-time comparison. */
import {
  createHmac,
  randomBytes,
  timingSafeEqual,
  createCipheriv,
  createDecipheriv,
  randomFillSync,
} from 'node:crypto';

/** `prefix_` + 32 random bytes (256 bits) in base64url. */
export function newSecret(prefix: string): string {
  return `${prefix}_${randomBytes(32).toString('base64url')}`;
}

// Ids take 12 random bytes each from a pool refilled 4 KiB at a time: one call into the CSPRNG
// per ~340 ids instead of one per id (ids are minted on the publish path).
const ID_POOL = Buffer.alloc(4096);
let idPoolOffset = ID_POOL.length;

/** `prefix_` + 12 random bytes (96 bits) as 24 lowercase hex characters (ids, not secrets). */
export function newId(prefix: string): string {
  if (idPoolOffset + 12 > ID_POOL.length) {
    randomFillSync(ID_POOL);
    idPoolOffset = 0;
  }
  const id = ID_POOL.toString('hex', idPoolOffset, idPoolOffset + 12);
  idPoolOffset += 12;
  return `${prefix}_${id}`;
}

/** HMAC-SHA256 of a secret under the master key: what gets stored, never the secret. */
export function hashSecret(masterKey: Buffer, secret: string): string {
  return createHmac('sha256', masterKey).update('sluice-secret-v1\0').update(secret).digest('base64url');
}

export function constantTimeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  // Compare equal-length buffers so the time does not reveal where they differ.
  if (ab.length !== bb.length) {
    timingSafeEqual(ab, ab);
    return false;
  }
  return timingSafeEqual(ab, bb);
}

/**
 * AES-256-GCM under the master key, for what Sluice keeps in Kafka and must read back in clear: private
 * signing keys, endpoint signing secrets, a rotated client secret until it is fetched.
 */
export function seal(masterKey: Buffer, plaintext: string): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', masterKey, iv);
  const body = Buffer.concat([c.update(plaintext, 'utf8'), c.final()]);
  return [iv, c.getAuthTag(), body].map((b) => b.toString('base64url')).join('.');
}

export function unseal(masterKey: Buffer, sealed: string): string {
  const [iv, tag, body] = sealed.split('.').map((s) => Buffer.from(s, 'base64url'));
  const d = createDecipheriv('aes-256-gcm', masterKey, iv);
  d.setAuthTag(tag);
  return Buffer.concat([d.update(body), d.final()]).toString('utf8');
}
