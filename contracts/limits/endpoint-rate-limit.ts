/**
 * An endpoint's `rate_limit_per_second` (EndpointCreate): the most deliveries a second it receives
 * from the whole cluster. Registers a local target at 20 a second, publishes 100 events to it in
 * one batch, and measures the most deliveries that reached it in any sliding 1 s window (at most
 * 20 + 10 % for timing) and that every event arrived (over the limit they wait, never fail).
 */
import { maxInWindow, policyBurst } from './burst.ts';
import { startTarget } from './webhook-target.ts';
import { result, type LimitCheck } from './types.ts';

const RATE = 20;
const EVENTS = 100;
const ALLOWED = Math.floor(RATE * 1.1);
/** 100 events at 20 a second take 5 s; this is six times that. */
const WAIT_MS = 30_000;
const TYPE = 'limits.rate_limit';

export const endpointRateLimit: LimitCheck = {
  limit: 'endpoint rate limit',
  spec: `rate_limit_per_second ${RATE}: at most ${ALLOWED} in any 1 s (+10 %), all ${EVENTS} delivered`,
  async run(ctx) {
    const arrivals: number[] = [];
    const seen = new Set<string>();
    const target = await startTarget((req, res) => {
      arrivals.push(performance.now());
      seen.add(String(req.headers['x-service-event-id']));
      res.writeHead(200).end();
    });
    const run = await policyBurst(
      ctx,
      target,
      {
        type: TYPE,
        policy: { rate_limit_per_second: RATE },
        count: EVENTS,
        waitMs: WAIT_MS,
        guard: 'endpoint-rate-limit',
      },
      seen,
    );
    if ('fail' in run) return result(this, 'fail', '-', run.fail);
    const peak = maxInWindow(arrivals, 1000);
    const span = arrivals.length > 1 ? (arrivals[arrivals.length - 1] - arrivals[0]) / 1000 : 0;
    const rate = span > 0 ? ((arrivals.length - 1) / span).toFixed(1) : '-';
    const measured =
      `at most ${peak} in a 1 s window; ${run.arrived}/${EVENTS} arrived ` +
      `(${arrivals.length} requests over ${span.toFixed(2)} s, ${rate}/s; ` +
      `first ${arrivals.length ? ((arrivals[0] - run.started) / 1000).toFixed(2) : '-'} s after the publish)`;
    const faults = [
      ...(peak > ALLOWED ? [`${peak} deliveries in one 1 s window, over ${ALLOWED}`] : []),
      ...run.undelivered,
    ];
    return result(this, faults.length ? 'fail' : 'pass', measured, faults.join('; ') || undefined);
  },
};
