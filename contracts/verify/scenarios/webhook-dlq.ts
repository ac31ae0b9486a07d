/**
 * Scenarios of the `webhooks` tag, the dead-letter queue: list with filters, replay one, replay by
 * filter, and recovery of an endpoint's window (a job, its progress read back).
 */
import type { Json } from '../../contract.ts';
import { concretePath } from '../session.ts';
import {
  type Scenario,
  body,
  json,
  names,
  pagingChecks,
  postJson,
  probeGet,
  probeUnknownId,
  tokenFor,
  validBody,
} from './common.ts';

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

  async recoverEndpoint(s, op) {
    if (!s.state.endpointId) {
      s.record(op, 'the last hour → 202, a job with its Location', 'skip', 'no endpoint was created');
      return;
    }
    const path = concretePath(op, s);
    await s.probe(
      op,
      'the last hour → 202, a job with its Location',
      { method: 'POST', path, ...(await json(s, op, validBody(s, op.operationId))) },
      {
        status: [202],
        then: (ex) => {
          s.state.recoveryJobId = body(ex).id;
          const where = ex.headers.get('location') ?? '';
          return [
            ...(where.endsWith(`/recover/${body(ex).id}`) ? [] : [`Location ${where} does not name the job`]),
            ...(body(ex).sent <= body(ex).found ? [] : ['sent more than found']),
          ];
        },
      },
    );
    const now = Date.now();
    const window = { since: new Date(now - 3600_000).toISOString(), until: new Date(now - 7200_000).toISOString() };
    await s.probe(
      op,
      'until before since → 400 naming $.until',
      { method: 'POST', path, ...(await json(s, op, window)) },
      { status: [400], then: names('$.until') },
    );
    const old = { since: new Date(now - 8 * 24 * 3600_000).toISOString() };
    await s.probe(
      op,
      'since beyond the DLQ retention → 400 naming $.since',
      { method: 'POST', path, ...(await json(s, op, old)) },
      { status: [400], then: names('$.since') },
    );
  },

  async getRecovery(s, op) {
    const unknown = concretePath(op, s, { job_id: 'rcv_contract_probe_missing' });
    await s.probe(
      op,
      'unknown job → 404',
      { method: 'GET', path: unknown, headers: await tokenFor(s, op) },
      { status: [404] },
    );
    if (!s.state.recoveryJobId) {
      s.record(op, 'the started job → 200', 'skip', 'no recovery was started');
      return;
    }
    await s.probe(
      op,
      'the started job → 200 with its progress',
      { method: 'GET', path: concretePath(op, s), headers: await tokenFor(s, op) },
      {
        status: [200],
        then: (ex) => {
          const j = body(ex);
          return [
            ...(j.id === s.state.recoveryJobId ? [] : [`id ${j.id} is not the started job`]),
            ...(j.delivered + j.failed <= j.sent ? [] : ['more delivered and failed than sent']),
          ];
        },
      },
    );
  },
};
