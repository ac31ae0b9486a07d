/**
 * `POST /v1/webhooks/events` (scope events:publish): `{type, data, id?}` for the caller's tenant,
 * answered 202 `{id, matched_endpoints}` once Kafka acknowledged the event; a repeated `id`
 * within 24 h answers the same 202 and publishes nothing.
 */
import type { Context } from '../../core/context.ts';
import { invalidRequest } from '../../core/errors.ts';
import { Fields } from '../../core/validate.ts';
import { EVENT_ID_PATTERN, isPublishableType, MAX_EVENT_DATA_BYTES } from '../../core/webhooks/deliveries.ts';
import { publishEvent } from '../../core/webhooks/publish.ts';
import { json, type AppRequest, type Route } from '../types.ts';

function parsePublish(body: unknown): { type: string; data: unknown; id?: string } {
  const f = Fields.object(body).only(['type', 'data', 'id']);
  const type = f.string('type', { required: true, max: 65 });
  if (type !== undefined && !isPublishableType(type)) {
    f.fail('type', type === 'ping' ? '"ping" is reserved for endpoint verification' : 'must be a known event kind or "<word>.<word>" in lowercase letters, digits and "_"');
  }
  const id = f.string('id', { min: 1, max: 128, pattern: EVENT_ID_PATTERN });
  const data = f.value.data;
  if (data === undefined) f.fail('data', 'is required (any JSON value)');
  else if (Buffer.byteLength(JSON.stringify(data)) > MAX_EVENT_DATA_BYTES) f.fail('data', `must be at most ${MAX_EVENT_DATA_BYTES} bytes as JSON`);
  f.done();
  if (type === undefined) throw invalidRequest([{ path: '$.type', message: 'is required' }]);
  return { type, data, id };
}

export function webhookEventRoutes(ctx: Context): Route[] {
  const publish = async (req: AppRequest) => {
    const input = parsePublish(req.body);
    const out = await publishEvent(ctx, { tenant_id: req.auth!.claims.tenant_id, ...input });
    return json(202, { id: out.id, matched_endpoints: out.matched_endpoints });
  };
  return [{ method: 'POST', pattern: '/v1/webhooks/events', scope: 'events:publish', body: 'json', handler: publish }];
}
