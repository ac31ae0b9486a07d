/**
 * Publishing an event for a tenant: one record on `sluice.events` (key tenant), acknowledged only
 * after Kafka acknowledged it. With a caller-chosen `id`, a repeat within 24 h answers the first
 * publish's result and writes nothing (see idempotency.ts and docs/decisions.md).
 *
 *   const { id, matched_endpoints } = await publishEvent(ctx, { tenant_id: 'acme', type: 'pipeline.failed', data });
 */
import { randomUUID } from 'node:crypto';
import type { Context } from '../context.ts';
import { waitFor } from '../context.ts';
import { SluiceError, unavailable } from '../errors.ts';
import { newId } from '../secrets.ts';
import type { EventRecord } from './records.ts';
import { producing } from '../tracing.ts';
import { eventIdKey, STALE_CLAIM_MS, type EventIdClaim, type EventIdOrigin } from './idempotency.ts';

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

export async function publishEvent(ctx: Context, input: PublishInput): Promise<Published> {
  const now = ctx.clock.now();
  const matched = ctx.endpoints.matching(input.tenant_id, input.type).length;
  if (input.id === undefined) {
    const id = newId('evt');
    await writeEvent(ctx, {
      id,
      tenant_id: input.tenant_id,
      type: input.type,
      data: input.data,
      created_at: now,
      ...keyOf(input),
    });
    return { id, matched_endpoints: matched, repeated: false };
  }
  const view = ctx.eventIds;
  const key = eventIdKey(input.tenant_id, input.id, input.origin);
  const answer = (w: EventIdClaim): Published => ({
    id: input.id!,
    matched_endpoints: w.matched_endpoints,
    repeated: true,
  });
  for (let round = 0; round < 2; round++) {
    const existing = view.winner(key, ctx.clock.now());
    if (existing?.state === 'published') return answer(existing);
    if (existing && ctx.clock.now() - existing.claimed_at < STALE_CLAIM_MS) {
      const done = await settle(ctx, () => view.winner(key, ctx.clock.now()), STALE_CLAIM_MS);
      if (done?.state === 'published') return answer(done);
      continue;
    }
    const claim: EventIdClaim = {
      kind: 'event-id',
      tenant_id: input.tenant_id,
      event_id: input.id,
      claim: randomUUID(),
      state: 'claimed',
      matched_endpoints: matched,
      claimed_at: ctx.clock.now(),
    };
    await ctx.producer.sendJson(ctx.topics.control, key, claim, undefined, ACK);
    await waitFor(ctx.changes, () => view.seen(claim.claim), 10_000, 'event-id claim');
    const winner = view.winner(key, ctx.clock.now());
    if (winner?.claim !== claim.claim) continue;
    await writeEvent(ctx, {
      id: input.id,
      tenant_id: input.tenant_id,
      type: input.type,
      data: input.data,
      created_at: claim.claimed_at,
      ...keyOf(input),
    });
    await ctx.producer.sendJson(
      ctx.topics.control,
      key,
      { ...claim, state: 'published' } satisfies EventIdClaim,
      undefined,
      ACK,
    );
    return { id: input.id, matched_endpoints: matched, repeated: false };
  }
  throw unavailable(`another publish of event id "${input.id}" is in flight; retry shortly`);
}

/** One item of a batch: its result, or the error that refused it alone. */
export type BatchItemResult = { ok: true; published: Published } | { ok: false; error: SluiceError };

/**
 * Publishes many events of one tenant with one Kafka write for the events themselves. Items
 * with an `id` go through the same claim → event → published steps as publishEvent, each step
 * one write for all of them; an id repeated inside the batch answers its first occurrence.
 */
