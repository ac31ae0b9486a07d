/**
 * Token-signing keys, shared by every node through the compacted `sluice.keys` topic. A key is
 * published (in the JWKS, usable for verification) from its creation until `published_until`, and
 * signs in [signs_from, signs_until). The next key is written before the current one stops
 * signing, and a key stays published until the last token it signed has expired.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject, type JsonWebKey } from 'node:crypto';
import type { StateRecord, StateView } from '../kafka/state-consumer.ts';
import { parseJson } from '../kafka/state-consumer.ts';
import { seal, unseal, newId } from '../secrets.ts';
import { TOKEN_ALG } from './jws.ts';
import { ISSUER_KEY_PREFIX } from './cluster-issuer.ts';

export interface SigningKeyRecord {
  kid: string;
  alg: typeof TOKEN_ALG;
  public_jwk: JsonWebKey;
  private_sealed: string;
  created_at: number;
  signs_from: number;
  signs_until: number;
  published_until: number;
}

interface LoadedKey {
  record: SigningKeyRecord;
  publicKey: KeyObject;
  privateKey: KeyObject | null;
}

export interface KeyPlan {
  rotationMs: number;
  /** A token's lifetime plus allowed skew: how long a retired key stays published. */
  tokenLifetimeMs: number;
}

export class KeyRing implements StateView {
  private readonly keys = new Map<string, LoadedKey>();
  constructor(
    readonly topic: string,
    private readonly masterKey: Buffer,
  ) {}

  apply(r: StateRecord): void {
    if (r.key.startsWith(ISSUER_KEY_PREFIX)) return; // the cluster's issuer lives beside the keys
    const rec = parseJson<SigningKeyRecord>(r.value);
    if (rec === null) {
      this.keys.delete(r.key);
      return;
    }
    this.keys.set(rec.kid, {
      record: rec,
      publicKey: createPublicKey({ key: rec.public_jwk, format: 'jwk' }),
      privateKey: null,
    });
  }

  /** The key that signs at `now`: of those whose window holds `now`, the newest. */
  signingKey(now: number): { kid: string; key: KeyObject } | null {
    let best: LoadedKey | null = null;
    for (const k of this.keys.values()) {
      const r = k.record;
      if (
        r.signs_from <= now &&
        now < r.signs_until &&
        (!best ||
          r.signs_from > best.record.signs_from ||
          (r.signs_from === best.record.signs_from && r.kid > best.record.kid))
      )
        best = k;
    }
    if (!best) return null;
    if (!best.privateKey)
      best.privateKey = createPrivateKey({
        key: JSON.parse(unseal(this.masterKey, best.record.private_sealed)),
        format: 'jwk',
      });
    return { kid: best.record.kid, key: best.privateKey };
  }

  verificationKey(kid: string, now: number): KeyObject | null {
    const k = this.keys.get(kid);
    if (!k || now >= k.record.published_until || now < k.record.created_at - 60_000) return null;
    return k.publicKey;
  }

  jwks(now: number): { keys: Record<string, unknown>[] } {
    const keys = [...this.keys.values()]
      .filter((k) => now < k.record.published_until && k.record.created_at - 60_000 <= now)
      .sort((a, b) => a.record.signs_from - b.record.signs_from)
      .map((k) => ({ ...k.record.public_jwk, kid: k.record.kid, alg: k.record.alg, use: 'sig' }));
    return { keys };
  }

  records(): SigningKeyRecord[] {
    return [...this.keys.values()].map((k) => k.record);
  }

  /**
   * The keys that must be written so that a key signs now and, within the lead time, its successor
   * is already published. Returns [] when nothing is due.
   */
  plan(now: number, p: KeyPlan): SigningKeyRecord[] {
    const lead = Math.min(24 * 3600_000, p.rotationMs / 10);
    const current = [...this.keys.values()]
      .map((k) => k.record)
      .filter((r) => r.signs_from <= now && now < r.signs_until)
      .sort((a, b) => b.signs_until - a.signs_until)[0];
    if (!current) return [newSigningKey(this.masterKey, now, now, p)];
    const successor = [...this.keys.values()].some(
      (k) => k.record.signs_from >= current.signs_until - 1 && k.record.signs_from <= current.signs_until,
    );
    if (current.signs_until - now <= lead && !successor)
      return [newSigningKey(this.masterKey, now, current.signs_until, p)];
    return [];
  }

  /** Keys whose publication ended: tombstone them to keep the topic small. */
  expired(now: number): string[] {
    return [...this.keys.values()].filter((k) => now >= k.record.published_until + 3600_000).map((k) => k.record.kid);
  }
}

export function newSigningKey(masterKey: Buffer, now: number, signsFrom: number, p: KeyPlan): SigningKeyRecord {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const signsUntil = signsFrom + p.rotationMs;
  return {
    kid: newId('key'),
    alg: TOKEN_ALG,
    public_jwk: publicKey.export({ format: 'jwk' }),
    private_sealed: seal(masterKey, JSON.stringify(privateKey.export({ format: 'jwk' }))),
    created_at: now,
    signs_from: signsFrom,
    signs_until: signsUntil,
    published_until: signsUntil + p.tokenLifetimeMs,
  };
}
