/**
 * An endpoint's `rate_limit_per_second` (EndpointCreate): the most deliveries a second it receives
 * from the whole cluster. Registers a local target at 20 a second, publishes 100 events to it in
 * one batch, and measures the most deliveries that reached it in any sliding 1 s window (at most
 * 20 + 10 % for timing) and that every event arrived (over the limit they wait, never fail).
 */
import { publishBurst, maxInWindow, within } from './burst.ts';
import { api, register, startTarget } from './webhook-target.ts';
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
    let endpointId: string | null = null;
    try {
      const ep = await register(ctx, target.url, [TYPE], { rate_limit_per_second: RATE });
      if ('fail' in ep) return result(this, 'fail', '-', ep.fail);
      endpointId = ep.id;
      if (ep.state !== 'ACTIVE')
        return result(this, 'fail', '-', `the target answered its ping but the endpoint is ${ep.state}`);
      if (ep.body.rate_limit_per_second !== RATE)
        return result(this, 'fail', '-', `the endpoint shows rate_limit_per_second ${ep.body.rate_limit_per_second}`);
      const published = performance.now();
      const burst = await publishBurst(ctx, TYPE, EVENTS, 'endpoint-rate-limit');
      if ('fail' in burst) return result(this, 'fail', '-', burst.fail);
      const all = await within(() => burst.ids.every((id) => seen.has(id)), WAIT_MS);
      const arrived = burst.ids.filter((id) => seen.has(id)).length;
      const peak = maxInWindow(arrivals, 1000);
      const span = arrivals.length > 1 ? (arrivals[arrivals.length - 1] - arrivals[0]) / 1000 : 0;
      const rate = span > 0 ? ((arrivals.length - 1) / span).toFixed(1) : '-';
      const measured =
        `at most ${peak} in a 1 s window; ${arrived}/${EVENTS} arrived ` +
        `(${arrivals.length} requests over ${span.toFixed(2)} s, ${rate}/s; ` +
        `first ${arrivals.length ? ((arrivals[0] - published) / 1000).toFixed(2) : '-'} s after the publish)`;
      const faults = [
        ...(peak > ALLOWED ? [`${peak} deliveries in one 1 s window, over ${ALLOWED}`] : []),
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
