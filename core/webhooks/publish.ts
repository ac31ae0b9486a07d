/**
 * Publishing an event for a tenant: one record on `sluice.events` (key tenant), acknowledged only
 * after Kafka acknowledged it. With a caller-chosen `id`, a repeat within 24 h answers the first
 * publish's result and writes nothing (see idempotency.ts and docs/decisions.md).
 *
 *   const { id, matched_endpoints } = await publishEvent(ctx, { tenant_id: 'acme', type: 'pipeline.failed', data });
 */
import type { Context } from '../context.ts';
import { SluiceError, unavailable } from '../errors.ts';
import { newId } from '../secrets.ts';
import type { EventRecord } from './records.ts';
import { producing } from '../tracing.ts';
import { selectByFilter } from './filters/filter-cache.ts';
import type { EndpointRegistry } from './endpoint-registry.ts';
import {
  awaitPublished,
  type ClaimDeps,
  claimIds,
  eventIdKey,
  type EventIdOrigin,
  type HeldClaim,
  inFlight,
  markPublished,
  newClaim,
} from './idempotency.ts';

/**
 * How long a publish waits for Kafka's acknowledgement before it answers 503: while the cluster
 * cannot take writes, callers hear so in seconds instead of hanging through the client's retries.
 */
export const PUBLISH_ACK_TIMEOUT_MS = 5000;
const ACK = { timeoutMs: PUBLISH_ACK_TIMEOUT_MS };

export interface PublishInput {
  tenant_id: string;
  type: string;
  data: unknown;
  id?: string;
  /** Endpoints with `ordering: key` receive the events of one key in publish order. */
  ordering_key?: string;
  /** Whose namespace `id` is in: the tenant's (default), or Sluice's own, which no tenant's id reaches. */
  origin?: EventIdOrigin;
}

export interface Published {
  id: string;
  matched_endpoints: number;
  /** True when this answers an earlier publish of the same id. */
  repeated: boolean;
}

/** One item of a batch: its result, or the error that refused it alone. */
export type BatchItemResult = { ok: true; published: Published } | { ok: false; error: SluiceError };

type Item = Omit<PublishInput, 'tenant_id'>;

/** What publishing reads of the process's context (the claim steps' too). */
export type PublishDeps = ClaimDeps &
  Pick<Context, 'clock' | 'endpoints' | 'eventIds' | 'metrics' | 'producer' | 'state' | 'topics'>;

/** Publishes one event: a batch of one that waits for an earlier publish of its `id` still in flight. */
export async function publishEvent(ctx: PublishDeps, input: PublishInput): Promise<Published> {
  const [result] = await publish(ctx, input.tenant_id, [input], true);
  if (!result.ok) throw result.error;
  return result.published;
}

/**
 * Publishes many events of one tenant; an id repeated inside the batch answers its first occurrence.
 * An item whose id another publish holds right now is refused at once (UNAVAILABLE), so that it
 * holds up none of the others.
 */
export function publishBatch(ctx: PublishDeps, tenantId: string, inputs: Item[]): Promise<BatchItemResult[]> {
  return publish(ctx, tenantId, inputs, false);
}

/** An item that names its id, not answered yet. */
interface Named {
  index: number;
  id: string;
  input: Item;
  key: string;
  matched: number;
}

/**
 * The one publish path: items with an `id` go through claim → event → published (idempotency.ts),
 * each step one Kafka write for all of them; the events themselves are one write. `patient`: an id
 * whose first publish is in flight is waited for, and a lost race tried once more, instead of refused.
 */
