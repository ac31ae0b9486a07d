/**
 * Webhook endpoint registration (docs/webhooks.md, "Registering an endpoint"):
 * create (answers once the ping's outcome is known), list, get, update (a new URL is pinged),
 * delete, verify again (which also re-enables a DISABLED endpoint), rotate the secret, test send.
 * A tenant never sees another tenant's endpoints: those are 404, not 403.
 * Registration, verify, a new URL and the test send reach the target at once, so each draws from
 * one budget per endpoint and per tenant (target-budget.ts; 429 with Retry-After beyond it), and a
 * failure is told as a class (`failureClass`), never in the network library's words.
 */
import { SluiceError } from '../../core/errors.ts';
import type { EndpointRecord } from '../../core/webhooks/records.ts';
import type { AttemptOutcome } from '../../outbound/attempt.ts';
import {
  createEndpoint,
  type DeleteDeps,
  deleteEndpoint,
  type EndpointDeps,
  endpointView,
  rotateSecret,
  sendTestEvent,
  updateEndpoint,
  verifyEndpoint,
  type EndpointPatch,
  type NewEndpoint,
  type TestSend,
  type TestSendDeps,
} from '../../core/webhooks/endpoint-service.ts';
import { json, type AppRequest, type Reply, type Route } from '../types.ts';
import { pageOf, readCursor } from '../../core/paging.ts';
import { failureClass } from '../../outbound/ping.ts';
import { normalTargetUrl } from '../../outbound/target-guard.ts';
import { TargetBudget } from './target-budget.ts';
import { checkFilter } from '../../core/webhooks/filters/endpoint-filter.ts';

/** A registration the contract's EndpointCreate admitted. */
type Create = Omit<NewEndpoint, 'tenant_id' | 'actor' | 'metadata'> & { metadata?: Record<string, unknown> | null };

/** The target refusal names the request field it came from. */
function withUrlPath(err: unknown): unknown {
  if (err instanceof SluiceError && err.code === 'UNPROCESSABLE_TARGET') {
    const errors = [{ path: '$.url', message: err.message }];
    return new SluiceError(err.code, err.message, { ...err.extra, errors }, err.facts);
  }
  return err;
}

/** Header-safe summary of the ping (the body follows the Endpoint schema, which has no room for it). */
function pingHeaders(ping: AttemptOutcome): Record<string, string> {
  const headers: Record<string, string> = { 'sluice-ping-result': ping.ok ? 'ok' : 'failed' };
  if (ping.status !== null) headers['sluice-ping-status'] = String(ping.status);
  const failure = failureClass(ping);
  if (failure !== null) headers['sluice-ping-error'] = failure;
  return headers;
}

/** What the endpoint routes read of the process's context: the endpoint writes'. */
export type EndpointRouteDeps = EndpointDeps & TestSendDeps & DeleteDeps;

