/**
 * The load generator of the noisy-neighbour bench, its own process (forked with IPC by
 * bench/noisy-neighbour.ts). Two tenants at once, each with its own keep-alive pool:
 *   probe: tenant B, one `POST /v1/webhooks/events` per 1/rate s on a fixed schedule (open model),
 *          each event carrying `data.sent_at` for the receiver's publish-to-receipt latency and
 *          `data.seq` with an ordering key (`k<seq % keys>`) for its order check;
 *   flood: tenant A, one `POST /v1/webhooks/events/batch` of `batch` events every `everyMs`, keyed
 *          over `keys` keys (what its ordered endpoints hold back per key).
 */
import { Pool } from 'undici';
import { serve } from '../harness/ipc.ts';
import { bump, tokenFor } from '../harness/load-http.ts';
import { percentile } from '../harness/stats.ts';
import type { NoisyLoadRequest, NoisyLoadResult, NoisyLoadSpec } from './ipc.ts';

async function run(spec: NoisyLoadSpec): Promise<NoisyLoadResult> {
  const out: NoisyLoadResult = {
    probeAccepted: 0,
    probeAnswerP50: null,
    probeAnswerP99: null,
    probeStatuses: {},
    floodAccepted: 0,
    floodStatuses: {},
    floodDeliveries: 0,
  };
  const probePool = new Pool(spec.base, { connections: 16, keepAliveTimeout: 60_000 });
  const floodPool = new Pool(spec.base, { connections: 4, keepAliveTimeout: 60_000 });
  const probeToken = await tokenFor(probePool, spec.probe.clientId, spec.probe.clientSecret);
  const floodToken = spec.flood ? await tokenFor(floodPool, spec.flood.clientId, spec.flood.clientSecret) : '';
  const started = Date.now();
  const endAt = started + spec.probe.seconds * 1000;
  const pending: Promise<void>[] = [];
  /** How long each accepted probe publish took to be answered (ms). */
  const answered: number[] = [];

  const probeOne = async (seq: number) => {
    const sentAt = Date.now();
    try {
      const res = await probePool.request({
        path: '/v1/webhooks/events',
        method: 'POST',
        headers: { authorization: `Bearer ${probeToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          type: 'inference.completed',
          data: { sent_at: sentAt, seq, key: `k${seq % spec.probe.keys}` },
          ordering_key: `k${seq % spec.probe.keys}`,
        }),
      });
      await res.body.dump();
      bump(out.probeStatuses, res.statusCode);
      if (res.statusCode === 202) {
        out.probeAccepted++;
        answered.push(Date.now() - sentAt);
      }
    } catch (err) {
      bump(out.probeStatuses, `error:${(err as { code?: string }).code ?? 'unknown'}`);
    }
  };
  let floodSeq = 0;
  const floodOne = async () => {
    const events = Array.from({ length: spec.flood!.batch }, (_, i) => ({
      type: 'inference.completed',
      data: { flood: i, pad: 'x'.repeat(200) },
      ordering_key: `f${floodSeq++ % spec.flood!.keys}`,
    }));
    try {
      const res = await floodPool.request({
        path: '/v1/webhooks/events/batch',
        method: 'POST',
        headers: { authorization: `Bearer ${floodToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ events }),
      });
      const body = (await res.body.json()) as { results?: { matched_endpoints?: number }[] };
      bump(out.floodStatuses, res.statusCode);
      for (const r of body.results ?? []) {
        if (typeof r.matched_endpoints !== 'number') continue;
        out.floodAccepted++;
        out.floodDeliveries += r.matched_endpoints;
      }
    } catch (err) {
      bump(out.floodStatuses, `error:${(err as { code?: string }).code ?? 'unknown'}`);
    }
  };

  // The flood goes first, so the probe is measured with it under way.
  let floodTimer: NodeJS.Timeout | null = null;
  if (spec.flood) {
    pending.push(floodOne());
    floodTimer = setInterval(() => {
      if (Date.now() < endAt) pending.push(floodOne());
    }, spec.flood.everyMs);
  }
  const interval = 1000 / spec.probe.rate;
  for (let seq = 0; ; seq++) {
    const due = started + seq * interval;
    if (due >= endAt) break;
    const wait = due - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    pending.push(probeOne(seq));
  }
  if (floodTimer) clearInterval(floodTimer);
  await Promise.all(pending);
  await Promise.all([probePool.close(), floodPool.close()]);
  const sorted = Array.from(Float64Array.from(answered).sort());
  out.probeAnswerP50 = percentile(sorted, 50);
  out.probeAnswerP99 = percentile(sorted, 99);
  return out;
}

serve<NoisyLoadRequest>(async (m) => ({ result: await run(m.spec) }));
