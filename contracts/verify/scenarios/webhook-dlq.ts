/** Scenarios of the `webhooks` tag, the dead-letter queue: list with filters, replay one, replay by filter. */
import type { Json } from '../../contract.ts';
import { concretePath } from '../session.ts';
import { type Scenario, body, json, pagingChecks, tokenFor, validBody } from './common.ts';

export const DLQ_SCENARIOS: Record<string, Scenario> = {
  async listDlq(s, op) {
    await s.probe(op, 'GET → 200', { method: 'GET', path: op.path, headers: await tokenFor(s, op) }, { status: [200] });
    const endpoint = s.state.endpointId ?? 'ep_contract_probe_missing';
    await s.probe(
      op,
      'filtered by endpoint_id and event_type → 200, only matching entries',
      {
        method: 'GET',
        path: `${op.path}?endpoint_id=${encodeURIComponent(endpoint)}&event_type=pipeline.failed`,
        headers: await tokenFor(s, op),
      },
      {
        status: [200],
        then: (ex) =>
          body(ex)
            .data.filter((e: Json) => e.endpoint_id !== endpoint || e.event_type !== 'pipeline.failed')
            .map((e: Json) => `entry ${e.id} does not match the filter`),
      },
    );
    await pagingChecks(s, op);
  },

  async replayDlqEntry(s, op) {
    await s.probe(
      op,
      'unknown id → 404',
      { method: 'POST', path: concretePath(op, s), headers: await tokenFor(s, op) },
      { status: [404] },
    );
  },

  async replayDlq(s, op) {
    await s.probe(
      op,
      'by filter → replayed count',
      { method: 'POST', path: op.path, ...(await json(s, op, validBody(s, op.operationId))) },
      {
        status: [200, 202],
        then: (ex) =>
          body(ex).replayed === 0 ? [] : [`replayed ${body(ex).replayed} entries of an endpoint that never failed`],
      },
    );
  },
};
