/**
 * An endpoint's `max_in_flight` (EndpointCreate): the most requests open to it at once, cluster-wide.
 * Registers a local target with `max_in_flight: 2` that holds each delivery 100 ms, publishes 30
 * events to it in one batch, and measures the most requests it had open at once (at most 2) and that
 * every event arrived. A request counts as open from its arrival to the target's answer, a part of
 * the time the dispatcher has it in flight, so the measure never overstates.
 */
import { policyBurst } from './burst.ts';
import { startTarget } from './webhook-target.ts';
import { result, type LimitCheck } from './types.ts';

const MAX = 2;
const EVENTS = 30;
const HOLD_MS = 100;
/** 30 events, two at a time, 100 ms each take 1.5 s; a limit of one would take 3 s. */
const WAIT_MS = 30_000;
const TYPE = 'limits.in_flight';

export const endpointMaxInFlight: LimitCheck = {
  limit: 'endpoint max in flight',
  spec: `max_in_flight ${MAX}: at most ${MAX} requests open at once, all ${EVENTS} delivered`,
  async run(ctx) {
    let open = 0;
    let peak = 0;
    let requests = 0;
    const seen = new Set<string>();
    const target = await startTarget((req, res) => {
      requests++;
      peak = Math.max(peak, ++open);
      setTimeout(() => {
        open--;
        seen.add(String(req.headers['x-service-event-id']));
        res.writeHead(200).end();
      }, HOLD_MS);
    });
    const run = await policyBurst(
      ctx,
      target,
      { type: TYPE, policy: { max_in_flight: MAX }, count: EVENTS, waitMs: WAIT_MS, guard: 'endpoint-max-in-flight' },
      seen,
    );
    if ('fail' in run) return result(this, 'fail', '-', run.fail);
    const took = ((performance.now() - run.started) / 1000).toFixed(2);
    const measured =
      `at most ${peak} open at once; ${run.arrived}/${EVENTS} delivered` +
      (run.all ? ` in ${took} s` : '') +
      ` (${requests} requests, each held ${HOLD_MS} ms)`;
    const faults = [...(peak > MAX ? [`${peak} requests open at once, over ${MAX}`] : []), ...run.undelivered];
    return result(this, faults.length ? 'fail' : 'pass', measured, faults.join('; ') || undefined);
  },
};
