/**
 * What the delivery-policy guards share: a burst of events published in one batch to an endpoint
 * of their own (its own event type, so no other guard's target receives them), and a bounded wait
 * for their deliveries.
 */
import { api } from './webhook-target.ts';
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

/** Waits until `done()` holds or `timeoutMs` passed (checked every 50 ms); whether it holds. */
export async function within(done: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return true;
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
