/**
 * The recovery bench: does a recovery of a large window (`POST /v1/webhooks/endpoints/{id}/recover`) leave the live
 * deliveries of the same endpoint their publish-to-receipt p99? Every piece is a process of its own.
 *   npm run bench:recovery -- [--quick] [--backlog 20000] [--rate 100] [--seconds 60]
 *       [--baseline-seconds 20] [--share 0.1] [--capacity 1000] [--workers 1] [--label current] [--results FILE]
 * --quick: 2,000 dead letters, 8 s + 15 s. Writes `<!-- recovery:<label> -->` of bench/RESULTS.md (with --quick only
 * to --results). Exits 1 when a live event was lost or the recovery did not send every delivery it found.
 */
import { createKafka } from '../core/kafka/client.ts';
import type { DlqEntry } from '../core/webhooks/records.ts';
import { BenchRun } from '../harness/bench.ts';
import { sleep } from '../harness/cli.ts';
import { table } from '../harness/report.ts';
import { dlqEventIds, registerEndpoint } from '../harness/sluice-api.ts';
import { fmt } from '../harness/stats.ts';
import { awaitDelivered, benchArgs, pct, portStats, startAll, writeReport } from './flow-common.ts';

const args = benchArgs(import.meta.url, {
  backlog: [20_000, 2000],
  rate: [100],
  seconds: [60, 15],
  'baseline-seconds': [20, 8],
  share: [0.1],
  capacity: [1000],
  workers: [1],
});
const { n } = args;
const TENANT = 'acme';
const HOUR = 3600_000;

const bench = new BenchRun('recovery');

/**
 * `count` dead letters of the endpoint after 17 failures, last attempted over the hour before `now`. Their events
 * carry no `sent_at`: the receiver counts no latency of theirs.
 */
function backlog(endpointId: string, count: number, now: number): DlqEntry[] {
  const iso = (ms: number) => new Date(ms).toISOString();
  return Array.from({ length: count }, (_, i) => {
    const last = now - HOUR + Math.floor((i * 50 * 60_000) / count);
    const id = `evt_backlog_${String(i).padStart(6, '0')}`;
    return {
      id: `dlq_backlog_${String(i).padStart(6, '0')}`,
      event_id: id,
      endpoint_id: endpointId,
      tenant_id: TENANT,
      event_type: 'inference.completed',
      attempts: 17,
      last_status: 503,
      last_error: null,
      first_attempt_at: iso(last - 72 * HOUR),
      last_attempt_at: iso(last),
      dead_lettered_at: iso(last),
      expires_at: iso(last + 7 * 24 * HOUR),
      payload: { id, tenant_id: TENANT, type: 'inference.completed', data: { backlog: i }, created_at: last },
    };
  });
}

