/**
 * `GET /v1/webhooks/event-types` (webhooks:read): the event types the caller's tenant published in
 * the last 7 days (through the API or straight to Kafka), by name, a page at a time (`limit`, 1 to
 * 1,000, 100 by default; `cursor`: the `next_cursor` of the page before), from the counts the
 * fan-out reports (core/webhooks/event-type-counts.ts), once this process's view has read them all
 * (core/kafka/catch-up.ts).
 */
import { readCursor } from '../../core/paging.ts';
import {
  EVENT_TYPES_WINDOW_DAYS,
  typeAfter,
  typeCursor,
  type EventTypeCounts,
} from '../../core/webhooks/event-type-counts.ts';
import { json, type AppRequest, type Route } from '../types.ts';

export function webhookEventTypeRoutes(counts: EventTypeCounts, caughtUp: () => Promise<void>): Route[] {
  const list = async (req: AppRequest) => {
    const limit = req.queryValues.limit as number;
    const after = typeAfter(readCursor(req.query));
    // Every worker and node answers alike: the view first reads what is on the topic now, so a type
    // any of them listed is listed by every read after (503 when the topic's end is out of reach).
    await caughtUp();
    const page = counts.page(req.auth!.claims.tenant_id, after, limit);
    const data = page.data.map((c) => ({
      type: c.type,
      count: c.count,
      last_published_at: new Date(c.last_at).toISOString(),
    }));
    const next_cursor = page.next === null ? null : typeCursor(page.next);
    return json(200, { window_days: EVENT_TYPES_WINDOW_DAYS, data, next_cursor });
  };
  return [{ method: 'GET', pattern: '/v1/webhooks/event-types', scope: 'webhooks:read', body: 'none', handler: list }];
}
