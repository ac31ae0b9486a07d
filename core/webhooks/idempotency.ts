/**
 * Idempotent publishing across ingress nodes: a publish that names its own event `id` first claims
 * `evt:<tenant>:<id>` on the compacted `sluice.control` topic. Every node applies the claims in the
 * topic's single-partition order with the same rule, so all nodes agree on the winner: the first
 * claim of a key within 24 h, unless it stayed unpublished for longer than STALE_CLAIM_MS (its
 * writer died between claim and event), in which case a later claim takes it over.
 *
 *   ctx.eventIds.winner(`evt:acme:order-1`, now)   // { claim, state: 'published', matched_endpoints, ... }
 *
 * Opened by the 'node' view set (core/views.ts).
 */
import type { StateRecord, StateView } from '../kafka/state-consumer.ts';

export const IDEMPOTENCY_WINDOW_MS = 24 * 3600 * 1000;
export const STALE_CLAIM_MS = 10_000;
const KEY_PREFIX = 'evt:';

export interface EventIdClaim {
  kind: 'event-id';
  tenant_id: string;
  event_id: string;
  /** A nonce per publish request: tells the claims of two racing requests apart. */
  claim: string;
  state: 'claimed' | 'published';
  matched_endpoints: number;
  claimed_at: number; // ms
}

/**
 * Whose namespace an event id is in: a tenant's publishes name ids in the tenant's; Sluice's own
 * events (`endpoint.disabled`) have one of their own, so no publisher can claim their ids first.
 */
export type EventIdOrigin = 'tenant' | 'sluice';

/**
 * `evt:<tenant>:<id>` for a tenant's id, `evt:!sluice:<tenant>:<id>` for Sluice's own. A tenant id
 * never holds `!` (TENANT_PATTERN), so the segment after `evt:` of a tenant's key is never
 * `!sluice`: whatever id a tenant names, its key is never one of Sluice's.
 */
export function eventIdKey(tenantId: string, eventId: string, origin: EventIdOrigin = 'tenant'): string {
  return origin === 'sluice' ? `${KEY_PREFIX}!sluice:${tenantId}:${eventId}` : `${KEY_PREFIX}${tenantId}:${eventId}`;
}

export class EventIdView implements StateView {
  private readonly winners = new Map<string, EventIdClaim>();
  /** Claim nonces applied recently: a writer waits for its own to learn whether it won. */
  private readonly seenClaims = new Map<string, number>();
  private applied = 0;

  constructor(readonly topic: string) {}

  apply(r: StateRecord): void {
    if (!r.key.startsWith(KEY_PREFIX)) return;
    if (r.value === null) {
      this.winners.delete(r.key);
      return;
    }
    let c: EventIdClaim;
    try {
      c = JSON.parse(r.value.toString('utf8')) as EventIdClaim;
    } catch {
      return;
    }
    if (c.kind !== 'event-id' || typeof c.claim !== 'string' || typeof c.claimed_at !== 'number') return;
    this.seenClaims.set(c.claim, c.claimed_at);
    const cur = this.winners.get(r.key);
    // Decided from the records alone (never the local clock) so that every node agrees.
    const replace =
      cur === undefined ||
      cur.claim === c.claim ||
      c.claimed_at - cur.claimed_at >= IDEMPOTENCY_WINDOW_MS ||
      (cur.state === 'claimed' && c.claimed_at - cur.claimed_at >= STALE_CLAIM_MS);
    if (replace) this.winners.set(r.key, cur && cur.claim === c.claim && cur.state === 'published' ? cur : c);
    if (++this.applied % 10_000 === 0) this.prune(c.claimed_at);
  }

  /** The claim that holds the key now, or undefined when none or it is older than 24 h. */
  winner(key: string, nowMs: number): EventIdClaim | undefined {
    const w = this.winners.get(key);
    return w && nowMs - w.claimed_at < IDEMPOTENCY_WINDOW_MS ? w : undefined;
  }

  seen(claim: string): boolean {
    return this.seenClaims.has(claim);
  }

  private prune(nowMs: number): void {
    for (const [k, w] of this.winners) if (nowMs - w.claimed_at >= IDEMPOTENCY_WINDOW_MS) this.winners.delete(k);
    for (const [k, at] of this.seenClaims) if (nowMs - at >= STALE_CLAIM_MS * 6) this.seenClaims.delete(k);
  }
}
