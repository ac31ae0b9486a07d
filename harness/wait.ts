/** Waits on work that runs in other processes, for tests, benches and the labs alike. */

/**
 * Waits until `count()` reaches `target`, or stops growing for `stallMs` (or `maxMs` passed);
 * returns the last count. For work a loaded machine makes slow: a run that still makes progress
 * is waited for, one that stopped is not (a fixed deadline fails the first under the suite's load).
 */
export async function untilStalled(
  count: () => number,
  target: number,
  { stallMs = 30_000, maxMs = 600_000, everyMs = 250 } = {},
): Promise<number> {
  const end = Date.now() + maxMs;
  let last = count();
  let grewAt = Date.now();
  while (last < target && Date.now() - grewAt < stallMs && Date.now() < end) {
    await new Promise((r) => setTimeout(r, everyMs));
    const now = count();
    if (now > last) grewAt = Date.now();
    last = now;
  }
  return last;
}

/** `connections` workers, each calling `step` until it returns false. */
export const closedLoop = (connections: number, step: () => Promise<boolean>) =>
  Promise.all(
    Array.from({ length: connections }, async () => {
      while (await step());
    }),
  );
