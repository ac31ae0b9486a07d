/**
 * The retry schedule of webhook deliveries: 17 attempts, exponential backoff from 30 s doubling to
 * a 9 h cap, each delay stretched by a random 0-10 % (jitter only ever lengthens, so the bounds
 * hold): attempt 17 lands between 62 h and 68.2 h after attempt 1, inside the promised [60 h, 72 h].
 * Each delay is served by one retry topic (a "rung") named after its nominal delay.
 */

export const MAX_ATTEMPTS = 17;
export const JITTER = 0.1;

export interface Rung {
  label: string;
  delayMs: number;
}

const S = 1000;
const M = 60 * S;
const H = 60 * M;

export const RUNGS: readonly Rung[] = [
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
];

export const RUNG_LABELS = RUNGS.map((r) => r.label);

/** The rung that holds a delivery after its `failedAttempt`-th failure (1-based, < MAX_ATTEMPTS). */
export function rungAfter(failedAttempt: number): Rung {
  if (!Number.isInteger(failedAttempt) || failedAttempt < 1 || failedAttempt >= MAX_ATTEMPTS) {
    throw new RangeError(`no retry after attempt ${failedAttempt}`);
  }
  return RUNGS[Math.min(failedAttempt - 1, RUNGS.length - 1)];
}

/** The rung for a wait of `delayMs` (already scaled): the longest whose scaled delay fits in it, else the first. */
export function rungForDelay(delayMs: number, timeScale = 1): Rung {
  let best = RUNGS[0];
  for (const r of RUNGS) if (r.delayMs / timeScale <= delayMs) best = r;
  return best;
}

/** The delay before the next attempt, jittered and divided by the time scale. */
export function retryDelayMs(failedAttempt: number, timeScale = 1, random: () => number = Math.random): number {
  return (rungAfter(failedAttempt).delayMs * (1 + JITTER * random())) / timeScale;
}

/** Nominal span from attempt 1 to attempt 17 without jitter (62 h). */
export function nominalSpanMs(): number {
  let t = 0;
  for (let n = 1; n < MAX_ATTEMPTS; n++) t += rungAfter(n).delayMs;
  return t;
}

export const RETRY_SPAN_MS = 72 * H;
export const DLQ_RETENTION_MS = 7 * 24 * H;
