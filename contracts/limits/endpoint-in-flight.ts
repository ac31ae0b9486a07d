/**
 * An endpoint's `max_in_flight` (EndpointCreate): the most requests open to it at once, cluster-wide.
 * Registers a local target with `max_in_flight: 2` that holds each delivery 100 ms, publishes 30
 * events to it in one batch, and measures the most requests it had open at once (at most 2) and that
 * every event arrived. A request counts as open from its arrival to the target's answer, a part of
 * the time the dispatcher has it in flight, so the measure never overstates.
 */
import { publishBurst, within } from './burst.ts';
import { api, register, startTarget } from './webhook-target.ts';
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
    let endpointId: string | null = null;
    try {
      const ep = await register(ctx, target.url, [TYPE], { max_in_flight: MAX });
      if ('fail' in ep) return result(this, 'fail', '-', ep.fail);
      endpointId = ep.id;
      if (ep.state !== 'ACTIVE')
        return result(this, 'fail', '-', `the target answered its ping but the endpoint is ${ep.state}`);
      if (ep.body.max_in_flight !== MAX)
        return result(this, 'fail', '-', `the endpoint shows max_in_flight ${ep.body.max_in_flight}`);
      const started = performance.now();
      const burst = await publishBurst(ctx, TYPE, EVENTS, 'endpoint-max-in-flight');
      if ('fail' in burst) return result(this, 'fail', '-', burst.fail);
      const all = await within(() => burst.ids.every((id) => seen.has(id)), WAIT_MS);
      const arrived = burst.ids.filter((id) => seen.has(id)).length;
      const took = ((performance.now() - started) / 1000).toFixed(2);
      const measured =
        `at most ${peak} open at once; ${arrived}/${EVENTS} delivered` +
        (all ? ` in ${took} s` : '') +
        ` (${requests} requests, each held ${HOLD_MS} ms)`;
      const faults = [
        ...(peak > MAX ? [`${peak} requests open at once, over ${MAX}`] : []),
        ...(all
          ? []
          : [
              `${EVENTS - arrived} of ${EVENTS} events not delivered within ${WAIT_MS / 1000} s` +
                (arrived === 0 ? ' (none arrived: is a dispatcher running?)' : ''),
            ]),
      ];
      return result(this, faults.length ? 'fail' : 'pass', measured, faults.join('; ') || undefined);
    } finally {
      if (endpointId) await api(ctx, 'DELETE', `/v1/webhooks/endpoints/${endpointId}`).catch(() => {});
      await target.close();
    }
  },
};
