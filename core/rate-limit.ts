/**
 * Token buckets keyed by a string (a client id, an address). In memory, per node: a node limits
 * what reaches it, so a cluster-wide limit is roughly the per-node limit times the nodes.
 */
import { LruMap } from './lru.ts';

export class RateLimiter {
  /** The least recently used key's bucket goes first when `maxKeys` are held. */
  private readonly buckets: LruMap<string, { tokens: number; at: number }>;

  /** `ratePerSec` 0 disables the limiter. */
  constructor(
    private readonly ratePerSec: number,
    private readonly burst: number,
    maxKeys = 100_000,
    private readonly now: () => number = Date.now,
  ) {
    this.buckets = new LruMap(maxKeys);
  }

  get enabled(): boolean {
    return this.ratePerSec > 0;
  }

  /** Takes one token: null when allowed, else the whole seconds until one is available. */
  take(key: string): number | null {
    if (!this.enabled) return null;
    const now = this.now();
    const b = this.refill(key, now);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return null;
    }
    return Math.max(1, Math.ceil((1 - b.tokens) / this.ratePerSec));
  }

  /** Seconds until a token is available without taking one (null: available now). */
  peek(key: string): number | null {
    if (!this.enabled) return null;
    const b = this.refill(key, this.now());
    return b.tokens >= 1 ? null : Math.max(1, Math.ceil((1 - b.tokens) / this.ratePerSec));
  }

  private refill(key: string, now: number): { tokens: number; at: number } {
    const b = this.buckets.get(key);
    if (!b) return this.buckets.set(key, { tokens: this.burst, at: now });
    b.tokens = Math.min(this.burst, b.tokens + ((now - b.at) / 1000) * this.ratePerSec);
    b.at = now;
    return b;
  }
}
