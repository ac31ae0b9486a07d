/** Scenarios of the `webhooks` tag, what became of deliveries: an endpoint's attempts and the stats. */
import type { Json } from '../../contract.ts';
import { concretePath } from '../session.ts';
import { type Scenario, body, probeGet, probeUnknownId, tokenFor } from './common.ts';

export const ATTEMPT_SCENARIOS: Record<string, Scenario> = {
  async listEndpointAttempts(s, op) {
    if (!s.state.endpointId) s.record(op, 'GET → 200', 'skip', 'no endpoint was created');
    else {
      await s.probe(
        op,
        'GET → 200, newest first, only this endpoint',
        { method: 'GET', path: concretePath(op, s), headers: await tokenFor(s, op) },
        {
          status: [200],
          then: (ex) => {
            const at = body(ex).data.map((a: Json) => Date.parse(a.at));
            return at.every((t: number, i: number) => i === 0 || t <= at[i - 1])
              ? []
              : ['attempts are not newest first'];
          },
        },
      );
      for (const [q, what] of [
        ['limit=0', 'limit=0 → 400'],
        ['limit=1001', 'limit=1001 → 400'],
        ['event_id=%20', 'malformed event_id → 400'],
      ]) {
        await s.probe(
          op,
          what,
          { method: 'GET', path: `${concretePath(op, s)}?${q}`, headers: await tokenFor(s, op) },
          { status: [400] },
        );
      }
    }
    await probeUnknownId(s, op, 'unknown endpoint → 404');
  },

  async getWebhookStats(s, op) {
    await probeGet(s, op, op.path, 'GET → 200, 60 points that add up to the totals', (ex) => {
      const b = body(ex);
      const sum = b.series.reduce((n: number, p: Json) => n + p.attempts, 0);
      return sum === b.totals.attempts ? [] : [`the series holds ${sum} attempts, the totals ${b.totals.attempts}`];
    });
    if (s.state.endpointId) {
      const only = s.state.endpointId;
      await probeGet(
        s,
        op,
        `${op.path}?endpoint_id=${encodeURIComponent(only)}`,
        'filtered by endpoint_id → 200, that endpoint only',
        (ex) => (body(ex).endpoints.every((e: Json) => e.endpoint_id === only) ? [] : ['other endpoints listed']),
      );
    }
    await s.probe(
      op,
      'unknown endpoint_id → 404',
      { method: 'GET', path: `${op.path}?endpoint_id=ep_contract_probe_missing`, headers: await tokenFor(s, op) },
      { status: [404] },
    );
  },
};
