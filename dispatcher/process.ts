/**
 * What happens to one delivery record, as an Outcome value: dropped when its endpoint is gone,
 * held while it is PENDING or paused, dead-lettered when it is DISABLED, forwarded to its lane when
 * the endpoint has limits or order (lanes.ts), else queued for its endpoint (scheduler.ts) and
 * attempted (signed afresh) and judged by the ladder, or diverted to a rung when its endpoint is slow or asked
 * for time. What an attempt says about its endpoint is acted on here too: a 410 Gone disables it,
 * and so does failing every attempt for SLUICE_WEBHOOK_DISABLE_AFTER_HOURS (scaled).
 *
 * Shutdown (`stage.stopping`): no attempt starts any more. A delivery that has not started gets
 * no outcome at all (its promise never settles), so its offset is never committed and the next
 * owner of the partition delivers it; attempts already under way finish and are counted in
 * `stage.attempting` until their outcome is known, so the dispatcher can wait for them.
 */
import type { Context } from '../core/context.ts';
import type { AttemptEnd, RecentAttempts } from './recent-attempts.ts';
import type { DeliveryRecord, EndpointRecord } from '../core/webhooks/records.ts';
import type { AttemptRecord } from '../core/webhooks/attempt-history.ts';
import type { AttemptOutcome } from '../outbound/attempt.ts';
import type { Deliverer } from './deliver.ts';
import type { EndpointHealth } from './health.ts';
import {
  afterAttempt,
  defer,
  disabled,
  forward,
  hold,
  remainingSpanMs,
  type LadderClock,
  type Outcome,
} from './ladder.ts';
import { isWaiting, needsLane } from './delivery-policy.ts';
import type { DeliveryScheduler, EndpointSignal } from './scheduler.ts';
import type { TraceContext } from '../core/tracing.ts';

/** An outcome and what its attempt says about the endpoint. */
export interface Attempted extends EndpointSignal {
  outcome: Outcome;
}

/**
 * What a delivery's way through the dispatcher reads of the process's context: here, in the lanes
 * (lanes.ts) and in the delivery consumer (delivery-consumer.ts).
 */
export type StageDeps = Pick<
  Context,
  'clock' | 'config' | 'endpoints' | 'kafka' | 'log' | 'metrics' | 'recoveries' | 'state' | 'topics'
>;

export interface Stage {
  ctx: StageDeps;
  /** The one scheduler of the process: every attempt, lane endpoints' included, takes a slot of it. */
  scheduler: DeliveryScheduler<EndpointSignal>;
  deliverer: Deliverer;
  /** Disables endpoints on a 410 or a long outage (health.ts). */
  health?: EndpointHealth;
  /** Set when the dispatcher stops: nothing new is attempted. */
  stopping?: boolean;
  /** Attempts started and not yet judged. */
  attempting?: number;
  /** Told of every attempt made (its report for the attempt history; never waited for). */
  onAttempt?: (a: AttemptRecord) => void;
  /** What this process attempted lately: a record read again is not sent again (recent-attempts.ts). */
  recent: RecentAttempts;
}

/** The answer for a delivery that must not start: never settles, so its offset stays uncommitted. */
export const never = <T>(): Promise<T> => new Promise<T>(() => {});

export function clockOf(ctx: Pick<Context, 'clock' | 'config'>): LadderClock {
  return { now: ctx.clock.now(), timeScale: ctx.config.timeScale };
}

/**
 * The endpoint as the delivery must see it, or the outcome that replaces the attempt. Outside its
 * lane (`inLane` false) a lane endpoint's delivery is forwarded to the lane, which alone sends to it.
 */
export function precheck(
  ctx: Pick<Context, 'clock' | 'config' | 'endpoints' | 'recoveries'>,
  rec: DeliveryRecord,
  heldSince: number | null,
  inLane = false,
): EndpointRecord | Outcome {
  const ep = ctx.endpoints.get(rec.endpoint_id);
  if (!ep || ep.tenant_id !== rec.tenant_id) return { kind: 'dropped', rec, reason: 'endpoint-deleted' };
  // A retry of a delivery a recovery re-sent as a fresh one (core/webhooks/recovery.ts): it stops here.
  if (rec.attempt > 1 && ctx.recoveries.isSuperseded(rec.delivery_id))
    return { kind: 'dropped', rec, reason: 'superseded' };
  if (ep.state === 'DISABLED') return disabled(rec, ep.disabled_reason ?? 'disabled', clockOf(ctx));
  if (isWaiting(ep)) return hold(rec, heldSince, ctx.config.dispatchHoldRecheckMs, clockOf(ctx), ep.paused === true);
  if (!inLane && needsLane(ep)) return forward(rec);
  return ep;
}

export const isOutcome = (v: EndpointRecord | Outcome): v is Outcome => 'kind' in v;
const HEALTHY: EndpointSignal = { slow: false, notBefore: null };

