/**
 * `GET /v1/webhooks/event-types` (webhooks:read): the event types the caller's tenant published in
 * the last 7 days (through the API or straight to Kafka), busiest first, from the counts the
 * fan-out reports (core/webhooks/event-type-counts.ts).
 */
import { EVENT_TYPES_WINDOW_DAYS, type EventTypeCounts } from '../../core/webhooks/event-type-counts.ts';
import { json, type AppRequest, type Route } from '../types.ts';

export function webhookEventTypeRoutes(counts: EventTypeCounts): Route[] {
  const list = (req: AppRequest) => {
    const data = counts.list(req.auth!.claims.tenant_id).map((c) => ({
      type: c.type,
      count: c.count,
      last_published_at: new Date(c.last_at).toISOString(),
    }));
    return json(200, { window_days: EVENT_TYPES_WINDOW_DAYS, data });
  };
  return [{ method: 'GET', pattern: '/v1/webhooks/event-types', scope: 'webhooks:read', body: 'none', handler: list }];
}
