/**
 * Webhook endpoint registration (docs/webhooks.md, "Registering an endpoint"):
 * create (answers once the ping's outcome is known), list, get, update (a new URL is pinged),
 * delete, verify again (which also re-enables a DISABLED endpoint), rotate the secret, test send.
 * A tenant never sees another tenant's endpoints: those are 404, not 403.
 * Verify and the test send reach the target, so each is rate limited per endpoint at each node
 * (429 with Retry-After).
 */
import type { Context } from '../../core/context.ts';
import { SluiceError } from '../../core/errors.ts';
import type { EndpointRecord } from '../../core/webhooks/records.ts';
import type { AttemptOutcome } from '../../core/webhooks/attempt.ts';
import {
  createEndpoint,
  deleteEndpoint,
  endpointView,
  rotateSecret,
  sendTestEvent,
  updateEndpoint,
  verifyEndpoint,
  type EndpointPatch,
  type NewEndpoint,
  type TestSend,
} from '../../core/webhooks/endpoint-service.ts';
import { json, type AppRequest, type Reply, type Route } from '../types.ts';
import { pageOf, readCursor } from '../../core/paging.ts';
import { RateLimiter } from '../../core/rate-limit.ts';
import { rateLimited } from '../problem.ts';

/**
 * Verifications of one endpoint at one node: this many at once, then one more every
 * VERIFY_EVERY_SECONDS. Each sends a ping to the target: without a limit, verify would let a
 * caller aim any number of signed POSTs at a URL through Sluice.
 */
export const VERIFY_BURST = 3;
export const VERIFY_EVERY_SECONDS = 5;
/** Test sends of one endpoint at one node: the same budget as verify's, kept apart from it. */
export const TEST_SEND_BURST = 3;
export const TEST_SEND_EVERY_SECONDS = 5;

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
  if (ping.error) headers['sluice-ping-error'] = ping.error.replace(/[^\x20-\x7e]/g, '?').slice(0, 200);
  return headers;
}

/** 429 with Retry-After once an endpoint used its burst of `limiter` at this node ("was <done> lately"). */
function throttle(limiter: RateLimiter, rec: EndpointRecord, done: string, everySeconds: number): void {
  const wait = limiter.take(rec.id);
  if (wait !== null)
    throw rateLimited(wait, `endpoint ${rec.id} was ${done} lately (one more every ${everySeconds} s)`);
}

export function webhookEndpointRoutes(ctx: Context): Route[] {
  const view = (rec: EndpointRecord) => endpointView(rec, ctx.clock.now());
  const verifies = new RateLimiter(1 / VERIFY_EVERY_SECONDS, VERIFY_BURST);
  const testSends = new RateLimiter(1 / TEST_SEND_EVERY_SECONDS, TEST_SEND_BURST);
  const find = (req: AppRequest): EndpointRecord => {
    const rec = ctx.endpoints.forTenant(req.params.id, req.auth!.claims.tenant_id);
    if (!rec) throw new SluiceError('NOT_FOUND', `no webhook endpoint ${req.params.id}`);
    return rec;
  };

  const create = async (req: AppRequest): Promise<Reply> => {
    const { url, events, metadata, description, rate_limit_per_second, max_in_flight, ordering } = req.body as Create;
    const { claims } = req.auth!;
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
        tenant_id: claims.tenant_id,
        actor: claims.client_id,
      };
      const { record, secret, ping } = await createEndpoint(ctx, input);
      return json(
        201,
        { ...view(record), secret },
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
    const rec = find(req);
    try {
      const { record, ping } = await updateEndpoint(ctx, rec, req.body as EndpointPatch, req.auth!.claims.client_id);
      return json(200, view(record), ping ? pingHeaders(ping) : {});
    } catch (err) {
      throw withUrlPath(err);
    }
  };

  const testSend = async (req: AppRequest): Promise<Reply> => {
    const rec = find(req);
    throttle(testSends, rec, `sent ${TEST_SEND_BURST} tests`, TEST_SEND_EVERY_SECONDS);
    const input = (req.body ?? {}) as TestSend;
    return json(200, await sendTestEvent(ctx, rec, input, req.auth!.claims.client_id), { 'cache-control': 'no-store' });
  };

  const remove = async (req: AppRequest): Promise<Reply> => {
    await deleteEndpoint(ctx, find(req), req.auth!.claims.client_id);
    return { status: 204 };
  };

  const verify = async (req: AppRequest): Promise<Reply> => {
    const rec = find(req);
    throttle(verifies, rec, `verified ${VERIFY_BURST} times`, VERIFY_EVERY_SECONDS);
    const { record, ping } = await verifyEndpoint(ctx, rec, req.auth!.claims.client_id);
    return json(200, view(record), pingHeaders(ping));
  };

  const rotate = async (req: AppRequest): Promise<Reply> => {
    const asked = (req.body as { overlap_seconds?: number } | undefined)?.overlap_seconds;
    const overlapSeconds = asked ?? ctx.config.webhookSecretOverlapSeconds;
    const { record, secret } = await rotateSecret(ctx, find(req), req.auth!.claims.client_id, overlapSeconds * 1000);
    return json(200, { ...view(record), secret }, { 'cache-control': 'no-store' });
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
