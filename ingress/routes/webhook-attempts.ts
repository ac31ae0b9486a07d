/**
 * What the tenant's deliveries did, from the attempt history (core/webhooks/attempt-history.ts),
 * both webhooks:read and only ever the caller's tenant:
 *
 * - `GET /v1/webhooks/endpoints/{id}/attempts` (limit 1..1000, `delivery_id`, `event_id`): the
 *   endpoint's recent attempts, newest first (at most the newest 100 are kept per endpoint).
 * - `GET /v1/webhooks/stats` (`endpoint_id`): attempts, deliveries and latency per minute over the
 *   last hour, the totals, and each endpoint's success rate and last error.
 */
import type { Context } from '../../core/context.ts';
import { SluiceError } from '../../core/errors.ts';
import type { AttemptHistory, AttemptRecord, EndpointRates, SeriesPoint } from '../../core/webhooks/attempt-history.ts';
import { MINUTE_MS, WINDOW_MINUTES } from '../../core/webhooks/attempt-history.ts';
import { json, type AppRequest, type Route } from '../types.ts';

const iso = (ms: number) => new Date(ms).toISOString();

function attemptView(a: AttemptRecord) {
  return {
    delivery_id: a.delivery_id,
    event_id: a.event_id,
    event_type: a.event_type,
    attempt: a.attempt,
    at: iso(a.at),
    duration_ms: a.duration_ms,
    status: a.status,
    error: a.error,
    ok: a.ok,
    outcome: a.outcome,
  };
}

function pointView(p: SeriesPoint) {
  return {
    minute: iso(p.minute),
    attempts: p.attempts,
    delivered: p.delivered,
    failed: p.failed,
    latency_avg_ms: p.attempts === 0 ? null : Math.round(p.latency_sum_ms / p.attempts),
    latency_max_ms: p.attempts === 0 ? null : p.latency_max_ms,
  };
}

function ratesView(e: EndpointRates) {
  return {
    endpoint_id: e.endpoint_id,
    attempts: e.attempts,
    delivered: e.delivered,
    failed: e.failed,
    success_rate: e.success_rate,
    last_attempt_at: e.last_attempt_at === null ? null : iso(e.last_attempt_at),
    last_error: e.last_error && { at: iso(e.last_error.at), status: e.last_error.status, error: e.last_error.error },
  };
}

/** What the attempt routes read of the process's context. */
export type AttemptRouteDeps = Pick<Context, 'clock' | 'endpoints'>;

export function webhookAttemptRoutes(ctx: AttemptRouteDeps, history: AttemptHistory): Route[] {
  const attempts = (req: AppRequest) => {
    const tenant = req.auth!.claims.tenant_id;
    if (!ctx.endpoints.forTenant(req.params.id, tenant))
      throw new SluiceError('NOT_FOUND', `no webhook endpoint ${req.params.id}`);
    type Query = { limit: number; delivery_id?: string; event_id?: string };
    const { limit, delivery_id, event_id } = req.queryValues as Query;
    return json(200, {
      data: history.attempts(tenant, req.params.id, { limit, delivery_id, event_id }).map(attemptView),
    });
  };

  const stats = (req: AppRequest) => {
    const tenant = req.auth!.claims.tenant_id;
    const endpoint = req.queryValues.endpoint_id as string | undefined;
    if (endpoint !== undefined && !ctx.endpoints.forTenant(endpoint, tenant))
      throw new SluiceError('NOT_FOUND', `no webhook endpoint ${endpoint}`);
    const s = history.stats(tenant, ctx.clock.now(), endpoint);
    // Endpoints deleted since their attempts are not listed.
    const endpoints = s.endpoints.filter((e) => ctx.endpoints.forTenant(e.endpoint_id, tenant)).map(ratesView);
    return json(200, {
      window_seconds: (WINDOW_MINUTES * MINUTE_MS) / 1000,
      from: iso(s.from),
      to: iso(s.to),
      totals: s.totals,
      series: s.series.map(pointView),
      endpoints,
    });
  };

  return [
    {
      method: 'GET',
      pattern: '/v1/webhooks/endpoints/:id/attempts',
      scope: 'webhooks:read',
      body: 'none',
      handler: attempts,
    },
    { method: 'GET', pattern: '/v1/webhooks/stats', scope: 'webhooks:read', body: 'none', handler: stats },
  ];
}
