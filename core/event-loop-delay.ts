/**
 * The event-loop delay of the process metrics (nodejs_eventloop_lag_*), sampled only while the
 * process works.
 *
 * prom-client measures it with `monitorEventLoopDelay` at 10 ms: a native timer that wakes the
 * process a hundred times a second for as long as it runs. On an idle worker that was most of its
 * wake-ups and CPU (issue 33). Here a probe looks once a second at the event loop's utilisation:
 * above BUSY_SHARE the 10 ms sampling runs, below it stops. An idle worker is at 1-2 %, one of two
 * delivering 500 a second at 12-15 %, 2,000 a second at 30 %: at 10 % the sampler ran under any
 * load and was most of the timer wake-ups of a lightly loaded worker (~75 a second), where a delay
 * that matters needs a loop busy half the time. While it is stopped the probe's own lateness
 * stands in: a stall of a quiet process (a long GC, a blocking call) still shows in the maximum, to within the probe's
 * period, though not in the percentiles. A busy process is sampled as before, from its first busy
 * second on. A window with neither reads 0.
 */
import { monitorEventLoopDelay, performance, type IntervalHistogram } from 'node:perf_hooks';

/** The share of a second the loop must be busy for delays to be sampled. */
export const BUSY_SHARE = 0.5;
/** How often the probe looks. */
export const PROBE_MS = 1000;

/**
 * A histogram with prom-client's use of `monitorEventLoopDelay`'s (enable, reset, min, max, mean,
 * stddev, percentile), whose sampling follows the work. `busy` judges the loop's utilisation since
 * the last probe; tests pass their own, and a shorter `probeMs`.
 */
export function workDrivenDelay(
  resolution: number,
  busy: (last: ReturnType<typeof performance.eventLoopUtilization>) => boolean = (u) => u.utilization > BUSY_SHARE,
  probeMs = PROBE_MS,
  make: typeof monitorEventLoopDelay = monitorEventLoopDelay,
): Pick<IntervalHistogram, 'enable' | 'disable' | 'reset' | 'min' | 'max' | 'mean' | 'stddev' | 'percentile'> & {
  readonly sampling: boolean;
} {
  const real = make({ resolution });
  let sampling = false;
  let probe: NodeJS.Timeout | null = null;
  let mark = performance.eventLoopUtilization();
  /** When the probe last looked, and the most it was late since the last reset while not sampling (ns). */
  let lookedAt = performance.now();
  let lateMaxNs = 0;
  const look = () => {
    const at = performance.now();
    if (!sampling) lateMaxNs = Math.max(lateMaxNs, (at - lookedAt - probeMs) * 1e6);
    lookedAt = at;
    const now = performance.eventLoopUtilization();
    const wanted = busy(performance.eventLoopUtilization(now, mark));
    mark = now;
    if (wanted === sampling) return;
    sampling = wanted;
    // A reset first: the first sample after a pause would otherwise span the whole pause.
    if (wanted) {
      real.reset();
      real.enable();
    } else real.disable();
  };
  const some = () => real.count > 0;
  return {
    enable() {
      lookedAt = performance.now();
      probe ??= setInterval(look, probeMs).unref();
      return true;
    },
    disable() {
      if (probe) clearInterval(probe);
      probe = null;
      sampling = false;
      return real.disable();
    },
    reset: () => {
      real.reset();
      lateMaxNs = 0;
    },
    get min() {
      return some() ? real.min : 0;
    },
    get max() {
      return Math.max(some() ? real.max : 0, lateMaxNs);
    },
    get mean() {
      return some() ? real.mean : 0;
    },
    get stddev() {
      return some() ? real.stddev : 0;
    },
    percentile: (p: number) => (some() ? real.percentile(p) : 0),
    get sampling() {
      return sampling;
    },
  };
}
