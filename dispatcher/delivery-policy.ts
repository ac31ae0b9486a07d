/**
 * An endpoint's delivery policy, in one place: what a tenant may set on an endpoint (pause, rate,
 * requests in flight, ordering) and what follows from it. The retry ladder itself is
 * retry-policy.ts; how a policy is enforced is dispatcher/lanes.ts.
 *
 * An endpoint with a rate limit, an in-flight limit or `ordering: key` is a *lane* endpoint: the
 * fan-out writes its deliveries to `sluice.lanes` keyed by endpoint id, so one dispatcher at a time
 * (the owner of that partition) sends to it, and its limits and order hold cluster-wide without a
 * coordinator. Every other endpoint keeps today's spread over every dispatcher.
 */
import { retryLadder } from '../core/webhooks/retry-policy.ts';
import type { EndpointRecord } from '../core/webhooks/records.ts';

export const RATE_LIMIT_MAX = 10_000;
export const MAX_IN_FLIGHT_MAX = 1000;
export const ORDERING_KEY_MAX_BYTES = 128;
/** How long a paused endpoint's deliveries wait before they are dead-lettered (unscaled). */
export const PAUSE_MAX_MS = retryLadder.dlqRetentionMs;

export type PolicyFields = Pick<EndpointRecord, 'rate_limit_per_second' | 'max_in_flight' | 'ordering'>;

/** Whether the endpoint's deliveries go through its lane (one owner in the cluster at a time). */
export function needsLane(ep: PolicyFields): boolean {
  return (ep.rate_limit_per_second ?? null) !== null || (ep.max_in_flight ?? null) !== null || ep.ordering === 'key';
}

/** Whether deliveries of one ordering key wait for each other at this endpoint. */
export function isOrdered(ep: PolicyFields): boolean {
  return ep.ordering === 'key';
}

/** The least time between two requests to the endpoint (ms), 0 without a rate limit. */
export function spacingMs(ep: PolicyFields): number {
  const rate = ep.rate_limit_per_second ?? null;
  return rate === null ? 0 : 1000 / rate;
}

/** Whether the endpoint receives nothing now: paused by its tenant, or not verified yet. */
export function isWaiting(ep: Pick<EndpointRecord, 'state' | 'paused'>): boolean {
  return ep.paused === true || ep.state === 'PENDING';
}