export function webhookEndpointRoutes(ctx: EndpointRouteDeps): Route[] {
  const view = (rec: EndpointRecord) => endpointView(rec, ctx.clock.now());
  const budget = new TargetBudget(ctx.config.tenantTargetRequestsPerMinute, () => ctx.clock.now());
  const find = (req: AppRequest): EndpointRecord => {
    const rec = ctx.endpoints.forTenant(req.params.id, req.auth!.claims.tenant_id);
    if (!rec) throw new SluiceError('NOT_FOUND', `no webhook endpoint ${req.params.id}`);
    return rec;
  };

  const create = async (req: AppRequest): Promise<Reply> => {
    const { url, events, metadata, description, rate_limit_per_second, max_in_flight, ordering, signing, filter } =
      req.body as Create;
    const { claims } = req.auth!;
    checkFilter(filter); // a bad filter is a 400 that costs no ping budget
    budget.take(claims.tenant_id, null, 'a registration pings its URL');
    try {
      // null metadata is "none", so an endpoint read back can be sent again as it is.
      const input = {
        url,
        events,
        metadata: metadata ?? null,
        description: description ?? null,
        rate_limit_per_second,
        max_in_flight,
        ordering,
        signing,
        filter: filter ?? null,
        tenant_id: claims.tenant_id,
        actor: claims.client_id,
      };
      const { record, secret, publicKey, ping } = await createEndpoint(ctx, input);
      return json(
        201,
        { ...view(record), secret, signing_public_key: publicKey },
        { location: `/v1/webhooks/endpoints/${record.id}`, 'cache-control': 'no-store', ...pingHeaders(ping) },
      );
    } catch (err) {
      throw withUrlPath(err);
    }
  };

  const list = (req: AppRequest): Reply => {
    const limit = req.queryValues.limit as number;
    const position = (e: EndpointRecord) => ({ key: e.created_at, id: e.id });
    const after = readCursor(req.query);
    const page = pageOf(ctx.endpoints.listTenant(req.auth!.claims.tenant_id, after), position, after, limit);
    return json(200, { data: page.data.map(view), next_cursor: page.next_cursor });
  };

  const update = async (req: AppRequest): Promise<Reply> => {
    const { url, filter } = req.body as EndpointPatch;
    checkFilter(filter); // a fault of the body is found before the endpoint is looked up, as the contract's
    const rec = find(req);
    if (url !== undefined && normalTargetUrl(url) !== rec.url)
      budget.take(rec.tenant_id, rec.id, 'a new URL is pinged');
    try {
      const { record, ping } = await updateEndpoint(ctx, rec, req.body as EndpointPatch, req.auth!.claims.client_id);
      return json(200, view(record), ping ? pingHeaders(ping) : {});
    } catch (err) {
      throw withUrlPath(err);
    }
  };

  const testSend = async (req: AppRequest): Promise<Reply> => {
    const rec = find(req);
    budget.take(rec.tenant_id, rec.id, 'a test send');
    const input = (req.body ?? {}) as TestSend;
    const sent = await sendTestEvent(ctx, rec, input, req.auth!.claims.client_id);
    return json(200, { ...sent, error: failureClass(sent) }, { 'cache-control': 'no-store' });
  };

  const remove = async (req: AppRequest): Promise<Reply> => {
    await deleteEndpoint(ctx, find(req), req.auth!.claims.client_id);
    return { status: 204 };
  };

  const verify = async (req: AppRequest): Promise<Reply> => {
    const rec = find(req);
    budget.take(rec.tenant_id, rec.id, 'verify pings its URL');
    const { record, ping } = await verifyEndpoint(ctx, rec, req.auth!.claims.client_id);
    return json(200, view(record), pingHeaders(ping));
  };

  const rotate = async (req: AppRequest): Promise<Reply> => {
    const asked = (req.body as { overlap_seconds?: number } | undefined)?.overlap_seconds;
    const overlapSeconds = asked ?? ctx.config.webhookSecretOverlapSeconds;
    const actor = req.auth!.claims.client_id;
    const { record, secret, publicKey } = await rotateSecret(ctx, find(req), actor, overlapSeconds * 1000);
    return json(200, { ...view(record), secret, signing_public_key: publicKey }, { 'cache-control': 'no-store' });
  };

  return [
    { method: 'POST', pattern: '/v1/webhooks/endpoints', scope: 'webhooks:write', body: 'json', handler: create },
    { method: 'GET', pattern: '/v1/webhooks/endpoints', scope: 'webhooks:read', body: 'none', handler: list },
    {
      method: 'GET',
      pattern: '/v1/webhooks/endpoints/:id',
      scope: 'webhooks:read',
      body: 'none',
      handler: (req) => json(200, view(find(req))),
    },
    { method: 'PATCH', pattern: '/v1/webhooks/endpoints/:id', scope: 'webhooks:write', body: 'json', handler: update },
    { method: 'DELETE', pattern: '/v1/webhooks/endpoints/:id', scope: 'webhooks:write', body: 'json', handler: remove },
    {
      method: 'POST',
      pattern: '/v1/webhooks/endpoints/:id/verify',
      scope: 'webhooks:write',
      body: 'json',
      handler: verify,
    },
    {
      method: 'POST',
      pattern: '/v1/webhooks/endpoints/:id/rotate-secret',
      scope: 'webhooks:write',
      body: 'json',
      handler: rotate,
    },
    {
      method: 'POST',
      pattern: '/v1/webhooks/endpoints/:id/test',
      scope: 'webhooks:write',
      body: 'json',
      handler: testSend,
    },
  ];
}
