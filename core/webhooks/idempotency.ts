/**
 * Idempotent publishing across ingress nodes: a publish that names its own event `id` first claims
 * `evt:<tenant>:<id>` on the compacted `sluice.control` topic. Every node applies the claims in the
 * topic's single-partition order with the same rule, so all nodes agree on the winner: the first
 * claim of a key within 24 h, unless it stayed unpublished for longer than STALE_CLAIM_MS (its
 * writer died between claim and event), in which case a later claim takes it over.
 *
 *   ctx.eventIds.winner(`evt:acme:order-1`, now)   // { claim, state: 'published', matched_endpoints, ... }
 *
 * The steps a publish takes (publish.ts): `newClaim` for each free id, `claimIds` (one write, then
 * wait for this node's view to learn which claims won), the events themselves, then `markPublished`.
 * A repeat of a published id answers its result; one whose claim is still fresh is `inFlight`
 * (`awaitPublished` waits for it).
 *
 * Opened by the 'node' view set (core/views.ts).
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../clock.ts';
import { unavailable } from '../errors.ts';
import type { DurableProducer } from '../kafka/producers.ts';
import type { StateRecord, StateView } from '../kafka/state-consumer.ts';
import type { ViewChanges } from '../kafka/view-changes.ts';

/** What the claim steps read and write (a node's context has them all). */
export interface ClaimDeps {
  producer: DurableProducer;
  topics: { control: string };
  eventIds: EventIdView;
  changes: ViewChanges;
  clock: Clock;
}

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

/** A publish's claim of one event id, under the id's key. */
export interface HeldClaim {
  key: string;
  claim: EventIdClaim;
}

/** A new claim of `eventId` for one publish request, holding the result a repeat will answer. */
export function newClaim(tenantId: string, eventId: string, matchedEndpoints: number, nowMs: number): EventIdClaim {
  return {
    kind: 'event-id',
    tenant_id: tenantId,
    event_id: eventId,
    claim: randomUUID(),
    state: 'claimed',
    matched_endpoints: matchedEndpoints,
    claimed_at: nowMs,
  };
}

/** Whether a winning claim not yet published is fresh: its publish is still under way, not dead. */
export function inFlight(winner: EventIdClaim, nowMs: number): boolean {
  return winner.state === 'claimed' && nowMs - winner.claimed_at < STALE_CLAIM_MS;
}

/**
 * Writes the claims to `sluice.control` (one write) and waits until this node's view has applied
 * them all; returns those that won. A lost claim means another publish of its id got there first.
 */
export async function claimIds(
  ctx: ClaimDeps,
  claims: readonly HeldClaim[],
  ack: { timeoutMs: number },
): Promise<Set<HeldClaim>> {
  const view = ctx.eventIds;
  await ctx.producer.send(
    ctx.topics.control,
    claims.map((c) => ({ key: c.key, value: JSON.stringify(c.claim) })),
    ack,
  );
  const waitMs = 10_000;
  if (!(await ctx.changes.until(() => claims.every((c) => view.seen(c.claim.claim)), waitMs)))
    throw unavailable(`event-id claims did not become visible in this node's view within ${waitMs} ms`);
  const now = ctx.clock.now();
  return new Set(claims.filter((c) => view.winner(c.key, now)?.claim === c.claim.claim));
}

/** Marks won claims published (one write): from then on a repeat of their ids answers their result. */
export async function markPublished(
  ctx: ClaimDeps,
  claims: readonly HeldClaim[],
  ack: { timeoutMs: number },
): Promise<void> {
  await ctx.producer.send(
    ctx.topics.control,
    claims.map((c) => ({
      key: c.key,
      value: JSON.stringify({ ...c.claim, state: 'published' } satisfies EventIdClaim),
    })),
    ack,
  );
}

/** Waits (up to STALE_CLAIM_MS) until the claim holding `key` is published; returns it then, else undefined. */
export async function awaitPublished(ctx: ClaimDeps, key: string): Promise<EventIdClaim | undefined> {
  const read = () => ctx.eventIds.winner(key, ctx.clock.now());
  await ctx.changes.until(() => read()?.state === 'published', STALE_CLAIM_MS);
  const w = read();
  return w?.state === 'published' ? w : undefined;
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