export async function publishBatch(
  ctx: Context,
  tenantId: string,
  inputs: Omit<PublishInput, 'tenant_id'>[],
): Promise<BatchItemResult[]> {
  const now = ctx.clock.now();
  const results: BatchItemResult[] = new Array(inputs.length);
  const ok = (published: Published): BatchItemResult => ({ ok: true, published });
  const events: EventRecord[] = [];
  const firstById = new Map<string, number>();
  const claims: { index: number; claim: EventIdClaim; input: Omit<PublishInput, 'tenant_id'> }[] = [];
  const view = inputs.some((i) => i.id !== undefined) ? ctx.eventIds : null;
  inputs.forEach((input, index) => {
    const matched = ctx.endpoints.matching(tenantId, input.type).length;
    if (input.id === undefined) {
      const id = newId('evt');
      events.push({
        id,
        tenant_id: tenantId,
        type: input.type,
        data: input.data,
        created_at: now,
        endpoints_at: endpointsAt(ctx),
        ...keyOf(input),
      });
      results[index] = ok({ id, matched_endpoints: matched, repeated: false });
      return;
    }
    if (firstById.has(input.id)) return; // answered from its first occurrence below
    firstById.set(input.id, index);
    const existing = view!.winner(eventIdKey(tenantId, input.id), now);
    if (existing?.state === 'published') {
      results[index] = ok({ id: input.id, matched_endpoints: existing.matched_endpoints, repeated: true });
      return;
    }
    if (existing && now - existing.claimed_at < STALE_CLAIM_MS) {
      results[index] = {
        ok: false,
        error: new SluiceError('UNAVAILABLE', `another publish of event id "${input.id}" is in flight; retry shortly`),
      };
      return;
    }
    claims.push({
      index,
      input,
      claim: {
        kind: 'event-id',
        tenant_id: tenantId,
        event_id: input.id,
        claim: randomUUID(),
        state: 'claimed',
        matched_endpoints: matched,
        claimed_at: now,
      },
    });
  });
  if (claims.length > 0) {
    await ctx.producer.send(
      ctx.topics.control,
      claims.map((c) => ({ key: eventIdKey(tenantId, c.input.id!), value: JSON.stringify(c.claim) })),
      ACK,
    );
    await waitFor(ctx.changes, () => claims.every((c) => view!.seen(c.claim.claim)), 10_000, 'event-id claims');
  }
  const won = claims.filter(
    (c) => view!.winner(eventIdKey(tenantId, c.input.id!), ctx.clock.now())?.claim === c.claim.claim,
  );
  for (const c of claims) {
    results[c.index] = won.includes(c)
      ? ok({ id: c.input.id!, matched_endpoints: c.claim.matched_endpoints, repeated: false })
      : {
          ok: false,
          error: new SluiceError(
            'UNAVAILABLE',
            `another publish of event id "${c.input.id}" won the race; retry to read its result`,
          ),
        };
  }
  for (const c of won)
    events.push({
      id: c.input.id!,
      tenant_id: tenantId,
      type: c.input.type,
      data: c.input.data,
      created_at: c.claim.claimed_at,
      endpoints_at: endpointsAt(ctx),
      ...keyOf(c.input),
    });
  await producing(ctx.topics.events, (headers) =>
    ctx.producer.send(
      ctx.topics.events,
      events.map((e) => ({ key: tenantId, value: JSON.stringify(e), headers })),
      ACK,
    ),
  );
  ctx.metrics.published(tenantId, events.length);
  if (won.length > 0)
    await ctx.producer.send(
      ctx.topics.control,
      won.map((c) => ({
        key: eventIdKey(tenantId, c.input.id!),
        value: JSON.stringify({ ...c.claim, state: 'published' } satisfies EventIdClaim),
      })),
      ACK,
    );
  inputs.forEach((input, index) => {
    if (results[index] !== undefined) return;
    const first = results[firstById.get(input.id!)!];
    results[index] = first.ok ? ok({ ...first.published, repeated: true }) : first;
  });
  return results;
}

async function writeEvent(ctx: Context, event: EventRecord): Promise<void> {
  // Traced: the record carries the publishing request's trace on to the fan-out.
  await producing(
    ctx.topics.events,
    (headers) =>
      ctx.producer.sendJson(
        ctx.topics.events,
        event.tenant_id,
        { ...event, endpoints_at: endpointsAt(ctx) },
        headers,
        ACK,
      ),
    undefined,
    { 'sluice.event_id': event.id },
  );
  ctx.metrics.published(event.tenant_id);
}

/** How far this node has read the (single-partition) endpoints topic: see EventRecord.endpoints_at. */
function endpointsAt(ctx: Context): number {
  return Number(ctx.state.position(ctx.topics.endpoints, 0));
}

/** Waits until the claim is published or the time runs out; returns the last winner seen. */
async function settle(
  ctx: Context,
  read: () => EventIdClaim | undefined,
  timeoutMs: number,
): Promise<EventIdClaim | undefined> {
  await ctx.changes.until(() => read()?.state === 'published', timeoutMs);
  return read();
}

/** The event's ordering key, when it has one (absent from the record otherwise). */
function keyOf(input: { ordering_key?: string }): { ordering_key?: string } {
  return input.ordering_key === undefined ? {} : { ordering_key: input.ordering_key };
}
