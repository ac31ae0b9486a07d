/**
 * The retry ladder as values: what happens to a delivery after an attempt (or instead of one), by
 * the retry policy (core/webhooks/retry-policy.ts).
 * `delivered`, `retry` (to a rung, due at a time), `dead-letter` after the 17th consecutive
 * failure or on a 410 Gone (the endpoint is disabled); and, without an attempt: `held` (endpoint PENDING), `deferred`
 * (its endpoint is slow right now), `dropped` (endpoint deleted, record unreadable, already delivered here)
 * or `forwarded` (its endpoint is a lane endpoint: to `sluice.lanes`, dispatcher/lanes.ts). Nothing here touches Kafka.
 */
import { retryLadder as policy } from '../core/webhooks/retry-policy.ts';
import type { AttemptOutcome } from '../outbound/attempt.ts';
import type { DeliveryRecord, DlqEntry } from '../core/webhooks/records.ts';
import { deadLetterEntry } from './dlq.ts';
import { PAUSE_MAX_MS } from './delivery-policy.ts';

export type Outcome =
  | { kind: 'delivered'; rec: DeliveryRecord; status: number }
  | { kind: 'retry'; rec: DeliveryRecord; next: DeliveryRecord; rung: string }
  | { kind: 'dead-letter'; rec: DeliveryRecord; entry: DlqEntry }
  | { kind: 'held'; rec: DeliveryRecord; next: DeliveryRecord; heldSince: number }
  | { kind: 'deferred'; rec: DeliveryRecord; next: DeliveryRecord; rung: string }
  | {
      kind: 'dropped';
      rec: DeliveryRecord | null;
      reason: 'endpoint-deleted' | 'malformed' | 'duplicate' | 'superseded';
    }
  | { kind: 'forwarded'; rec: DeliveryRecord; next: DeliveryRecord };

export interface LadderClock {
  now: number;
  timeScale: number;
  random?: () => number;
}

/** Decides on the result of attempt `rec.attempt`, which started at `startedAt`. */
export function afterAttempt(rec: DeliveryRecord, result: AttemptOutcome, startedAt: number, c: LadderClock): Outcome {
  if (result.ok) return { kind: 'delivered', rec, status: result.status ?? 200 };
  const tried: DeliveryRecord = {
    ...rec,
    first_attempt_at: rec.first_attempt_at ?? startedAt,
    last_status: result.status,
    last_error: result.error,
    last_attempt_at: startedAt,
  };
  if (rec.attempt >= policy.maxAttempts)
    return { kind: 'dead-letter', rec, entry: deadLetterEntry(tried, rec.attempt, c.now, c.timeScale) };
  if (result.status === 410) {
    const gone: DeliveryRecord = {
      ...tried,
      last_error: 'HTTP 410 Gone: the receiver asked for no more deliveries; the endpoint is DISABLED',
    };
    return { kind: 'dead-letter', rec, entry: deadLetterEntry(gone, rec.attempt, c.now, c.timeScale) };
  }
  const backoff = policy.delayAfter(rec.attempt, c.timeScale, c.random);
  // A receiver's Retry-After (real time) lengthens the wait, never shortens it, and is capped at
  // what is left of the ladder's span (scaled) since the first attempt.
  const asked = Math.min(result.retryAfterMs ?? 0, remainingSpanMs(tried, c));
  const rung = asked > backoff ? policy.rungFor(asked, c.timeScale) : policy.rungAfter(rec.attempt);
  const next: DeliveryRecord = { ...tried, attempt: rec.attempt + 1, due_at: c.now + Math.max(backoff, asked) };
  return { kind: 'retry', rec, next, rung: rung.label };
}

/** What is left of the 72-hour retry span (scaled) since the delivery's first attempt; never negative. */
export function remainingSpanMs(rec: DeliveryRecord, c: LadderClock): number {
  return Math.max(0, (rec.first_attempt_at ?? c.now) + policy.spanMs / c.timeScale - c.now);
}

/** A delivery whose endpoint is DISABLED goes to the DLQ without an attempt, with the reason. */
export function disabled(rec: DeliveryRecord, reason: string, c: LadderClock): Outcome {
  const last: DeliveryRecord = { ...rec, last_error: `the endpoint is DISABLED (${reason}); not attempted` };
  return { kind: 'dead-letter', rec, entry: deadLetterEntry(last, rec.attempt - 1, c.now, c.timeScale) };
}

/**
 * A delivery whose endpoint is PENDING or paused waits on the hold rung, uncounted, re-checked every
 * `recheckMs` (scaled) or as soon as the endpoint changes. A PENDING endpoint's is dead-lettered
 * once the 72-hour span (scaled) since its first attempt, or since it was first held, ran out; a
 * paused endpoint's waits up to the DLQ retention (7 days, scaled) since it was first held.
 */
export function hold(
  rec: DeliveryRecord,
  heldSince: number | null,
  recheckMs: number,
  c: LadderClock,
  paused = false,
): Outcome {
  const since = heldSince ?? c.now;
  const deadline = paused
    ? since + PAUSE_MAX_MS / c.timeScale
    : (rec.first_attempt_at ?? since) + policy.spanMs / c.timeScale;
  if (c.now >= deadline) {
    const last: DeliveryRecord = {
      ...rec,
      last_error: paused
        ? 'the endpoint stayed paused for longer than the DLQ retention (7 days)'
        : (rec.last_error ?? 'the endpoint stayed PENDING (unverified) until the 72-hour retry span ran out'),
    };
    return { kind: 'dead-letter', rec, entry: deadLetterEntry(last, rec.attempt - 1, c.now, c.timeScale) };
  }
  const next: DeliveryRecord = { ...rec, due_at: Math.min(deadline, c.now + recheckMs / c.timeScale) };
  return { kind: 'held', rec, next, heldSince: since };
}

/**
 * Not attempted now because its endpoint is slow (back through the first rung) or asked us to
 * wait until `until` (a Retry-After): attempt unchanged, not counted as a failure.
 */
export function defer(rec: DeliveryRecord, c: LadderClock, until: number | null = null): Outcome {
  if (until !== null && until > c.now) {
    const rung = policy.rungFor(until - c.now, c.timeScale);
    return { kind: 'deferred', rec, next: { ...rec, due_at: until }, rung: rung.label };
  }
  const rung = policy.rungs[0];
  return { kind: 'deferred', rec, next: { ...rec, due_at: c.now + rung.delayMs / c.timeScale }, rung: rung.label };
}

/** A lane endpoint's delivery read elsewhere (a rung, a replay) goes to its lane, unchanged. */
export function forward(rec: DeliveryRecord): Outcome {
  return { kind: 'forwarded', rec, next: rec };
}
