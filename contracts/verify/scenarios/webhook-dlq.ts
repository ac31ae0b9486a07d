/** Scenarios of the `webhooks` tag, the dead-letter queue: list with filters, replay one, replay by filter. */
import type { Json } from '../../contract.ts';
import { type Scenario, body, pagingChecks, postJson, probeGet, probeUnknownId, validBody } from './common.ts';

export const DLQ_SCENARIOS: Record<string, Scenario> = {
  async listDlq(s, op) {
    await probeGet(s, op, op.path, 'GET → 200');
    const endpoint = s.state.endpointId ?? 'ep_contract_probe_missing';
    await probeGet(
      s,
      op,
      `${op.path}?endpoint_id=${encodeURIComponent(endpoint)}&event_type=pipeline.failed`,
      'filtered by endpoint_id and event_type → 200, only matching entries',
      (ex) =>
        body(ex)
          .data.filter((e: Json) => e.endpoint_id !== endpoint || e.event_type !== 'pipeline.failed')
          .map((e: Json) => `entry ${e.id} does not match the filter`),
    );
    await pagingChecks(s, op);
  },

  async replayDlqEntry(s, op) {
    await probeUnknownId(s, op, 'unknown id → 404');
  },

  async replayDlq(s, op) {
    await s.probe(op, 'by filter → replayed count', await postJson(s, op, validBody(s, op.operationId)), {
      status: [200, 202],
      then: (ex) =>
        body(ex).replayed === 0 ? [] : [`replayed ${body(ex).replayed} entries of an endpoint that never failed`],
    });
  },
};
