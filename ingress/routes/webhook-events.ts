/**
 * `POST /v1/webhooks/events` (scope events:publish): `{type, data, id?}` for the caller's tenant,
 * answered 202 `{id, matched_endpoints}` once Kafka acknowledged the event; a repeated `id`
 * within 24 h answers the same 202 and publishes nothing.
 *
 * `POST /v1/webhooks/events/batch` (same scope): `{events: [...]}`, up to 1,000 items and 1 MiB,
 * written with one Kafka produce and answered per item. An invalid item is refused alone (its
 * error names its index); a batch whose every item is invalid is a 400 and writes nothing.
 *
 * The pipeline checks both bodies against the contract (EventPublish, EventBatch, their limits
 * included) before these handlers run; a batch's items are checked here, one at a time.
 */
import { invalidRequest, type SluiceError, type FieldError } from '../../core/errors.ts';
import { publishBatch, publishEvent, type PublishDeps } from '../../core/webhooks/publish.ts';
import { json, type AppRequest, type RequestChecks, type Route } from '../types.ts';
import { faultError } from '../problem.ts';

/** A publish body the contract's EventPublish admitted: `{type, data, id?}`, a null id as none. */
interface Publish {
  type: string;
  data: unknown;
  id?: string | null;
  ordering_key?: string | null;
}

const inputOf = (body: Publish) => ({
  type: body.type,
  data: body.data,
  id: body.id ?? undefined,
  ordering_key: body.ordering_key ?? undefined,
});

/** The same error with its paths moved under `$.events[index]` (other errors, e.g. 413, as they are). */
function atIndex(err: SluiceError, index: number): SluiceError {
  if (err.code !== 'INVALID_REQUEST') return err;
  const errors = ((err.extra.errors as FieldError[] | undefined) ?? [{ path: '$', message: err.message }]).map((e) => ({
    path: `$.events[${index}]${e.path.slice(1)}`,
    message: e.message,
  }));
  return invalidRequest(errors);
}

function problemOf(err: SluiceError): Record<string, unknown> {
  return {
    code: err.code,
    status: err.status,
    detail: err.message,
    ...(err.extra.errors ? { errors: err.extra.errors } : {}),
  };
}

export function webhookEventRoutes(ctx: PublishDeps, checks: RequestChecks): Route[] {
  // The batch's envelope is checked by its own operation; each item alone by the single publish's.
  const item = checks('POST', '/v1/webhooks/events');
  if (!item) throw new Error('the contract has no POST /v1/webhooks/events');
  const publish = async (req: AppRequest) => {
    const input = inputOf(req.body as Publish);
    const out = await publishEvent(ctx, { tenant_id: req.auth!.claims.tenant_id, ...input });
    return json(202, { id: out.id, matched_endpoints: out.matched_endpoints });
  };
  const publishMany = async (req: AppRequest) => {
    const items = (req.body as { events: unknown[] }).events;
    const valid: { index: number; input: ReturnType<typeof inputOf> }[] = [];
    const refused: { index: number; error: SluiceError }[] = [];
    items.forEach((body, index) => {
      const error = faultError(item.body(body));
      if (error) refused.push({ index, error: atIndex(error, index) });
      else valid.push({ index, input: inputOf(body as Publish) });
    });
    if (valid.length === 0) {
      if (refused.every((r) => r.error.code === 'PAYLOAD_TOO_LARGE')) throw refused[0].error;
      throw invalidRequest(
        refused.flatMap(
          (r) =>
            (r.error.extra.errors as FieldError[] | undefined) ?? [
              { path: `$.events[${r.index}]`, message: r.error.message },
            ],
        ),
      );
    }
    const out = await publishBatch(
      ctx,
      req.auth!.claims.tenant_id,
      valid.map((v) => v.input),
    );
    const results: Record<string, unknown>[] = new Array(items.length);
    for (const r of refused) results[r.index] = { index: r.index, error: problemOf(r.error) };
    valid.forEach((v, i) => {
      const o = out[i];
      results[v.index] = o.ok
        ? { index: v.index, id: o.published.id, matched_endpoints: o.published.matched_endpoints }
        : { index: v.index, error: problemOf(o.error) };
    });
    const accepted = results.filter((r) => r.error === undefined).length;
    return json(202, { accepted, rejected: items.length - accepted, results });
  };
  return [
    { method: 'POST', pattern: '/v1/webhooks/events', scope: 'events:publish', body: 'json', handler: publish },
    {
      method: 'POST',
      pattern: '/v1/webhooks/events/batch',
      scope: 'events:publish',
      body: 'json',
      handler: publishMany,
    },
  ];
}
