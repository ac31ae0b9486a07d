/**
 * The event-loop delay of the process metrics (nodejs_eventloop_lag_*), sampled only while the
 * process works.
 *
 * prom-client measures it with `monitorEventLoopDelay` at 10 ms: a native timer that wakes the
 * process a hundred times a second for as long as it runs. On an idle worker that was most of its
 * wake-ups and CPU (issue 33). Here a probe looks once a second at the event loop's utilisation:
 * above BUSY_SHARE (an idle worker is at 1-2 %, one delivering 500 a second at 30-40 %) the 10 ms
 * sampling runs, below it stops. An idle process has no delay to measure; a busy one is sampled as
 * before, from its first busy second on. An empty window reads 0.
 */
import { monitorEventLoopDelay, performance, type IntervalHistogram } from 'node:perf_hooks';

/** The share of a second the loop must be busy for delays to be sampled. */
export const BUSY_SHARE = 0.1;
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
): Pick<IntervalHistogram, 'enable' | 'disable' | 'reset' | 'min' | 'max' | 'mean' | 'stddev' | 'percentile'> & {
  readonly sampling: boolean;
} {
  const real = monitorEventLoopDelay({ resolution });
  let sampling = false;
  let probe: NodeJS.Timeout | null = null;
  let mark = performance.eventLoopUtilization();
  const look = () => {
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
      probe ??= setInterval(look, probeMs).unref();
      return true;
    },
    disable() {
      if (probe) clearInterval(probe);
      probe = null;
      sampling = false;
      return real.disable();
    },
    reset: () => real.reset(),
    get min() {
      return some() ? real.min : 0;
    },
    get max() {
      return some() ? real.max : 0;
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
