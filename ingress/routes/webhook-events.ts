/**
 * `POST /v1/webhooks/events` (scope events:publish): `{type, data, id?}` for the caller's tenant,
 * answered 202 `{id, matched_endpoints}` once Kafka acknowledged the event; a repeated `id`
 * within 24 h answers the same 202 and publishes nothing.
 *
 * `POST /v1/webhooks/events/batch` (same scope): `{events: [...]}`, up to 1,000 items and 1 MiB,
 * written with one Kafka produce and answered per item. An invalid item is refused alone (its
 * error names its index); a batch whose every item is invalid is a 400 and writes nothing.
 */
import type { Context } from '../../core/context.ts';
import { invalidRequest, SluiceError, type FieldError } from '../../core/errors.ts';
import { Fields } from '../../core/validate.ts';
import { EVENT_ID_PATTERN, isPublishableType, MAX_EVENT_DATA_BYTES } from '../../core/webhooks/deliveries.ts';
import { publishBatch, publishEvent } from '../../core/webhooks/publish.ts';
import { json, type AppRequest, type Route } from '../types.ts';
import { tooLarge } from '../pipeline.ts';

function parsePublish(body: unknown): { type: string; data: unknown; id?: string } {
  const f = Fields.object(body).only(['type', 'data', 'id']);
  const type = f.string('type', { required: true, max: 65 });
  if (type !== undefined && !isPublishableType(type)) {
    f.fail('type', type === 'ping' || type === 'endpoint.disabled' ? `"${type}" is sent by Sluice only` : 'must be a known event kind or "<word>.<word>" in lowercase letters, digits and "_"');
  }
  const id = f.string('id', { min: 1, max: 128, pattern: EVENT_ID_PATTERN });
  const data = f.get('data');
  if (data === undefined) f.fail('data', 'is required (any JSON value)');
  f.done();
  const bytes = Buffer.byteLength(JSON.stringify(data));
  if (bytes > MAX_EVENT_DATA_BYTES) {
    throw new SluiceError('PAYLOAD_TOO_LARGE', `$.data is ${bytes} bytes as JSON; an event's data may be at most ${MAX_EVENT_DATA_BYTES} bytes`, { max_bytes: MAX_EVENT_DATA_BYTES });
  }
  if (type === undefined) throw invalidRequest([{ path: '$.type', message: 'is required' }]);
  return { type, data, id };
}

export const MAX_BATCH_EVENTS = 1000;
export const MAX_BATCH_BYTES = 1024 * 1024;

function parseBatch(body: unknown): unknown[] {
  const f = Fields.object(body).only(['events']);
  const events = f.get('events');
  if (!Array.isArray(events)) f.fail('events', 'is required: an array of {type, data, id?}');
  else if (events.length === 0) f.fail('events', 'must hold at least one event');
  else if (events.length > MAX_BATCH_EVENTS) f.fail('events', `must hold at most ${MAX_BATCH_EVENTS} events`);
  f.done();
  return events as unknown[];
}

/** The same error with its paths moved under `$.events[index]` (other errors, e.g. 413, as they are). */
function atIndex(err: SluiceError, index: number): SluiceError {
  if (err.code !== 'INVALID_REQUEST') return err;
  const errors = ((err.extra.errors as FieldError[] | undefined) ?? [{ path: '$', message: err.message }]).map((e) => ({ path: `$.events[${index}]${e.path.slice(1)}`, message: e.message }));
  return invalidRequest(errors);
}

function problemOf(err: SluiceError): Record<string, unknown> {
  return { code: err.code, status: err.status, detail: err.message, ...(err.extra.errors ? { errors: err.extra.errors } : {}) };
}

export function webhookEventRoutes(ctx: Context): Route[] {
  const publish = async (req: AppRequest) => {
    const input = parsePublish(req.body);
    const out = await publishEvent(ctx, { tenant_id: req.auth!.claims.tenant_id, ...input });
    return json(202, { id: out.id, matched_endpoints: out.matched_endpoints });
  };
  const publishMany = async (req: AppRequest) => {
    if (req.rawBody.length > MAX_BATCH_BYTES) throw tooLarge(MAX_BATCH_BYTES);
    const items = parseBatch(req.body);
    const valid: { index: number; input: ReturnType<typeof parsePublish> }[] = [];
    const refused: { index: number; error: SluiceError }[] = [];
    items.forEach((item, index) => {
      try {
        valid.push({ index, input: parsePublish(item) });
      } catch (err) {
        if (!(err instanceof SluiceError)) throw err;
        refused.push({ index, error: atIndex(err, index) });
      }
    });
    if (valid.length === 0) {
      if (refused.every((r) => r.error.code === 'PAYLOAD_TOO_LARGE')) throw refused[0].error;
      throw invalidRequest(refused.flatMap((r) => (r.error.extra.errors as FieldError[] | undefined) ?? [{ path: `$.events[${r.index}]`, message: r.error.message }]));
    }
    const out = await publishBatch(ctx, req.auth!.claims.tenant_id, valid.map((v) => v.input));
    const results: Record<string, unknown>[] = new Array(items.length);
    for (const r of refused) results[r.index] = { index: r.index, error: problemOf(r.error) };
    valid.forEach((v, i) => {
      const o = out[i];
      results[v.index] = o.ok ? { index: v.index, id: o.published.id, matched_endpoints: o.published.matched_endpoints } : { index: v.index, error: problemOf(o.error) };
    });
    const accepted = results.filter((r) => r.error === undefined).length;
    return json(202, { accepted, rejected: items.length - accepted, results });
  };
  return [
    { method: 'POST', pattern: '/v1/webhooks/events', scope: 'events:publish', body: 'json', handler: publish },
    { method: 'POST', pattern: '/v1/webhooks/events/batch', scope: 'events:publish', body: 'json', handler: publishMany },
  ];
}