async function main(): Promise<number> {
  const { from, notes, receiver, load, base, tenant } = await startAll(bench, 'bench:recovery', 0, {
    SLUICE_WORKERS: String(n.workers),
    SLUICE_RECOVERY_SHARE: String(n.share),
    SLUICE_RECOVERY_CAPACITY_PER_SECOND: String(n.capacity),
  });
  const { client, api } = await tenant(TENANT);
  const [livePort] = (await receiver({ op: 'listen', ports: [{ name: 'live' }] })).ports!;
  const endpointId = await registerEndpoint(api, `http://127.0.0.1:${livePort}/hook`);

  const now = Date.now();
  const producer = createKafka(bench.brokers, 'sluice-bench-recovery').producer();
  await producer.connect();
  const messages = backlog(endpointId, n.backlog, now).map((e) => ({ key: TENANT, value: JSON.stringify(e) }));
  for (let i = 0; i < messages.length; i += 500)
    await producer.send({ topic: `${bench.prefix}.dlq`, messages: messages.slice(i, i + 500) });
  await producer.disconnect();
  // The DLQ view has them all once a recovery's count would find them.
  for (const deadline = Date.now() + 120_000; ; await sleep(1000)) {
    const listed = (await dlqEventIds(api, endpointId, Number.POSITIVE_INFINITY)).length;
    if (listed >= n.backlog) break;
    if (Date.now() > deadline) throw new Error(`the DLQ listed ${listed} of ${n.backlog} entries after 120 s`);
  }

  /** `seconds` of live traffic in a new receiver window: the events accepted. */
  const live = async (seconds: number) => {
    await receiver({ op: 'reset' });
    const probe = { client, rate: n.rate, keys: 1, seconds };
    return (await load({ op: 'probe', spec: { base, probe, flood: null } })).probe!.probeAccepted;
  };
  const aloneEvents = await live(n['baseline-seconds']);
  await awaitDelivered(receiver, { live: aloneEvents }, 30_000);
  const alone = (await portStats(receiver)).live;

  const since = new Date(now - 2 * HOUR).toISOString();
  const started = await api('POST', `/v1/webhooks/endpoints/${endpointId}/recover`, { since });
  if (started.status !== 202) throw new Error(`recovery answered ${started.status}: ${JSON.stringify(started.body)}`);
  const { found, rate_per_second: pace } = started.body as { found: number; rate_per_second: number };
  // The live phase runs while the job runs: no longer than it (so nothing is measured after it ended).
  const during = Math.min(n.seconds, Math.max(2, Math.floor(found / pace) - 1));
  const expectedEnd = Date.now() + (found / pace) * 1000 + 30_000;
  let job = started.body;
  const sentBySecond: number[] = [];
  const sampler = setInterval(() => {
    void api('GET', `/v1/webhooks/endpoints/${endpointId}/recover/${job.id}`).then((r) => {
      if (r.status !== 200) return;
      sentBySecond.push(r.body.sent - job.sent);
      job = r.body;
    });
  }, 1000);
  const duringEvents = await live(during);
  await sleep(3000); // the last live events' receipts (their latency counts, whatever comes beside them)
  const beside = (await portStats(receiver)).live;
  // Then the job to its end.
  while (job.state === 'running' && Date.now() < expectedEnd) await sleep(500);
  for (const deadline = Date.now() + 30_000; job.delivered < job.sent && Date.now() < deadline; ) await sleep(500);
  clearInterval(sampler);
  const jobSeconds = (Date.parse(job.finished_at ?? new Date().toISOString()) - Date.parse(job.created_at)) / 1000;
  const recovered =
    `${job.state}: found ${fmt(job.found)}, sent ${fmt(job.sent)}, delivered ${fmt(job.delivered)}, failed ` +
    `${fmt(job.failed)} in ${fmt(jobSeconds, 1)} s (${fmt(job.sent / Math.max(jobSeconds, 0.001), 1)}/s; busiest ` +
    `second ${Math.max(0, ...sentBySecond.slice(1))})`;
  const repeats = (await portStats(receiver)).live.duplicates;
  if (repeats > 0) notes.push(`${fmt(repeats)} repeated receipts in the window beside the recovery and after it.`);
  writeReport(args, 'recovery', 'recovery', notes, [
    from,
    `One tenant, one endpoint: ${fmt(n.backlog)} dead letters recovered at SLUICE_RECOVERY_SHARE ` +
      `${n.share} of SLUICE_RECOVERY_CAPACITY_PER_SECOND ${n.capacity} (${pace}/s), live traffic ${n.rate} ` +
      'events/s to the same endpoint, one per request on a fixed schedule. Latency: publish to receipt of the live ' +
      'events; recovery: its job at the end, the busiest second from its progress polled each second.',
    table(
      ['phase', 'live events', 'p50 / p99 / max ms', 'recovery'],
      [
        ['live alone', fmt(aloneEvents), pct(alone.latency), null],
        [`live beside the recovery (${during} s)`, fmt(duringEvents), pct(beside.latency), recovered],
      ],
    ),
  ]);
  // Exit 1: a live event lost, or the recovery did not send every delivery it found (or found fewer than written).
  return aloneEvents > alone.seen || job.sent < job.found || job.found < n.backlog ? 1 : 0;
}

bench.run(main);
