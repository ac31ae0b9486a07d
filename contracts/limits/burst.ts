/**
 * What the delivery-policy guards share: a burst of events published in one batch to an endpoint
 * of their own (its own event type, so no other guard's target receives them), and a bounded wait
 * for their deliveries.
 */
import { waitUntil } from '../../core/poll.ts';
import { api, register } from './webhook-target.ts';
import type { LimitContext } from './types.ts';

/**
 * Publishes `count` events of `type` in one batch (`POST /v1/webhooks/events/batch`): their ids,
 * or why the burst could not be published.
 */
export async function publishBurst(
  ctx: LimitContext,
  type: string,
  count: number,
  guard: string,
): Promise<{ ids: string[] } | { fail: string }> {
  const events = Array.from({ length: count }, (_, n) => ({ type, data: { guard, n } }));
  const r = await api(ctx, 'POST', '/v1/webhooks/events/batch', { events });
  if (r.status !== 202) return { fail: `publishing ${count} events answered ${r.status} ${r.body?.code ?? ''}` };
  const ids: string[] = (r.body.results ?? []).filter((x: { id?: string }) => x.id).map((x: { id: string }) => x.id);
  if (ids.length !== count) return { fail: `${ids.length} of the ${count} events published were accepted` };
  return { ids };
}

/** The most of `times` (ms, any order) that fall in one window of `windowMs` (sliding: [t, t + windowMs)). */
export function maxInWindow(times: number[], windowMs: number): number {
  const t = [...times].sort((a, b) => a - b);
  let best = 0;
  let start = 0;
  for (let end = 0; end < t.length; end++) {
    while (t[end] - t[start] >= windowMs) start++;
    best = Math.max(best, end - start + 1);
  }
  return best;
}

/**
 * The run both policy guards make: registers `target` with `policy` (one field of EndpointCreate),
 * checks the endpoint is ACTIVE and shows it, publishes `count` events of `type` in one burst and
 * waits up to `waitMs` for `seen` to hold them all; the endpoint is deleted afterwards. Returns
 * what arrived and the fault, if any, of events not delivered; or why the run could not be made.
 */
export async function policyBurst(
  ctx: LimitContext,
  target: { url: string; close(): Promise<void> },
  o: { type: string; policy: Record<string, number>; count: number; waitMs: number; guard: string },
  seen: Set<string>,
): Promise<{ started: number; arrived: number; all: boolean; undelivered: string[] } | { fail: string }> {
  let endpointId: string | null = null;
  try {
    const ep = await register(ctx, target.url, [o.type], o.policy);
    if ('fail' in ep) return ep;
    endpointId = ep.id;
    if (ep.state !== 'ACTIVE') return { fail: `the target answered its ping but the endpoint is ${ep.state}` };
    for (const [field, value] of Object.entries(o.policy))
      if (ep.body[field] !== value) return { fail: `the endpoint shows ${field} ${ep.body[field]}` };
    const started = performance.now();
    const burst = await publishBurst(ctx, o.type, o.count, o.guard);
    if ('fail' in burst) return burst;
    const all = await waitUntil(() => burst.ids.every((id) => seen.has(id)), o.waitMs, 50);
    const arrived = burst.ids.filter((id) => seen.has(id)).length;
    const undelivered = all
      ? []
      : [
          `${o.count - arrived} of ${o.count} events not delivered within ${o.waitMs / 1000} s` +
            (arrived === 0 ? ' (none arrived: is a dispatcher running?)' : ''),
        ];
    return { started, arrived, all, undelivered };
  } finally {
    if (endpointId) await api(ctx, 'DELETE', `/v1/webhooks/endpoints/${endpointId}`).catch(() => {});
    await target.close();
  }
}