async function publish(
  ctx: PublishDeps,
  tenantId: string,
  inputs: Item[],
  patient: boolean,
): Promise<BatchItemResult[]> {
  const now = ctx.clock.now();
  const seenAt = endpointsAt(ctx);
  const results: BatchItemResult[] = new Array(inputs.length);
  const events: EventRecord[] = [];
  const firstByKey = new Map<string, number>();
  let named: Named[] = [];
  inputs.forEach((input, index) => {
    const id = input.id ?? newId('evt');
    const event = eventOf(tenantId, id, input, now, seenAt);
    const matched = matchedEndpoints(ctx.endpoints, event);
    if (input.id === undefined) {
      events.push(event);
      results[index] = ok(id, matched, false);
      return;
    }
    const key = eventIdKey(tenantId, input.id, input.origin);
    if (firstByKey.has(key)) return; // answered from its first occurrence below
    firstByKey.set(key, index);
    named.push({ index, id: input.id, input, key, matched });
  });

  const won: (Named & HeldClaim)[] = [];
  for (let round = 0; round < (patient ? 2 : 1) && named.length > 0; round++) {
    const again: Named[] = [];
    const claims: (Named & HeldClaim)[] = [];
    const waits: Promise<unknown>[] = [];
    const t = ctx.clock.now();
    for (const n of named) {
      const winner = ctx.eventIds.winner(n.key, t);
      if (winner?.state === 'published') results[n.index] = ok(n.id, winner.matched_endpoints, true);
      else if (winner && inFlight(winner, t)) {
        if (!patient) results[n.index] = refused(`another publish of event id "${n.id}" is in flight; retry shortly`);
        else
          waits.push(
            awaitPublished(ctx, n.key).then((done) => {
              if (done) results[n.index] = ok(n.id, done.matched_endpoints, true);
              else again.push(n);
            }),
          );
      } else claims.push({ ...n, claim: newClaim(tenantId, n.id, n.matched, t) });
    }
    await Promise.all(waits);
    const winners = claims.length > 0 ? await claimIds(ctx, claims, ACK) : new Set<HeldClaim>();
    for (const c of claims) {
      if (winners.has(c)) {
        won.push(c);
        results[c.index] = ok(c.id, c.matched, false);
      } else if (patient) again.push(c);
      else results[c.index] = refused(`another publish of event id "${c.id}" won the race; retry to read its result`);
    }
    named = again;
  }
  for (const n of named)
    results[n.index] = {
      ok: false,
      error: unavailable(`another publish of event id "${n.id}" is in flight; retry shortly`),
    };

  for (const c of won) events.push(eventOf(tenantId, c.id, c.input, c.claim.claimed_at, seenAt));
  if (events.length > 0) await writeEvents(ctx, tenantId, events);
  if (won.length > 0) await markPublished(ctx, won, ACK);
  inputs.forEach((input, index) => {
    if (results[index] !== undefined) return;
    const first = results[firstByKey.get(eventIdKey(tenantId, input.id!, input.origin))!];
    results[index] = first.ok ? { ok: true, published: { ...first.published, repeated: true } } : first;
  });
  return results;
}

/**
 * `matched_endpoints`: the endpoints whose types take the event and whose filter (if any) passes,
 * evaluated here as the fan-out will (the same programs and budget). The fan-out decides again:
 * an endpoint changed in between is judged as it is then.
 */
function matchedEndpoints(endpoints: EndpointRegistry, event: EventRecord): number {
  return selectByFilter(endpoints.matching(event.tenant_id, event.type), event).length;
}

function ok(id: string, matched: number, repeated: boolean): BatchItemResult {
  return { ok: true, published: { id, matched_endpoints: matched, repeated } };
}

function refused(detail: string): BatchItemResult {
  return { ok: false, error: new SluiceError('UNAVAILABLE', detail) };
}

function eventOf(tenantId: string, id: string, input: Item, createdAt: number, seenAt: number): EventRecord {
  return {
    id,
    tenant_id: tenantId,
    type: input.type,
    data: input.data,
    created_at: createdAt,
    endpoints_at: seenAt,
    // The event's ordering key, when it has one (absent from the record otherwise).
    ...(input.ordering_key === undefined ? {} : { ordering_key: input.ordering_key }),
  };
}

async function writeEvents(
  ctx: Pick<Context, 'metrics' | 'producer' | 'topics'>,
  tenantId: string,
  events: EventRecord[],
): Promise<void> {
  // Traced: the records carry the publishing request's trace on to the fan-out.
  await producing(
    ctx.topics.events,
    (headers) =>
      ctx.producer.send(
        ctx.topics.events,
        events.map((e) => ({ key: tenantId, value: JSON.stringify(e), headers })),
        ACK,
      ),
    undefined,
    events.length === 1 ? { 'sluice.event_id': events[0].id } : undefined,
  );
  ctx.metrics.published(tenantId, events.length);
}

/** How far this node has read the (single-partition) endpoints topic: see EventRecord.endpoints_at. */
function endpointsAt(ctx: Pick<Context, 'state' | 'topics'>): number {
  return Number(ctx.state.position(ctx.topics.endpoints, 0));
}
