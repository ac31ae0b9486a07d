/**
 * The retry policy of webhook deliveries, as one value: the rungs (one retry topic each, named after
 * its nominal delay), the attempt limit, the span the ladder promises, the jitter, and how long a
 * dead letter is kept. The ladder's decisions (dispatcher/ladder.ts) and the topics (core/topics.ts)
 * read it; a policy of other numbers is another `retryPolicy({...})` here.
 *
 * Sluice's: 17 attempts, 30 s doubling to a 9 h cap, each delay stretched by a random 0-10 % (jitter
 * only ever lengthens, so the bounds hold): attempt 17 lands between 62 h and 68.2 h after attempt 1,
 * inside the promised [60 h, 72 h]; dead letters are kept 7 days.
 *
 *   retryLadder.delayAfter(3)      // 2 min, jittered: the wait after the 3rd failure
 *   retryLadder.rungAfter(3).label // '2m': the topic sluice.retry.2m holds it meanwhile
 */

export interface Rung {
  label: string;
  delayMs: number;
}

export interface RetryPolicyOptions {
  /** The distinct delays, shortest first: failure n waits on rung min(n, rungs.length). */
  rungs: readonly Rung[];
  /** Attempts in all: the last failure is dead-lettered. */
  maxAttempts: number;
  /** Each delay is stretched by up to this fraction (0.1: 0-10 %), never shortened. */
  jitter: number;
  /** From the first attempt, how long a delivery may be retried or held (unscaled). */
  spanMs: number;
  /** How long a dead letter is kept on `sluice.dlq` (unscaled). */
  dlqRetentionMs: number;
}

export interface RetryPolicy extends Readonly<RetryPolicyOptions> {
  readonly rungLabels: readonly string[];
  /** The rung that holds a delivery after its `failedAttempt`-th failure (1-based, < maxAttempts). */
  rungAfter(failedAttempt: number): Rung;
  /** The rung for a wait of `delayMs` (already scaled): the longest whose scaled delay fits in it, else the first. */
  rungFor(delayMs: number, timeScale?: number): Rung;
  /** The delay before the next attempt, jittered and divided by the time scale. */
  delayAfter(failedAttempt: number, timeScale?: number, random?: () => number): number;
  /** The span from attempt 1 to the last attempt without jitter. */
  nominalSpanMs(): number;
}

/** A retry policy from its numbers, checked where it is made. */
export function retryPolicy(o: RetryPolicyOptions): RetryPolicy {
  if (o.rungs.length === 0 || o.rungs.some((r, i) => i > 0 && r.delayMs < o.rungs[i - 1].delayMs))
    throw new RangeError('retryPolicy: rungs must be at least one, shortest first');
  if (!Number.isInteger(o.maxAttempts) || o.maxAttempts < 1) throw new RangeError('retryPolicy: maxAttempts >= 1');
  if (!(o.jitter >= 0)) throw new RangeError('retryPolicy: jitter must be >= 0');
  const rungs = Object.freeze([...o.rungs]);
  const rungAfter = (failedAttempt: number): Rung => {
    if (!Number.isInteger(failedAttempt) || failedAttempt < 1 || failedAttempt >= o.maxAttempts) {
      throw new RangeError(`no retry after attempt ${failedAttempt}`);
    }
    return rungs[Math.min(failedAttempt - 1, rungs.length - 1)];
  };
  return Object.freeze({
    ...o,
    rungs,
    rungLabels: Object.freeze(rungs.map((r) => r.label)),
    rungAfter,
    rungFor(delayMs: number, timeScale = 1): Rung {
      let best = rungs[0];
      for (const r of rungs) if (r.delayMs / timeScale <= delayMs) best = r;
      return best;
    },
    delayAfter(failedAttempt: number, timeScale = 1, random: () => number = Math.random): number {
      return (rungAfter(failedAttempt).delayMs * (1 + o.jitter * random())) / timeScale;
    },
    nominalSpanMs(): number {
      let t = 0;
      for (let n = 1; n < o.maxAttempts; n++) t += rungAfter(n).delayMs;
      return t;
    },
  });
}

const S = 1000;
const M = 60 * S;
const H = 60 * M;

/** Sluice's retry ladder. */
export const retryLadder: RetryPolicy = retryPolicy({
  rungs: [
    { label: '30s', delayMs: 30 * S },
    { label: '1m', delayMs: 1 * M },
    { label: '2m', delayMs: 2 * M },
    { label: '4m', delayMs: 4 * M },
    { label: '8m', delayMs: 8 * M },
    { label: '15m', delayMs: 15 * M },
    { label: '30m', delayMs: 30 * M },
    { label: '1h', delayMs: 1 * H },
    { label: '2h', delayMs: 2 * H },
    { label: '4h', delayMs: 4 * H },
    { label: '9h', delayMs: 9 * H },
  ],
  maxAttempts: 17,
  jitter: 0.1,
  spanMs: 72 * H,
  dlqRetentionMs: 7 * 24 * H,
});
