/**
 * Webhook endpoint registration (spec 2.3, 3, 4.2, 6.1; architecture "Webhook endpoints"):
 * create (answers once the ping's outcome is known), list, get, delete, verify again (which also
 * re-enables a DISABLED endpoint), rotate the secret.
 * A tenant never sees another tenant's endpoints: those are 404, not 403.
 */
import type { Context } from '../../core/context.ts';
import { SluiceError, invalidRequest } from '../../core/errors.ts';
import { Fields, queryInt } from '../../core/validate.ts';
import { KNOWN_EVENT_KINDS, type EndpointRecord } from '../../core/webhooks/records.ts';
import { MAX_TARGET_URL_LENGTH } from '../../core/webhooks/target-guard.ts';
import type { AttemptOutcome } from '../../core/webhooks/attempt.ts';
import { MAX_SECRET_OVERLAP_MS, createEndpoint, deleteEndpoint, endpointView, rotateSecret, verifyEndpoint, type NewEndpoint } from '../../core/webhooks/endpoint-service.ts';
import { json, type AppRequest, type Reply, type Route } from '../types.ts';
import { pageOf, readCursor } from '../../core/paging.ts';

export const MAX_EVENT_FILTER_ITEMS = 64;
export const MAX_METADATA_BYTES = 4096;
export const MAX_METADATA_KEYS = 64;
const KNOWN = new Set<string>(KNOWN_EVENT_KINDS);

function parseCreate(body: unknown): Omit<NewEndpoint, 'tenant_id' | 'actor'> {
  const f = Fields.object(body);
  f.only(['url', 'events', 'metadata']);
  const url = f.string('url', { required: true, min: 1, max: MAX_TARGET_URL_LENGTH });
  if (url !== undefined && !URL.canParse(url)) f.fail('url', 'must be an absolute URL');
  const events = f.stringArray('events', { required: true, minItems: 1, maxItems: MAX_EVENT_FILTER_ITEMS, maxLength: 128 });
  if (events) {
    const seen = new Set<string>();
    events.forEach((kind, i) => {
      if (kind !== '*' && !KNOWN.has(kind)) f.fail(`events[${i}]`, `unknown event kind "${kind}"; known kinds: ${KNOWN_EVENT_KINDS.join(', ')}, or "*" for all`);
      else if (seen.has(kind)) f.fail(`events[${i}]`, `"${kind}" is listed twice`);
      seen.add(kind);
    });
  }
  // null is taken as "no metadata", so an endpoint read back can be sent again as it is.
  const metadata = f.get('metadata') === null ? null : (f.object('metadata', { maxBytes: MAX_METADATA_BYTES }) ?? null);
  if (metadata && Object.keys(metadata).length > MAX_METADATA_KEYS) f.fail('metadata', `must have at most ${MAX_METADATA_KEYS} members`);
  f.done();
  return { url: url!, events: events!, metadata };
}


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

function refuseBody(req: AppRequest): void {
  const b = req.body;
  const empty = b === undefined || (typeof b === 'object' && b !== null && !Array.isArray(b) && Object.keys(b).length === 0);
  if (!empty) throw invalidRequest([{ path: '$', message: 'this operation takes no request body' }]);
}

export function webhookEndpointRoutes(ctx: Context): Route[] {
  const view = (rec: EndpointRecord) => endpointView(rec, ctx.clock.now());
  const find = (req: AppRequest): EndpointRecord => {
    const rec = ctx.endpoints.forTenant(req.params.id, req.auth!.claims.tenant_id);
    if (!rec) throw new SluiceError('NOT_FOUND', `no webhook endpoint ${req.params.id}`);
    return rec;
  };

  const create = async (req: AppRequest): Promise<Reply> => {
    const input = parseCreate(req.body);
    const { claims } = req.auth!;
    try {
      const { record, secret, ping } = await createEndpoint(ctx, { ...input, tenant_id: claims.tenant_id, actor: claims.client_id });
      return json(201, { ...view(record), secret }, { location: `/v1/webhooks/endpoints/${record.id}`, 'cache-control': 'no-store', ...pingHeaders(ping) });
    } catch (err) {
      throw withUrlPath(err);
    }
  };

  const list = (req: AppRequest): Reply => {
    const limit = queryInt(req.query, 'limit', 100, 1, 1000);
    const page = pageOf(ctx.endpoints.listTenant(req.auth!.claims.tenant_id), (e) => ({ key: e.created_at, id: e.id }), readCursor(req.query), limit);
    return json(200, { data: page.data.map(view), next_cursor: page.next_cursor });
  };

  const remove = async (req: AppRequest): Promise<Reply> => {
    refuseBody(req);
    await deleteEndpoint(ctx, find(req), req.auth!.claims.client_id);
    return { status: 204 };
  };

  const verify = async (req: AppRequest): Promise<Reply> => {
    refuseBody(req);
    const { record, ping } = await verifyEndpoint(ctx, find(req), req.auth!.claims.client_id);
    return json(200, view(record), pingHeaders(ping));
  };

  const rotate = async (req: AppRequest): Promise<Reply> => {
    let overlapSeconds = ctx.config.webhookSecretOverlapSeconds;
    if (req.body !== undefined) {
      const f = Fields.object(req.body);
      f.only(['overlap_seconds']);
      const v = f.get('overlap_seconds');
      if (v !== undefined) {
        if (!Number.isInteger(v) || (v as number) < 0 || (v as number) > MAX_SECRET_OVERLAP_MS / 1000) f.fail('overlap_seconds', `must be an integer from 0 to ${MAX_SECRET_OVERLAP_MS / 1000}`);
        else overlapSeconds = v as number;
      }
      f.done();
    }
    const { record, secret } = await rotateSecret(ctx, find(req), req.auth!.claims.client_id, overlapSeconds * 1000);
    return json(200, { ...view(record), secret }, { 'cache-control': 'no-store' });
  };

  return [
    { method: 'POST', pattern: '/v1/webhooks/endpoints', scope: 'webhooks:write', body: 'json', handler: create },
    { method: 'GET', pattern: '/v1/webhooks/endpoints', scope: 'webhooks:read', body: 'none', handler: list },
    { method: 'GET', pattern: '/v1/webhooks/endpoints/:id', scope: 'webhooks:read', body: 'none', handler: (req) => json(200, view(find(req))) },
    { method: 'DELETE', pattern: '/v1/webhooks/endpoints/:id', scope: 'webhooks:write', body: 'json', handler: remove },
    { method: 'POST', pattern: '/v1/webhooks/endpoints/:id/verify', scope: 'webhooks:write', body: 'json', handler: verify },
    { method: 'POST', pattern: '/v1/webhooks/endpoints/:id/rotate-secret', scope: 'webhooks:write', body: 'json', handler: rotate },
  ];
}
