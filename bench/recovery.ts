/**
 * The recovery bench: does a recovery of a large window (`POST /v1/webhooks/endpoints/{id}/recover`)
 * leave the live deliveries of the same endpoint their publish-to-receipt p99? Every piece is its own
 * OS process: Kafka (`sluice kafka`, unless KAFKA_BROKERS is set), `sluice start` (`--workers`, 1),
 * the receiver (harness/receiver.ts: publish-to-receipt latency from `data.sent_at`) and the
 * load generator (harness/load.ts: one event per request on a fixed schedule).
 * This process only orchestrates and reads the numbers.
 *
 * One tenant, one endpoint. `--backlog` (20,000) dead-lettered deliveries of the endpoint are written
 * onto its DLQ topic with a plain Kafka producer (as the dispatcher would have written them after 17
 * failures; their events carry no `sent_at`, so they do not count in the latency). Then: live traffic
 * alone at `--rate` events/s (100) for `--baseline-seconds` (20); then the same while a recovery of
 * the window re-sends the backlog, for `--seconds` (60) or until the job completes if sooner. The
 * recovery runs at SLUICE_RECOVERY_SHARE (`--share`, 0.1) of SLUICE_RECOVERY_CAPACITY_PER_SECOND
 * (`--capacity`, 1000): 100 deliveries a second by default. Reported: live p50, p99 and max in both
 * phases, and the recovery's found, sent and delivered, its measured rate, and how long it ran.
 *
 *   npm run bench:recovery -- [--quick] [--backlog 20000] [--rate 100] [--seconds 60]
 *       [--baseline-seconds 20] [--share 0.1] [--capacity 1000] [--workers 1] [--label current] [--results FILE]
 *
 * Writes its section of bench/RESULTS.md (`<!-- recovery:<label>:begin/end -->`), except with
 * --quick unless --results is given. Exits 1 when a live event was lost or the recovery did not send
 * every delivery it found within 30 s of its expected end.
 */
import { parseArgs } from 'node:util';
import { createKafka } from '../core/kafka/client.ts';
import type { DlqEntry } from '../core/webhooks/records.ts';
import { freePort } from '../core/net/free-port.ts';
import { BenchRun } from '../harness/bench.ts';
import { checkLabel, printHelp, ROOT, resultsFile, say, sleep, writeResults } from '../harness/cli.ts';
import { settleGroups } from '../harness/kafka.ts';
import { sluiceEnv } from '../harness/sluice.ts';
import { adminClient, bearerToken, dlqEventIds, registerEndpoint, sluiceApi } from '../harness/sluice-api.ts';
import { machineLine, measuredCommit } from '../harness/results-section.ts';
import { fmt } from '../harness/stats.ts';

const { values: opt } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    backlog: { type: 'string' },
    rate: { type: 'string', default: '100' },
    seconds: { type: 'string' },
    'baseline-seconds': { type: 'string' },
    share: { type: 'string', default: '0.1' },
    capacity: { type: 'string', default: '1000' },
    workers: { type: 'string', default: '1' },
    label: { type: 'string', default: 'current' },
    results: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (opt.help) printHelp(import.meta.url);
