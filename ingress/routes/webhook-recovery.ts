/**
 * Recovery of a time window (core/webhooks/recovery.ts), only ever the caller's tenant:
 *
 * - `POST /v1/webhooks/endpoints/{id}/recover` `{since, until?}` (webhooks:write): 202 with the job
 *   (`Location` its URL); 409 `CONFLICT` while a job of the endpoint runs over an overlapping window.
 * - `GET /v1/webhooks/endpoints/{id}/recover/{job}` (webhooks:read): its state and progress
 *   (found, sent, delivered, failed), from any node.
 *
 * An endpoint or a job of another tenant is 404, the same answer as an unknown one.
 */
import { SluiceError } from '../../core/errors.ts';
import type { AttemptHistory } from '../../core/webhooks/attempt-history.ts';
import { retryLadder } from '../../core/webhooks/retry-policy.ts';
import type { RecoveryJob } from '../../core/webhooks/recovery-jobs.ts';
import { type RecoveryDeps, startRecovery, validateWindow } from '../../core/webhooks/recovery.ts';
import { json, type AppRequest, type Route } from '../types.ts';

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export function recoveryView(job: RecoveryJob, history: AttemptHistory) {
  const { delivered, failed } = history.recovery(job.tenant_id, job.id);
  return {
    id: job.id,
    endpoint_id: job.endpoint_id,
    since: iso(job.since),
    until: iso(job.until),
    state: job.state,
    found: job.found,
    sent: job.sent,
    delivered: Math.min(delivered, job.sent),
    failed: Math.min(failed, job.sent),
    rate_per_second: Math.round(job.rate_per_second * 1000) / 1000,
    created_at: iso(job.created_at),
    updated_at: iso(job.updated_at),
    finished_at: iso(job.finished_at),
    error: job.error,
  };
}

export function webhookRecoveryRoutes(ctx: RecoveryDeps, history: AttemptHistory): Route[] {
  const start = async (req: AppRequest) => {
    const tenant = req.auth!.claims.tenant_id;
    if (!ctx.endpoints.forTenant(req.params.id, tenant))
      throw new SluiceError('NOT_FOUND', `no webhook endpoint ${req.params.id}`);
    const body = req.body as { since: string; until?: string | null };
    const now = ctx.clock.now();
    const since = Date.parse(body.since);
    const until = body.until == null ? now : Date.parse(body.until);
    validateWindow(now, since, until, retryLadder.dlqRetentionMs / ctx.config.timeScale);
    const job = await startRecovery(ctx, {
      tenantId: tenant,
      endpointId: req.params.id,
      since,
      until,
      actor: req.auth!.claims.client_id,
      history,
    });
    return json(202, recoveryView(job, history), {
      location: `/v1/webhooks/endpoints/${job.endpoint_id}/recover/${job.id}`,
    });
  };

  const get = (req: AppRequest) => {
    const tenant = req.auth!.claims.tenant_id;
    const job = ctx.recoveries.get(tenant, req.params.job, ctx.clock.now());
    if (!job || job.endpoint_id !== req.params.id || !ctx.endpoints.forTenant(req.params.id, tenant))
      throw new SluiceError('NOT_FOUND', `no recovery ${req.params.job} of endpoint ${req.params.id}`);
    return json(200, recoveryView(job, history), { 'cache-control': 'no-store' });
  };

  return [
    {
      method: 'POST',
      pattern: '/v1/webhooks/endpoints/:id/recover',
      scope: 'webhooks:write',
      body: 'json',
      handler: start,
    },
    {
      method: 'GET',
      pattern: '/v1/webhooks/endpoints/:id/recover/:job',
      scope: 'webhooks:read',
      body: 'none',
      handler: get,
    },
  ];
}
