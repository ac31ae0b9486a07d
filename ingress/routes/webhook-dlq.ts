/**
 * The DLQ of the caller's tenant: `GET /v1/webhooks/dlq` (webhooks:read; filters endpoint_id and
 * event_type, limit 1..1000, opaque cursor, oldest first), `POST /v1/webhooks/dlq/{id}/replay`
 * and `POST /v1/webhooks/dlq/replay` (webhooks:write; by `{endpoint_id?, event_type?}` or by
 * `{ids}`), answering 202 `{replayed}` once the deliveries and markers are in Kafka.
 */
import { SluiceError } from '../../core/errors.ts';
import { readCursor } from '../../core/paging.ts';
import { replayDlq, type ReplayDeps } from '../../core/webhooks/dlq-replay.ts';
import type { DlqEntry } from '../../core/webhooks/records.ts';
import { json, jsonText, type AppRequest, type Route } from '../types.ts';

/** A bulk replay the contract's BulkReplayRequest admitted (a null filter is no filter). */
interface BulkReplay {
  ids?: string[];
  endpoint_id?: string | null;
  event_type?: string | null;
}

export function webhookDlqRoutes(ctx: ReplayDeps): Route[] {
  const list = (req: AppRequest) => {
    const q = req.queryValues as { limit: number; endpoint_id?: string; event_type?: string };
    const after = readCursor(req.query);
    const filter = { endpoint_id: q.endpoint_id, event_type: q.event_type, limit: q.limit, after };
    return jsonText(200, ctx.dlq.listJson(req.auth!.claims.tenant_id, filter, ctx.clock.now()));
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
    // No body is a mistake, not "everything" (the contract requires one): `{}` replays the whole DLQ.
    const body = req.body as BulkReplay;
    const [ids, endpointId, eventType] = [body.ids, body.endpoint_id ?? undefined, body.event_type ?? undefined];
    const now = ctx.clock.now();
    let entries: Iterable<DlqEntry>;
    let total: number;
    let subject: string;
    if (ids) {
      const found = [...new Set(ids)]
        .map((id) => ctx.dlq.get(tenant, id, now))
        .filter((e): e is DlqEntry => e !== undefined);
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
    {
      method: 'POST',
      pattern: '/v1/webhooks/dlq/:id/replay',
      scope: 'webhooks:write',
      body: 'none',
      handler: replayOne,
    },
  ];
}