const quick = opt.quick === true;
const BACKLOG = Number(opt.backlog ?? (quick ? 2000 : 20_000));
const RATE = Number(opt.rate);
const SECONDS = Number(opt.seconds ?? (quick ? 15 : 60));
const BASELINE_SECONDS = Number(opt['baseline-seconds'] ?? (quick ? 8 : 20));
const SHARE = Number(opt.share);
const CAPACITY = Number(opt.capacity);
const WORKERS = Number(opt.workers);
const TENANT = 'acme';
checkLabel(opt.label);
for (const [name, v] of Object.entries({ BACKLOG, RATE, SECONDS, BASELINE_SECONDS, SHARE, CAPACITY, WORKERS }))
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${name} must be a positive number`);

const bench = new BenchRun('recovery');
const { prefix, sluice: SLUICE } = bench;

/** `n` dead letters of the endpoint, last attempted over the hour before `now`. */
function backlog(endpointId: string, n: number, now: number): DlqEntry[] {
  return Array.from({ length: n }, (_, i) => {
    const last = now - 3600_000 + Math.floor((i * 3000_000) / n);
    const id = `evt_backlog_${String(i).padStart(6, '0')}`;
    const iso = (ms: number) => new Date(ms).toISOString();
    return {
      id: `dlq_backlog_${String(i).padStart(6, '0')}`,
      event_id: id,
      endpoint_id: endpointId,
      tenant_id: TENANT,
      event_type: 'inference.completed',
      attempts: 17,
      last_status: 503,
      last_error: null,
      first_attempt_at: iso(last - 72 * 3600_000),
      last_attempt_at: iso(last),
      dead_lettered_at: iso(last),
      expires_at: iso(last + 7 * 86400_000),
      payload: { id, tenant_id: TENANT, type: 'inference.completed', data: { backlog: i }, created_at: last },
    };
  });
}

async function main(): Promise<number> {
  const { startedAt, load1 } = bench;
  const { brokers } = await bench.startKafka();
  const receiver = bench.receiver().call;
  const load = bench.load().call;

  // Sluice
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...sluiceEnv({ brokers, prefix, port, dataDir: bench.scratch.dataDir() }),
    SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
    SLUICE_WORKERS: String(WORKERS),
    SLUICE_RECOVERY_SHARE: String(SHARE),
    SLUICE_RECOVERY_CAPACITY_PER_SECOND: String(CAPACITY),
  };
  say(`starting sluice start (topic prefix ${prefix}, ${WORKERS} worker(s))...`);
  await bench.sluiceStart(port, env);
  const base = `http://127.0.0.1:${port}`;

  // The tenant, its endpoint, its backlog
  const client = await adminClient(SLUICE, ROOT, env, TENANT);
  const token = await bearerToken(base, client);
  const api = sluiceApi(base, () => token);
  const [fastPort] = (await receiver({ op: 'listen', ports: [{ name: 'live' }] })).ports!;
  const endpointId = await registerEndpoint(api, `http://127.0.0.1:${fastPort}/hook`);

  const now = Date.now();
  const entries = backlog(endpointId, BACKLOG, now);
  const producer = createKafka(brokers, 'sluice-bench-recovery').producer();
  await producer.connect();
  for (let i = 0; i < entries.length; i += 500)
    await producer.send({
      topic: `${prefix}.dlq`,
      messages: entries.slice(i, i + 500).map((e) => ({ key: TENANT, value: JSON.stringify(e) })),
    });
  await producer.disconnect();
  // The DLQ view has them all once a recovery's count would find them.
  for (const deadline = Date.now() + 120_000; ; await sleep(1000)) {
    const n = (await dlqEventIds(api, endpointId, Number.POSITIVE_INFINITY)).length;
    if (n >= BACKLOG) break;
    if (Date.now() > deadline) throw new Error(`the DLQ listed ${n} of ${BACKLOG} entries after 120 s`);
  }
  say(`${fmt(BACKLOG)} dead letters of ${endpointId} listed`);
  const notes: string[] = [];
  if (!(await settleGroups(brokers, prefix, WORKERS)))
    notes.push('the consumer groups were not Stable within 90 s; measured anyway.');

  // Live alone, then live beside the recovery
  const live = async (seconds: number) => {
    await receiver({ op: 'reset' });
    return (await load({ op: 'probe', spec: { base, probe: { client, rate: RATE, keys: 1, seconds }, flood: null } }))
      .probe!;
  };
  /** The live port's first receipts, repeats and latency in the window. */
  const liveStats = async () => {
    const [s] = (await receiver({ op: 'stats' })).stats!;
    return { unique: s.seen, duplicates: s.duplicates, ...s.latency };
  };
  /** Waits until the window's live events are in (30 s at most); the stats of the window. */
  const settle = async (liveAccepted: number, extra: () => number) => {
    for (const deadline = Date.now() + 30_000; ; await sleep(250)) {
      const stats = await liveStats();
      if (stats.unique >= liveAccepted + extra() || Date.now() > deadline) return stats;
    }
  };

  say(`live alone: ${BASELINE_SECONDS} s at ${RATE} events/s...`);
  const aloneLoad = await live(BASELINE_SECONDS);
  const alone = await settle(aloneLoad.probeAccepted, () => 0);
  say(`live alone: p50 ${fmt(alone.p50)} ms, p99 ${fmt(alone.p99)} ms, max ${fmt(alone.max)} ms`);

  await receiver({ op: 'reset' });
  const since = new Date(now - 2 * 3600_000).toISOString();
  const started = await api('POST', `/v1/webhooks/endpoints/${endpointId}/recover`, { since });
  if (started.status !== 202)
    throw new Error(`the recovery answered ${started.status}: ${JSON.stringify(started.body)}`);
  const jobPath = `/v1/webhooks/endpoints/${endpointId}/recover/${started.body.id}`;
  const ratePerSecond: number = started.body.rate_per_second;
  say(
    `recovery ${started.body.id}: found ${fmt(started.body.found)}, pace ${ratePerSecond}/s ` +
      `(expected ${fmt(Math.ceil(started.body.found / ratePerSecond))} s); live beside it for ${SECONDS} s...`,
  );
  const jobStarted = Date.now();
  let job = started.body;
  const sentBySecond: number[] = [];
  const sampler = setInterval(() => {
    void api('GET', jobPath).then((r) => {
      if (r.status !== 200) return;
      sentBySecond.push(r.body.sent - job.sent);
      job = r.body;
    });
  }, 1000);
  // The live phase runs while the job runs: no longer than it (so nothing is measured after it ended).
  const during = Math.min(SECONDS, Math.max(2, Math.floor(started.body.found / ratePerSecond) - 1));
  const duringLoad = await live(during);
  await sleep(3000); // the last live events' receipts (their latency counts, whatever comes beside them)
  const duringStats = await liveStats();
  // Then the job to its end.
  const expectedEnd = jobStarted + (started.body.found / ratePerSecond) * 1000 + 30_000;
  while (job.state === 'running' && Date.now() < expectedEnd) await sleep(500);
  for (const deadline = Date.now() + 30_000; job.delivered < job.sent && Date.now() < deadline; ) await sleep(500);
  clearInterval(sampler);
  const jobSeconds = (Date.parse(job.finished_at ?? new Date().toISOString()) - Date.parse(job.created_at)) / 1000;
  const busiest = Math.max(0, ...sentBySecond.slice(1));
  say(
    `live beside the recovery: p50 ${fmt(duringStats.p50)} ms, p99 ${fmt(duringStats.p99)} ms, ` +
      `max ${fmt(duringStats.max)} ms; recovery ${job.state}: found ${fmt(job.found)}, sent ${fmt(job.sent)}, ` +
      `delivered ${fmt(job.delivered)}, failed ${fmt(job.failed)} in ${jobSeconds.toFixed(1)} s ` +
      `(${(job.sent / Math.max(jobSeconds, 0.001)).toFixed(1)}/s, busiest second ${busiest})`,
  );
  const after = await liveStats();
  const liveLost = Math.max(0, aloneLoad.probeAccepted - alone.unique);

  // Report
  const commit = measuredCommit(ROOT);
  const section = [
    `### recovery: ${opt.label} (${startedAt.toISOString().slice(0, 10)}, Sluice at ${commit})`,
    '',
    `Command: \`${bench.command('bench:recovery')}\`; ` +
      `machine: ${machineLine()}, load average ${load1.toFixed(2)} at start. ` +
      `Processes: Kafka, \`sluice start\` (${WORKERS} worker(s)), receiver, load generator. ` +
      `One tenant, one endpoint: ${fmt(BACKLOG)} dead letters recovered at SLUICE_RECOVERY_SHARE ${SHARE} of ` +
      `SLUICE_RECOVERY_CAPACITY_PER_SECOND ${CAPACITY} (${ratePerSecond}/s), live traffic ${RATE} events/s to the ` +
      'same endpoint, one per request on a fixed schedule.',
    '',
    '| phase | live events | p50 ms | p99 ms | max ms | recovery |',
    '|---|---|---|---|---|---|',
    `| live alone | ${fmt(aloneLoad.probeAccepted)} | ${fmt(alone.p50)} | ${fmt(alone.p99)} | ${fmt(alone.max)} | — |`,
    `| live beside the recovery (${during} s) | ${fmt(duringLoad.probeAccepted)} | ${fmt(duringStats.p50)} | ` +
      `${fmt(duringStats.p99)} | ${fmt(duringStats.max)} | ${job.state}: found ${fmt(job.found)}, sent ` +
      `${fmt(job.sent)}, delivered ${fmt(job.delivered)} in ${jobSeconds.toFixed(1)} s ` +
      `(${(job.sent / Math.max(jobSeconds, 0.001)).toFixed(1)}/s; busiest second ${busiest}) |`,
    ...(notes.length ? ['', ...notes.map((n) => `- ${n}`)] : []),
  ].join('\n');
  say();
  say(section);
  writeResults(resultsFile(opt.results, quick), `recovery:${opt.label}`, section);
  const incomplete = job.sent < job.found || job.found < BACKLOG;
  if (incomplete) say(`the recovery sent ${job.sent} of ${job.found} found (${BACKLOG} written)`);
  if (after.duplicates > 0) say(`note: ${after.duplicates} repeated receipts in the last window`);
  return liveLost > 0 || incomplete ? 1 : 0;
}

bench.run(main);