async function attempt(
  s: Stage,
  rec: DeliveryRecord,
  heldSince: number | null,
  trace: TraceContext | undefined,
  onRetryAfter: OnRetryAfter | undefined,
): Promise<Attempted> {
  // Queued before the dispatcher began to stop; left to the partition's next owner.
  if (s.stopping) return never();
  // The endpoint may have been deleted or re-verified while this waited its turn.
  const ep = precheck(s.ctx, rec, heldSince);
  if (isOutcome(ep)) return { outcome: ep, ...HEALTHY };
  return attemptAt(s, rec, ep, trace, onRetryAfter);
}

/**
 * Told an answer's Retry-After (the epoch ms before which nothing may go) as soon as the answer is
 * read: the attempt settles only after its bookkeeping (a write about the endpoint's health may
 * take a Kafka round trip), and the endpoint's next request must not go out meanwhile.
 */
export type OnRetryAfter = (notBefore: number) => void;

/** One attempt at an endpoint that may receive it now, judged by the ladder. */
export async function attemptAt(
  s: Stage,
  rec: DeliveryRecord,
  ep: EndpointRecord,
  trace: TraceContext | undefined,
  onRetryAfter?: OnRetryAfter,
): Promise<Attempted> {
  const { ctx } = s;
  // A copy read while the first waited its turn or was under way: the first's outcome stands.
  const end = await s.recent.claim(rec);
  if (end === null) return { outcome: { kind: 'dropped', rec, reason: 'duplicate' }, ...HEALTHY };
  s.attempting = (s.attempting ?? 0) + 1;
  let made: AttemptEnd = 'not-made';
  try {
    const { result, startedAt } = await s.deliverer.attempt(rec, ep, trace);
    made = result.ok ? 'delivered' : 'failed';
    ctx.metrics.attempt(rec.attempt, result.ok, result.durationMs);
    const slow = result.durationMs >= ctx.config.dispatchSlowMs;
    const c = clockOf(ctx);
    const notBefore = result.retryAfterMs
      ? c.now +
        Math.min(
          result.retryAfterMs,
          remainingSpanMs({ ...rec, first_attempt_at: rec.first_attempt_at ?? startedAt }, c),
        )
      : null;
    if (notBefore !== null) onRetryAfter?.(notBefore);
    await s.health?.judge(ep.id, result, startedAt, ep.url);
    const outcome = afterAttempt(rec, result, startedAt, c);
    s.onAttempt?.(attemptReport(rec, result, startedAt, outcome));
    return { outcome, slow, notBefore };
  } catch (err) {
    // Re-queued with the same attempt number: it must not read as a copy when it comes back.
    made = 'not-made';
    ctx.log.error('delivery processing failed; re-queued', {
      delivery_id: rec.delivery_id,
      error: (err as Error).stack,
    });
    return { outcome: defer(rec, clockOf(ctx)), ...HEALTHY };
  } finally {
    s.attempting!--;
    end(made);
  }
}

export function attemptReport(
  rec: DeliveryRecord,
  result: AttemptOutcome,
  startedAt: number,
  outcome: Outcome,
): AttemptRecord {
  return {
    delivery_id: rec.delivery_id,
    endpoint_id: rec.endpoint_id,
    tenant_id: rec.tenant_id,
    event_id: rec.event.id,
    event_type: rec.event.type,
    attempt: rec.attempt,
    at: startedAt,
    duration_ms: result.durationMs,
    status: result.status,
    error: result.error,
    ok: result.ok,
    outcome: outcome.kind === 'delivered' ? 'delivered' : outcome.kind === 'dead-letter' ? 'dead-letter' : 'retry',
    recovery: rec.recovery, // undefined for all but recovered deliveries: JSON leaves it out
  };
}

/** `trace`: the delivery's consume span (tracing on), parent of the attempt's spans. */
export async function processDelivery(
  s: Stage,
  rec: DeliveryRecord | null,
  heldSince: number | null,
  origin?: string,
  trace?: TraceContext,
): Promise<Outcome> {
  if (s.stopping) return never();
  if (rec === null) return { kind: 'dropped', rec: null, reason: 'malformed' };
  let first = precheck(s.ctx, rec, heldSince);
  // An endpoint this process does not know may be one its view has not read yet (registered on
  // another node a moment ago): wait until it has read as far as the fan-out had, then look again.
  if (
    isOutcome(first) &&
    first.kind === 'dropped' &&
    (await s.ctx.state.reached(s.ctx.topics.endpoints, 0, rec.endpoints_at ?? 0, 10_000))
  ) {
    first = precheck(s.ctx, rec, heldSince);
  }
  if (isOutcome(first)) return first;
  return new Promise<Outcome>((resolve) => {
    let outcome: Outcome;
    s.scheduler.submit({
      endpointId: rec.endpoint_id,
      tenantId: rec.tenant_id,
      origin,
      run: async (onRetryAfter) => {
        const a = await attempt(s, rec, heldSince, trace, onRetryAfter);
        outcome = a.outcome;
        return a;
      },
      divert: (_reason, until) => {
        outcome = defer(rec, clockOf(s.ctx), until);
        return HEALTHY;
      },
      resolve: () => resolve(outcome),
    });
  });
}
