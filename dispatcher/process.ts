/**
 * What happens to one delivery record, as an Outcome value: dropped when its endpoint is gone,
 * held while it is PENDING, handed back when its endpoint is slow or saturated, else attempted
 * (signed afresh) and judged by the ladder.
 */
import type { Context } from '../core/context.ts';
import type { DeliveryRecord, EndpointRecord } from '../core/webhooks/records.ts';
import type { Deliverer } from './deliver.ts';
import { afterAttempt, defer, hold, type LadderClock, type Outcome } from './ladder.ts';
import type { DeliveryLimits } from './limits.ts';

export interface Stage {
  ctx: Context;
  limits: DeliveryLimits;
  deliverer: Deliverer;
}

function clockOf(ctx: Context): LadderClock {
  return { now: ctx.clock.now(), timeScale: ctx.config.timeScale };
}

/** The endpoint as the delivery must see it, or the outcome that replaces the attempt. */
function precheck(s: Stage, rec: DeliveryRecord, heldSince: number | null): EndpointRecord | Outcome {
  const ep = s.ctx.endpoints.get(rec.endpoint_id);
  if (!ep || ep.tenant_id !== rec.tenant_id) return { kind: 'dropped', rec, reason: 'endpoint-deleted' };
  if (ep.state !== 'ACTIVE') return hold(rec, heldSince, s.ctx.config.dispatchHoldRecheckMs, clockOf(s.ctx));
  return ep;
}

const isOutcome = (v: EndpointRecord | Outcome): v is Outcome => 'kind' in v;

export async function processDelivery(s: Stage, rec: DeliveryRecord | null, heldSince: number | null): Promise<Outcome> {
  if (rec === null) return { kind: 'dropped', rec: null, reason: 'malformed' };
  try {
    const first = precheck(s, rec, heldSince);
    if (isOutcome(first)) return first;
    const permit = await s.limits.acquire(rec.endpoint_id);
    if (!permit) return defer(rec, clockOf(s.ctx));
    let slow = false;
    try {
      // The endpoint may have been deleted or re-verified while this waited for a permit.
      const ep = precheck(s, rec, heldSince);
      if (isOutcome(ep)) return ep;
      const { result, startedAt } = await s.deliverer.attempt(rec, ep);
      slow = result.durationMs >= s.ctx.config.dispatchSlowMs;
      return afterAttempt(rec, result, startedAt, clockOf(s.ctx));
    } finally {
      permit.release(slow);
    }
  } catch (err) {
    s.ctx.log.error('delivery processing failed; re-queued', { delivery_id: rec.delivery_id, error: (err as Error).stack });
    return defer(rec, clockOf(s.ctx));
  }
}
