/**
 * The DLQ of the caller's tenant: `GET /v1/webhooks/dlq` (webhooks:read; filters endpoint_id and
 * event_type, limit 1..1000, opaque cursor, oldest first), `POST /v1/webhooks/dlq/{id}/replay`
 * and `POST /v1/webhooks/dlq/replay` (webhooks:write; by `{endpoint_id?, event_type?}` or by
 * `{ids}`), answering 202 `{replayed}` once the deliveries and markers are in Kafka.
 */
import type { Context } from '../../core/context.ts';
import { SluiceError, invalidRequest } from '../../core/errors.ts';
import { Fields, queryInt } from '../../core/validate.ts';
import { readCursor } from '../../core/paging.ts';
import { replayDlq } from '../../core/webhooks/dlq-replay.ts';
import { EVENT_TYPE_PATTERN } from '../../core/webhooks/deliveries.ts';
import type { DlqEntry } from '../../core/webhooks/records.ts';
import { json, type AppRequest, type Route } from '../types.ts';

const MAX_IDS = 1000;

function queryString(req: AppRequest, name: string, valid: (v: string) => boolean, rule: string): string | undefined {
  const v = req.query.get(name);
  if (v === null) return undefined;
  if (!valid(v)) throw invalidRequest([{ path: `query.${name}`, message: rule }]);
  return v;
}

const endpointIdOk = (v: string) => v.length >= 1 && v.length <= 128;
const eventTypeOk = (v: string) => v.length <= 65 && EVENT_TYPE_PATTERN.test(v);
const EVENT_TYPE_RULE = 'must be an event kind: "<word>.<word>" in lowercase letters, digits and "_"';

export function webhookDlqRoutes(ctx: Context): Route[] {
  const list = (req: AppRequest) => {
    const limit = queryInt(req.query, 'limit', 100, 1, 1000);
    const page = ctx.dlq.list(
      req.auth!.claims.tenant_id,
      { endpoint_id: queryString(req, 'endpoint_id', endpointIdOk, 'must be 1 to 128 characters'), event_type: queryString(req, 'event_type', eventTypeOk, EVENT_TYPE_RULE), limit, after: readCursor(req.query) },
      ctx.clock.now(),
    );
    return json(200, page);
  };

  const replayOne = async (req: AppRequest) => {
    const tenant = req.auth!.claims.tenant_id;
    const entry = ctx.dlq.get(tenant, req.params.id, ctx.clock.now());
    if (!entry) throw new SluiceError('NOT_FOUND', `no DLQ entry ${req.params.id}`);
    const replayed = await replayDlq(ctx, tenant, [entry], 1, { actor: req.auth!.claims.client_id, subject: entry.id });
    return json(202, { replayed });
  };

  const replayBulk = async (req: AppRequest) => {
    const tenant = req.auth!.claims.tenant_id;
    // No body is a mistake, not "everything": `{}` is the explicit way to replay the whole DLQ.
    if (req.body === undefined) throw invalidRequest([{ path: '$', message: 'a JSON body is required: {"ids": [...]}, a filter {"endpoint_id", "event_type"}, or {} for every entry' }]);
    const f = Fields.object(req.body).only(['endpoint_id', 'event_type', 'ids']);
    const endpointId = f.string('endpoint_id', { min: 1, max: 128 });
    const eventType = f.string('event_type', { min: 1, max: 65, pattern: EVENT_TYPE_PATTERN });
    const ids = f.stringArray('ids', { minItems: 1, maxItems: MAX_IDS, minLength: 1, maxLength: 128 });
    if (ids !== undefined && (endpointId !== undefined || eventType !== undefined)) f.fail('ids', 'replay either by ids or by filter (endpoint_id, event_type), not both');
    f.done();
    const now = ctx.clock.now();
    let entries: Iterable<DlqEntry>;
    let total: number;
    let subject: string;
    if (ids) {
      const found = [...new Set(ids)].map((id) => ctx.dlq.get(tenant, id, now)).filter((e): e is DlqEntry => e !== undefined);
      [entries, total] = [found, found.length];
      subject = `dlq ids: ${found.map((e) => e.id).join(',')}`.slice(0, 1000);
    } else {
      // A filter may match millions: counted from the index, then read a chunk at a time.
      const filter = { endpoint_id: endpointId, event_type: eventType };
      [entries, total] = [ctx.dlq.stream(tenant, filter, now), ctx.dlq.count(tenant, filter, now)];
      subject = `dlq filter: ${JSON.stringify(filter)}`;
    }
    const replayed = await replayDlq(ctx, tenant, entries, total, { actor: req.auth!.claims.client_id, subject });
    return json(202, { replayed });
  };

  return [
    { method: 'GET', pattern: '/v1/webhooks/dlq', scope: 'webhooks:read', body: 'none', handler: list },
    { method: 'POST', pattern: '/v1/webhooks/dlq/replay', scope: 'webhooks:write', body: 'json', handler: replayBulk },
    { method: 'POST', pattern: '/v1/webhooks/dlq/:id/replay', scope: 'webhooks:write', body: 'none', handler: replayOne },
  ];
}
