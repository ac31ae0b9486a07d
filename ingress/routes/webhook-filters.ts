/**
 * `POST /v1/webhooks/filters/test` (webhooks:write): `{filter, event: {type, data}}` → `{matched,
 * error}`, the filter compiled as an endpoint's would be (a fault is the same 400 naming the
 * position) and evaluated on the sample as the fan-out would, with the same budget. Changes
 * nothing; the console's "try it" box calls it before an endpoint is saved.
 */
import type { Clock } from '../../core/clock.ts';
import { type SampleEvent, tryFilter } from '../../core/webhooks/filters/endpoint-filter.ts';
import { json, type AppRequest, type Route } from '../types.ts';

export function webhookFilterRoutes(clock: Clock): Route[] {
  const test = (req: AppRequest) => {
    const { filter, event } = req.body as { filter: string; event: SampleEvent };
    return json(200, tryFilter(filter, event, req.auth!.claims.tenant_id, clock.now()));
  };
  return [
    { method: 'POST', pattern: '/v1/webhooks/filters/test', scope: 'webhooks:write', body: 'json', handler: test },
  ];
}
