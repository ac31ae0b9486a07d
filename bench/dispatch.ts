/**
 * Webhook dispatch benchmark with every piece its own OS process, as an operator runs them:
 * Kafka (`sluice kafka`, unless KAFKA_BROKERS is set), `sluice start` (+ `--dispatchers N` extra
 * `sluice dispatcher` members), the node:http receiver and the Node load generator
 * (harness/receiver.ts, load.ts) and the hop-ceiling probes (bench/dispatch/hop-*.ts).
 * This process only orchestrates: it starts them, registers endpoints, asks the load generator
 * to publish, waits until the receiver has every delivery, samples /proc, and reports.
 *
 *   npm run bench:dispatch -- [--quick] [--big] [--only f1-single,half-sat,...] [--events N]
 *       [--repeat N] [--concurrency 64] [--batch-size 100] [--rate R] [--dispatchers N]
 *       [--ingresses N]      (N `sluice ingress` + max(1, --dispatchers) `sluice dispatcher` instead of
 *                            `sluice start`; the load publishes to the first ingress)
 *       [--workers N] [--quiet-timeout 30] [--skip-hops] [--label current] [--results FILE]
 *       [--sluice-dir DIR]   (measure another checkout, e.g. a worktree of the baseline commit)
 *       [--profile]          (node --cpu-prof for every Sluice process; profiles in the work dir)
 *       [--check [--check-label check]]  exits 1 when Sluice's CPU per 1,000 deliveries in f10-single is over
 *                            125 % of the figure in RESULTS.md's `check` section (made by `--only f10-single
 *                            --skip-hops --label check`, the way --check measures); writes nothing
 *       [--curve]            the cost curve (label `curve`, hops skipped): an unreported warm-up at 2,000
 *                            deliveries/s for 45 s (fan-out 10), idle for 20 s, then open-model runs at
 *                            500, 2,000 and 8,000 deliveries/s (fan-out 10, 15 s each), then f10-single
 *                            at saturation; prints CPU-s per 1,000 deliveries at each and their ratios.
 *                            With --check: each point against the `curve` section (+25 %)
 *       [--curve-seconds S]  how long each point of the curve publishes (15; 5 with --quick)
 *
 * Scenarios (--only takes their names): f1-single, f1-single-id (each event with its own publish id:
 * the idempotent path), half-sat, f10-single, f1-batch, f10-batch, unhealthy (the default run, in
 * this order; the five f* repeated --repeat times, default 2) and
 * big (100,000 events, fan-out 10; only with --big or --only big). --events N sets every count,
 * --quick makes them tiny. Batch scenarios are skipped with a note while the batch route is 404.
 *
 * Writes its section of bench/RESULTS.md (between `<!-- dispatch:<label>:begin/end -->`), except
 * with --quick unless --results is given. Exits 1 if a healthy endpoint lost a delivery.
 */
import { existsSync, readdirSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { KAFKA_VERSION } from '../core/kafka/local-broker.ts';
import { freePort, freePorts } from '../core/net/free-port.ts';
import type { HopKafkaResult, HopKafkaSpec } from './dispatch/hop-kafka.ts';
import type { HopPostResult, HopPostSpec } from './dispatch/hop-post.ts';
import { judgeCpu, recordedCpu } from './dispatch/cpu-check.ts';
import { featureShares } from './dispatch/feature-cost.ts';
import { machineLine, measuredCommit, writeDispatchSection, writeMarkedSection } from '../harness/results-section.ts';
import { BenchRun } from '../harness/bench.ts';
import type { Launched } from '../harness/children.ts';
import { checkLabel, printHelp, ROOT, say, sleep } from '../harness/cli.ts';
import type { PublishResult } from '../harness/load.ts';
import type { PortSpec, PortStats } from '../harness/receiver.ts';
import { kafkaPid, settleGroups } from '../harness/kafka.ts';
import { ProcSampler, processTree, type Usage } from '../harness/proc-cpu.ts';
import { RECEIVER_ENV, sluiceEnv, startDispatchers, waitReady } from '../harness/sluice.ts';
import { adminClient, bearerToken, type BenchClient, registerEndpoint, sluiceApi } from '../harness/sluice-api.ts';
import { fmt, type Latency, median } from '../harness/stats.ts';

const { values: opt } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    big: { type: 'boolean', default: false },
    only: { type: 'string' },
    events: { type: 'string' },
    repeat: { type: 'string' },
    concurrency: { type: 'string', default: '64' },
    'batch-size': { type: 'string', default: '100' },
    rate: { type: 'string' },
    dispatchers: { type: 'string', default: '0' },
    ingresses: { type: 'string', default: '0' },
    workers: { type: 'string' },
    'quiet-timeout': { type: 'string', default: '30' },
    'curve-seconds': { type: 'string' },
    'skip-hops': { type: 'boolean', default: false },
    check: { type: 'boolean', default: false },
    'check-label': { type: 'string', default: 'check' },
    label: { type: 'string', default: 'current' },
    'sluice-dir': { type: 'string' },
    profile: { type: 'boolean', default: false },
    curve: { type: 'boolean', default: false },
    results: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (opt.help) printHelp(import.meta.url);
const quick = opt.quick === true;
const CURVE = opt.curve === true;
if (CURVE) {
  opt['skip-hops'] = true;
  if (opt.label === 'current') opt.label = 'curve';
  if (opt['check-label'] === 'check') opt['check-label'] = 'curve';
}
/** The cost curve's points: deliveries/s, fan-out 10 (--curve). */
const CURVE_RATES = [500, 2000, 8000];
const CURVE_SECONDS = opt['curve-seconds'] ? Number(opt['curve-seconds']) : quick ? 5 : 15;
const IDLE_SECONDS = quick ? 5 : 20;
/** --curve: an unreported open-model run at this many deliveries/s before idle and the points. */
const CURVE_WARM_RATE = 2000;
const CURVE_WARM_SECONDS = quick ? 3 : 45;
const size = (full: number, small: number) => (opt.events ? Number(opt.events) : quick ? small : full);
const REPEAT = opt.repeat ? Number(opt.repeat) : quick ? 1 : 2;
const CONCURRENCY = Number(opt.concurrency);
const BATCH = Number(opt['batch-size']);
const INGRESSES = Number(opt.ingresses);
/** Separate `sluice dispatcher` processes: --dispatchers, and at least one beside separate ingresses. */
const DISPATCHERS = INGRESSES > 0 ? Math.max(1, Number(opt.dispatchers)) : Number(opt.dispatchers);
const QUIET_MS = Number(opt['quiet-timeout']) * 1000;
const PAD = 200;
/** The Sluice checkout measured (another one, e.g. a worktree of an older commit, for a baseline). */
const SLUICE_DIR = opt['sluice-dir'] ?? ROOT;
const SLUICE = join(SLUICE_DIR, 'bin/sluice.js');
const RESULTS_MD = join(ROOT, 'bench/RESULTS.md');
checkLabel(opt.label);
if (opt.check && INGRESSES > 0) throw new Error('--check measures `sluice start`: it does not take --ingresses');

type Mode = 'ok' | '503' | 'hang';
interface Scenario {
  name: string;
  title: string;
  modes: Mode[];
  publish: 'single' | 'batch';
  model: 'closed' | 'open';
  events: number;
  runs: number;
  /** Open model: events/s (else --rate, or half of f1-single's saturation). */
  rate?: number;
  /** Every event published with its own id (the idempotent path: claim, event, published marker). */
  ids?: boolean;
}
const ok = (n: number): Mode[] => Array(n).fill('ok');
const scenario = (
  name: string,
  title: string,
  modes: Mode[],
  publish: Scenario['publish'],
  model: Scenario['model'],
  events: number,
  runs: number,
  more: Partial<Scenario> = {},
): Scenario => ({ name, title, modes, publish, model, events, runs, ...more });
/** A point of the cost curve: fan-out 10, open model, `deliveries` a second for `seconds`. */
const curvePoint = (name: string, deliveries: number, seconds: number): Scenario =>
  scenario(
    name,
    `fan-out 10, single, open model at ${deliveries} deliveries/s`,
    ok(10),
    'single',
    'open',
    (deliveries * seconds) / 10,
    1,
    { rate: deliveries / 10 },
  );
const SCENARIOS: Scenario[] = [
  scenario('f1-single', 'fan-out 1, single publish', ok(1), 'single', 'closed', size(20_000, 200), REPEAT),
  scenario(
    'f1-single-id',
    'fan-out 1, single publish, each with its own id (claim + event + published marker)',
    ok(1),
    'single',
    'closed',
    size(20_000, 200),
    REPEAT,
    { ids: true },
  ),
  // events and rate are set from this run's f1-single runs (or --rate / --events).
  scenario('half-sat', 'fan-out 1, single, open model at 50 % of saturation', ok(1), 'single', 'open', 0, 1),
  scenario('f10-single', 'fan-out 10, single publish', ok(10), 'single', 'closed', size(10_000, 100), REPEAT),
  scenario(
    'f1-batch',
    `fan-out 1, batch publish (${BATCH}/request)`,
    ok(1),
    'batch',
    'closed',
    size(50_000, 400),
    REPEAT,
  ),
  scenario(
    'f10-batch',
    `fan-out 10, batch publish (${BATCH}/request)`,
    ok(10),
    'batch',
    'closed',
    size(15_000, 200),
    REPEAT,
  ),
  scenario(
    'unhealthy',
    'fan-out 10: 7 ok, 2 answer 503 + Retry-After, 1 hangs',
    [...ok(7), '503', '503', 'hang'],
    'single',
    'closed',
    size(10_000, 100),
    1,
  ),
  ...CURVE_RATES.map((d) => curvePoint(`curve-${d}`, d, CURVE_SECONDS)),
  scenario('big', 'fan-out 10, single publish, big', ok(10), 'single', 'closed', size(100_000, 100_000), 1),
];
const selected = CURVE
  ? [...CURVE_RATES.map((d) => `curve-${d}`), 'f10-single']
  : opt.only
    ? opt.only.split(',')
    : [
        ...SCENARIOS.filter((s) => s.name !== 'big' && !s.name.startsWith('curve-')).map((s) => s.name),
        ...(opt.big ? ['big'] : []),
      ];
if (CURVE) SCENARIOS.find((s) => s.name === 'f10-single')!.runs = 1;
for (const name of selected)
  if (!SCENARIOS.some((s) => s.name === name))
    throw new Error(`unknown scenario "${name}"; known: ${SCENARIOS.map((s) => s.name).join(', ')}`);
/** How a receiver port of each mode answers. */
const PORT: Record<Mode, Omit<PortSpec, 'name'>> = {
  ok: {},
  '503': { failRate: 1, failStatus: 503, retryAfterS: 1 },
  hang: { hang: true },
};

const bench = new BenchRun('bench-dispatch', SLUICE_DIR);
const { scratch, children, prefix } = bench;
// The CPU profiles of --profile stay in the work directory.
scratch.keepLogs = opt.profile === true;
let sampler: ProcSampler | null = null;
bench.onShutdown(async () => sampler?.stop());

/** --profile: every Sluice process (cluster workers included) writes a .cpuprofile into <work>/prof. */
const PROF = opt.profile ? ['--cpu-prof', `--cpu-prof-dir=${join(scratch.path, 'prof')}`] : [];
/** When the first Sluice process started, and when the first reported scenario did (for --profile). */
let sluiceStartedAt = 0;
let scenariosStartedAt = 0;
const launch = (name: string, args: string[], env: NodeJS.ProcessEnv): Launched => {
  sluiceStartedAt ||= Date.now();
  return children.spawn(name, SLUICE, args, env, 'sluice', PROF);
};

/** A one-shot helper: spec in, one IPC message out. */
function runOnce<T>(script: string, spec: object): Promise<T> {
  const c = children.forkTs(script, join(ROOT, 'bench/dispatch', script), [JSON.stringify(spec)]);
  return new Promise((resolve, reject) => {
    c.proc.once('message', (m) => resolve(m as T));
    c.proc.once('exit', (code) => reject(new Error(`${script} exited (${code}) without a result`)));
  });
}

let base = '';
let client: BenchClient = { client_id: '', client_secret: '' };
let token = { value: '', at: 0 };
const api = sluiceApi(
  () => base,
  async () => {
    if (Date.now() - token.at > 10 * 60_000) token = { value: await bearerToken(base, client), at: Date.now() };
    return token.value;
  },
);

let adminPorts: number[] = [];
/** sluice_deliveries_total{outcome="deferred"} summed over every Sluice process (missing = 0). */
async function deferredTotal(): Promise<number> {
  let sum = 0;
  for (const port of adminPorts) {
    const text = await fetch(`http://127.0.0.1:${port}/metrics`).then(
      (r) => r.text(),
      () => '',
    );
    sum += Number(/^sluice_deliveries_total\{outcome="deferred"\} (\d+)$/m.exec(text)?.[1] ?? 0);
  }
  return sum;
}

/** What the receiver had of a run's healthy deliveries. */
interface Received {
  ports: PortStats[];
  unique: number;
  duplicates: number;
  p50: number | null;
  p99: number | null;
  last: number | null;
}

interface RunResult {
  sc: Scenario;
  run: number;
  load: PublishResult;
  healthy: number;
  expected: number;
  stats: Received;
  deliveredPerSec: number;
  lost: number;
  deferred: number;
  timedOut: boolean;
  usage: Map<string, Usage>;
  /** Wall seconds of the run's CPU window (publish start to the last delivery). */
  wallSec: number;
}

async function main(): Promise<number> {
  const { startedAt, load1 } = bench;

  // 1. Kafka
  const kafka = await bench.startKafka();
  const { brokers, external: externalKafka } = kafka;
  const kafkaJava = kafkaPid(kafka);

  // 2. receiver and load generator
  const { call: receiver, proc: receiverProc } = bench.receiver();
  const { call: load, proc: loadProc } = bench.load();
  const listen = async (modes: Mode[]) =>
    (await receiver({ op: 'listen', ports: modes.map((m, i) => ({ name: `p${i}`, ...PORT[m] })) })).ports!;
  /** Σ first 2xx over the ports (only `ok` ports answer 2xx): cheap, for polling. */
  const delivered = async () =>
    Object.values((await receiver({ op: 'progress' })).progress!).reduce((a, b) => a + b, 0);
  const receiverStats = async (): Promise<Received> => {
    const r = await receiver({ op: 'stats' });
    const ports = r.stats!;
    const lat: Latency = r.latency!;
    const lasts = ports.map((p) => p.lastOkAt).filter((t): t is number => t !== null);
    return {
      ports,
      unique: ports.reduce((n, p) => n + p.ok, 0),
      duplicates: ports.reduce((n, p) => n + p.duplicates, 0),
      p50: lat.p50,
      p99: lat.p99,
      last: lasts.length ? Math.max(...lasts) : null,
    };
  };

  // 3. Sluice
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...sluiceEnv({ brokers, prefix, port, dataDir: scratch.dataDir() }),
    ...RECEIVER_ENV,
    ...(opt.workers ? { SLUICE_WORKERS: opt.workers } : {}),
  };
  // `sluice start` may run several worker processes (SLUICE_WORKERS, default the core count);
  // with --ingresses, N single-process `sluice ingress` nodes take its place.
  const front: { name: string; launched: Launched; adminPort: number }[] = [];
  if (INGRESSES > 0) {
    say(`starting ${INGRESSES} sluice ingress (topic prefix ${prefix}) and ${DISPATCHERS} dispatcher(s)...`);
    for (let i = 1; i <= INGRESSES; i++) {
      const [p, ap] = i === 1 ? [port, await freePort()] : await Promise.all([freePort(), freePort()]);
      const name = `ingress-${i}`;
      const node = launch(name, ['ingress'], { ...env, SLUICE_PORT: String(p), SLUICE_ADMIN_PORT: String(ap) });
      front.push({ name, launched: node, adminPort: ap });
    }
  } else {
    // The node's port (every worker summed, served by the primary) and one per worker after it.
    const adminPort = await freePorts(1 + (opt.workers ? Number(opt.workers) : availableParallelism()));
    say(`starting sluice start (topic prefix ${prefix}) and ${DISPATCHERS} extra dispatcher(s)...`);
    const node = launch('sluice', ['start'], {
      ...env,
      SLUICE_PORT: String(port),
      SLUICE_ADMIN_PORT: String(adminPort),
    });
    front.push({ name: 'sluice', launched: node, adminPort });
  }
  base = `http://127.0.0.1:${port}`;
  sluiceStartedAt ||= Date.now();
  const dispatchers = await startDispatchers(children, SLUICE, env, DISPATCHERS, null, PROF);
  for (const node of front) await waitReady(node.launched, node.name, node.adminPort);
  // Cluster workers of `sluice start`, if any, are the node children of the primary; all forked by now.
  const sluiceWorkers = INGRESSES > 0 ? 0 : processTree(front[0].launched.proc.pid!).length - 1;
  // `sluice start`'s admin port serves the sum of its workers (its /readyz: all of them ready).
  adminPorts = [...front.map((n) => n.adminPort), ...dispatchers.map((d) => d.adminPort)];
  const frontName = (name: string) =>
    INGRESSES > 0 ? name : sluiceWorkers > 0 ? `sluice start (primary + ${sluiceWorkers} workers)` : 'sluice start';
  sampler = new ProcSampler(() => {
    const m = new Map<string, number[]>();
    if (kafkaJava) m.set('kafka (java)', [kafkaJava]);
    for (const node of front) m.set(frontName(node.name), processTree(node.launched.proc.pid!));
    for (const d of dispatchers) m.set(d.name, [d.launched.proc.pid!]);
    m.set('receiver', [receiverProc.pid!]);
    m.set('load', [loadProc.pid!]);
    return m;
  });

  // 4. credential
  client = await adminClient(SLUICE, SLUICE_DIR, env, 'bench');
  const batchAvailable = (await api('POST', '/v1/webhooks/events/batch', { events: [] })).status !== 404;
  if (!batchAvailable)
    say('note: POST /v1/webhooks/events/batch answers 404: batch publish not available, batch scenarios skipped');

  // Measure a settled system: a process joining a consumer group later would rebalance it
  // mid-run and repeat deliveries; and the first events pay for connections and JIT.
  const notes: string[] = [];
  let liveEndpoints: string[] = [];
  const groupMembers = (INGRESSES > 0 ? 0 : Math.max(1, sluiceWorkers)) + DISPATCHERS;
  if (!(await settleGroups(brokers, prefix, groupMembers)))
    notes.push(
      `the delivery consumer groups were not Stable with ${groupMembers} members within 90 s; measured anyway.`,
    );
  const warmUp = quick ? 50 : 1000;
  await measure(scenario('warm-up', 'warm-up', ok(1), 'single', 'closed', warmUp, 1), 0, 0);
  say(`warm-up: ${warmUp} events delivered (not reported)`);
  if (CURVE) {
    // The curve's points run fan-out 10 on the open model, which the warm-up above barely touches: V8
    // optimises those paths over the first minute of such load at 500/s, on threads of its own (0.2
    // of a core, falling to 0.02). That is start-up, not the cost of a delivery, so it is paid here,
    // at 2,000/s for 45 s (3 s with --quick).
    const warm = curvePoint('curve-warm-up', CURVE_WARM_RATE, CURVE_WARM_SECONDS);
    await measure(warm, 0, warm.rate!);
    say(`curve warm-up: ${fmt(warm.events * 10)} deliveries at ${fmt(CURVE_WARM_RATE)}/s (not reported)`);
  }

  // --curve: what each process costs doing nothing, after the warm-up has settled.
  let idle: Map<string, Usage> | null = null;
  if (CURVE) {
    await sleep(5000);
    const w = sampler.begin();
    await sleep(IDLE_SECONDS * 1000);
    idle = sampler.end(w);
    say(`idle: ${[...idle].map(([n, u]) => `${n} ${fmt((100 * u.cpuSec) / IDLE_SECONDS, 1)} %`).join(', ')}`);
  }

  // 5. hop ceilings
  const hops: string[] = [];
  const postCeiling = new Map<number, number>();
  if (!opt['skip-hops']) {
    for (const [endpoints, connections, posts] of [
      [1, 8, quick ? 1000 : 30_000],
      [10, 64, quick ? 2000 : 50_000],
    ]) {
      const ports = await listen(ok(endpoints));
      const spec: HopPostSpec = { ports, connections, posts, padBytes: PAD };
      const r = await runOnce<HopPostResult>('hop-post.ts', spec);
      const s = await receiverStats();
      const rate = s.unique / ((s.last! - r.startedAt) / 1000);
      postCeiling.set(endpoints, rate);
      hops.push(
        `| signed POST → receiver (hop-post.ts) | ${endpoints} endpoint(s) × ${connections} ` +
          `connections, ${fmt(posts)} POSTs${r.failed ? `, ${r.failed} failed` : ''} | ` +
          `${fmt(rate)} deliveries/s |`,
      );
      say(hops[hops.length - 1]);
    }
    const records = quick ? 5000 : 100_000;
    const spec: HopKafkaSpec = {
      brokers,
      topic: `${prefix}.hop-kafka`,
      records,
      recordBytes: 600,
      batch: 500,
      producers: 4,
      partitions: 6,
    };
    const k = await runOnce<HopKafkaResult>('hop-kafka.ts', spec);
    hops.push(
      `| Kafka produce (hop-kafka.ts) | ${fmt(records)} records of ~600 B, acks=-1, ` +
        `one request in flight, 4 producers × batches of 500, 6 partitions | ` +
        `${fmt(k.producePerSec)} records/s |`,
      `| Kafka consume (hop-kafka.ts) | the same records, one consumer group, ` +
        `timed from run() (join + first fetch ${fmt(k.consumerJoinMs)} ms included) | ` +
        `${fmt(k.consumePerSec)} records/s |`,
      // Each event is 1 record on sluice.events and 1 DeliverySet (up to 100 endpoints) on sluice.deliveries.
      ...[1, 10].map(
        (f) =>
          `| Kafka-bound delivery ceiling, fan-out ${f} | produce rate × ${f}/2: ` +
          `each event is 1 event record + 1 delivery set of ${f} | ` +
          `≈ ${fmt((k.producePerSec * f) / 2)} deliveries/s |`,
      ),
    );
    say(hops.slice(-4).join('\n'));
  }

  // 6. scenarios, in the order asked for (--curve: the curve's points, then saturation)
  const results: RunResult[] = [];
  scenariosStartedAt = Date.now();
  for (const sc of selected.map((name) => SCENARIOS.find((s) => s.name === name)!)) {
    if (sc.publish === 'batch' && !batchAvailable) {
      notes.push(`${sc.name}: skipped, the batch route answered 404 (batch publish not available).`);
      continue;
    }
    let rate = 0;
    if (sc.model === 'open') {
      const sat = results.filter((r) => r.sc.name === 'f1-single').map((r) => r.load.acceptedPerSec);
      rate = sc.rate ?? (opt.rate ? Number(opt.rate) : sat.length > 0 ? median(sat) / 2 : 0);
      if (rate <= 0) {
        notes.push(`${sc.name}: skipped, needs f1-single in the same run or --rate R.`);
        continue;
      }
      if (sc.rate === undefined) {
        sc.events = opt.events ? Number(opt.events) : Math.max(50, Math.round(rate * (quick ? 3 : 20)));
        notes.push(
          `${sc.name}: open model at ${fmt(rate)} events/s ` +
            `(${opt.rate ? '--rate' : '50 % of the median f1-single accepted/s'}), ` +
            `${fmt(sc.events)} events.`,
        );
      }
    }
    for (let run = 1; run <= sc.runs; run++) {
      const r = await measure(sc, run, rate);
      if (!r) {
        notes.push(`${sc.name}: skipped, the batch route answered 404.`);
        break;
      }
      results.push(r);
      const { load: lr, stats } = r;
      if (Object.keys(lr.matched).some((k) => Number(k) !== sc.modes.length))
        notes.push(
          `${sc.name} run ${run}: matched_endpoints ≠ ${sc.modes.length} on some publishes: ` +
            `${JSON.stringify(lr.matched)}.`,
        );
      say(
        `${sc.name} run ${run}/${sc.runs}: ${fmt(lr.accepted)} events accepted at ` +
          `${fmt(lr.acceptedPerSec)}/s, ${fmt(stats.unique)}/${fmt(r.expected)} deliveries at ` +
          `${fmt(r.deliveredPerSec)}/s, p50 ${fmt(stats.p50)} ms, p99 ${fmt(stats.p99)} ms, ` +
          `${fmt(stats.duplicates)} duplicates${r.timedOut ? ', TIMED OUT' : ''}`,
      );
    }
  }
  await Promise.all(liveEndpoints.map((id) => api('DELETE', `/v1/webhooks/endpoints/${id}`)));

  /** One run: fresh endpoints (the old ones deleted: the fan-out stays right), publish, wait, read; null: no batch. */
  async function measure(sc: Scenario, run: number, rate: number): Promise<RunResult | null> {
    await Promise.all(liveEndpoints.map((id) => api('DELETE', `/v1/webhooks/endpoints/${id}`)));
    const ports = await listen(sc.modes);
    liveEndpoints = await Promise.all(ports.map((p) => registerEndpoint(api, `http://127.0.0.1:${p}/hook`)));
    if (DISPATCHERS > 0) await sleep(1000); // every dispatcher's endpoint view sees the change
    const healthy = sc.modes.filter((m) => m === 'ok').length;
    const deferred0 = await deferredTotal();
    const window = sampler!.begin();
    const windowAt = Date.now();
    const { publish, model, events } = sc;
    const spec = {
      base,
      client,
      publish,
      batchSize: BATCH,
      model,
      connections: CONCURRENCY,
      rate,
      events,
      padBytes: PAD,
    };
    const lr = (await load({ op: 'publish', spec: { ...spec, ...(sc.ids ? { ids: true } : {}) } })).publish!;
    if (lr.batchUnavailable) {
      sampler!.end(window);
      return null;
    }
    const expected = lr.accepted * healthy;
    const timedOut = await waitForDeliveries(expected, deferred0);
    const stats = await receiverStats();
    const usage = sampler!.end(window);
    const deferred = (await deferredTotal()) - deferred0;
    const deliveredPerSec = stats.last ? stats.unique / (Math.max(1, stats.last - lr.firstSentAt) / 1000) : 0;
    const lost = expected - stats.unique;
    const wallSec = (Date.now() - windowAt) / 1000;
    return { sc, run, load: lr, healthy, expected, stats, deliveredPerSec, lost, deferred, timedOut, usage, wallSec };
  }

  /** True when the deliveries stopped coming before `expected` of them did. */
  async function waitForDeliveries(expected: number, deferred0: number): Promise<boolean> {
    for (let last = -1, progressAt = Date.now(); ; await sleep(250)) {
      const n = await delivered();
      if (n >= expected) return false;
      if (n !== last) [last, progressAt] = [n, Date.now()];
      const quiet = Date.now() - progressAt;
      // A deferred delivery comes back through the 30 s rung: give those 30 s more.
      if (quiet > QUIET_MS && (quiet > QUIET_MS + 30_000 || (await deferredTotal()) === deferred0)) return true;
    }
  }

  // 7. report
  const scenarioRows = results.map((r) => {
    const others = Object.entries(r.load.statuses).filter(
      ([k]) => !(r.sc.publish === 'single' ? ['202'] : ['200', '202']).includes(k),
    );
    const itemErrs = Object.entries(r.load.itemErrors).map(([k, v]) => `item ${k}×${v}`);
    const ceiling = postCeiling.get(r.sc.modes.length === 1 ? 1 : 10) ?? null;
    const pct = r.sc.model === 'open' || ceiling === null ? '—' : `${fmt((100 * r.deliveredPerSec) / ceiling)} %`;
    return (
      `| ${r.sc.name} | ${r.run} | ${fmt(r.load.accepted)} × ${r.healthy} | ` +
      `${fmt(r.load.acceptedPerSec)} | ${fmt(r.deliveredPerSec)} | ${pct} | ` +
      `${fmt(r.stats.p50)} | ${fmt(r.stats.p99)} | ` +
      `${fmt(r.lost)}${r.timedOut ? ' (quiet timeout)' : ''} | ${fmt(r.stats.duplicates)} | ` +
      `${fmt(r.deferred)} | ` +
      `${[...others.map(([k, v]) => `${k}×${v}`), ...itemErrs].join(', ') || '—'} |`
    );
  });
  const ran = [...new Set(results.map((r) => r.sc))];
  const spreadRows = ran.map((sc) => {
    const xs = results.filter((r) => r.sc === sc).map((r) => r.deliveredPerSec);
    const [min, max] = [Math.min(...xs), Math.max(...xs)];
    return `| ${sc.name} | ${sc.title} | ${xs.length} | ${fmt(min)} | ${fmt(median(xs))} | ${fmt(max)} |`;
  });
  const unhealthy = results.find((r) => r.sc.name === 'unhealthy');
  const allHealthy = results.filter((r) => r.sc.name === 'f10-single');
  if (unhealthy && allHealthy.length > 0) {
    const ref = median(allHealthy.map((r) => r.deliveredPerSec));
    const perPort = unhealthy.stats.ports.map((p, i) => `${unhealthy.sc.modes[i]} ${fmt(p.requests)}`).join(', ');
    notes.push(
      `unhealthy: the ${unhealthy.healthy} healthy endpoints got ` +
        `${fmt(unhealthy.deliveredPerSec)} deliveries/s ` +
        `(${fmt(unhealthy.deliveredPerSec / unhealthy.healthy)} per endpoint) vs ${fmt(ref)}/s ` +
        `(${fmt(ref / 10)} per endpoint) with 10 healthy (f10-single median): ` +
        `${fmt((100 * unhealthy.deliveredPerSec) / unhealthy.healthy / (ref / 10))} % per ` +
        `endpoint. Received per port (repeats included): ${perPort}.`,
    );
  }
  const procNames = [...new Set(results.flatMap((r) => [...r.usage.keys()]))];
  const sluiceProcs = procNames.filter((n) => /^(sluice|ingress|dispatcher)/.test(n));
  const sluiceCpuOf = (r: RunResult) => sluiceProcs.reduce((m, p) => m + (r.usage.get(p)?.cpuSec ?? 0), 0);
  const resourceRows = ran.map((sc) => {
    const rs = results.filter((r) => r.sc === sc);
    const deliveries = rs.reduce((n, r) => n + r.stats.unique, 0);
    const perThousand = (cpu: number) => fmt(deliveries ? (cpu * 1000) / deliveries : null, 3);
    const cells = procNames.map((name) => {
      const us = rs.map((r) => r.usage.get(name)).filter((u): u is Usage => u !== undefined);
      if (us.length === 0) return '—';
      const cpu = us.reduce((n, u) => n + u.cpuSec, 0);
      return `${fmt(Math.max(...us.map((u) => u.peakRssMb)))} MB · ${perThousand(cpu)} s`;
    });
    const sluiceCpu = rs.reduce((n, r) => n + sluiceCpuOf(r), 0);
    return `| ${sc.name} | ${fmt(deliveries)} | ${cells.join(' | ')} | ${perThousand(sluiceCpu)} s |`;
  });

  const curve = CURVE ? curveSection(results, sluiceCpuOf, idle, sluiceProcs) : null;
  const command = bench.command('bench:dispatch');
  const kafkaHow = externalKafka ? `already running (${brokers.join(',')})` : 'started by the bench (`sluice kafka`)';
  const inWorkers = sluiceWorkers > 0 ? ` in each of ${sluiceWorkers} cluster workers` : '';
  const workersEnv = opt.workers ? `, SLUICE_WORKERS=${opt.workers}` : '';
  const extraDispatchers = DISPATCHERS ? ` + ${DISPATCHERS} \`sluice dispatcher\`` : '';
  const sluiceProcesses =
    INGRESSES > 0
      ? `${INGRESSES} \`sluice ingress\` (the load publishes to the first) + ${DISPATCHERS} \`sluice dispatcher\``
      : `\`sluice start\` (ingress + dispatcher${inWorkers}${workersEnv})${extraDispatchers}`;
  const section = [
    `### Run "${opt.label}": ${startedAt.toISOString().slice(0, 10)}`,
    '',
    `Command: \`${command}\``,
    '',
    `Sluice measured: commit ${measuredCommit(SLUICE_DIR)}${SLUICE_DIR === ROOT ? '' : ' (--sluice-dir)'}.`,
    '',
    `Machine: ${machineLine()}; Kafka ${KAFKA_VERSION} ${kafkaHow}; ${startedAt.toISOString()}; ` +
      `1-min load average at start ${fmt(load1, 2)}.`,
    `Processes: Kafka, ${sluiceProcesses}, ` +
      `the receiver, the load generator (${CONCURRENCY} connections) and the hop probes, ` +
      'each its own OS process on this machine. ' +
      'Measured once the delivery consumer groups were Stable with every process in them ' +
      `and after a warm-up of ${fmt(warmUp)} unreported events` +
      (CURVE ? ` and ${CURVE_WARM_SECONDS} s at ${fmt(CURVE_WARM_RATE)} deliveries/s, fan-out 10.` : '.'),
    'The load generator is a Node open/closed-model generator rather than k6: ' +
      'it counts every response by its exact status (and batch answers per item), ' +
      'and stamps each event with its publish time, carried in the event to the receiver, ' +
      'which measures publish→receipt per delivery.',
    '',
    '#### Hop ceilings (same run, before the scenarios)',
    '',
    '| hop | setup | rate |',
    '|---|---|---:|',
    ...(hops.length ? hops : ['| (skipped: --skip-hops) | | |']),
    '',
    '#### Scenarios',
    '',
    ...(groupMembers > 1
      ? [
          `The POST ceiling is one sending process; Sluice delivers from ${groupMembers} processes ` +
            `here, so it can pass 100 %.`,
        ]
      : []),
    'events × healthy endpoints = expected deliveries. delivered/s: ' +
      'healthy deliveries from the first publish to the last first receipt. Latency: ' +
      'publish (request sent) → first receipt. lost: expected − unique received. deferred: ' +
      '`sluice_deliveries_total{outcome="deferred"}` delta over all Sluice processes.',
    '',
    '| scenario | run | events × endpoints | accepted/s | delivered/s | % of POST ceiling | ' +
      'p50 ms | p99 ms | lost | dup | deferred | other responses |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
    ...scenarioRows,
    '',
    '| scenario | | runs | delivered/s min | median | max |',
    '|---|---|---:|---:|---:|---:|',
    ...spreadRows,
    '',
    ...notes.map((n) => `- ${n}`),
    ...(notes.length ? [''] : []),
    '#### Per-process resources',
    '',
    'Each cell: peak RSS · CPU seconds (user + system, /proc, ' +
      "sampled every 500 ms) per 1,000 healthy deliveries, over the scenario's runs; " +
      'a group of processes (cluster workers) counts as their sum.',
    '',
    `| scenario | deliveries | ${procNames.join(' | ')} | all Sluice processes |`,
    `|---|---:|${procNames.map(() => '---:').join('|')}|---:|`,
    ...resourceRows,
    ...(curve ? ['', curve.text] : []),
  ].join('\n');
  say('');
  say(section);
  if (opt.profile) {
    await children.stopAll(['sluice']); // a process writes its profile as it exits
    say(`\n${featureSection(results, sluiceProcs)}`);
  }

  // --check compares with the figures recorded in RESULTS.md and writes its verdict beside them.
  const points: [string, number | null][] = curve
    ? curve.points
    : [
        [
          'f10-single',
          perThousandOf(
            results.filter((r) => r.sc.name === 'f10-single'),
            sluiceCpuOf,
          ),
        ],
      ];
  const verdicts = !opt.check
    ? []
    : points.map(([name, measured]) => {
        if (measured === null) return { ok: false, line: '--check: f10-single did not run or delivered nothing' };
        return judgeCpu(recordedCpu(RESULTS_MD, opt['check-label']!, name), measured, name);
      });
  for (const v of verdicts) say(v.line);
  if (opt.check && !quick)
    writeMarkedSection(
      RESULTS_MD,
      'dispatch-check:last',
      [
        `### The last \`--check\` (${startedAt.toISOString()}, Sluice at ${measuredCommit(SLUICE_DIR)})`,
        '',
        `Command: \`${command}\`; machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ` +
          `1-min load average at start ${fmt(load1, 2)}; against the \`${opt['check-label']}\` section.`,
        '',
        ...verdicts.filter((v) => 'measured' in v).map((v) => `- ${v.line.replace(/^--check: /, '')}`),
      ].join('\n'),
    );
  const resultsFile = opt.results ?? (quick || opt.check ? null : RESULTS_MD);
  if (resultsFile) {
    writeDispatchSection(resultsFile, opt.label!, section);
    say(`\nwritten to ${resultsFile} (label "${opt.label}")`);
  } else say('\n(--quick: bench/RESULTS.md left alone; pass --results FILE to write the section)');

  const lossy = results.filter((r) => r.lost > 0);
  if (lossy.length > 0) {
    const list = lossy.map((r) => `${r.sc.name} run ${r.run}: ${r.lost}`).join(', ');
    process.stderr.write(`lost deliveries among healthy endpoints: ${list}\n`);
    return 1;
  }
  return verdicts.some((v) => !v.ok) ? 1 : 0;
}

/** Sluice's CPU-s per 1,000 deliveries over `rs`; null when they delivered nothing. */
function perThousandOf(rs: RunResult[], sluiceCpuOf: (r: RunResult) => number): number | null {
  const delivered = rs.reduce((n, r) => n + r.stats.unique, 0);
  return delivered === 0 ? null : (rs.reduce((n, r) => n + sluiceCpuOf(r), 0) * 1000) / delivered;
}

/** --profile: what each feature costs, from the Sluice processes' profiles (feature-cost.ts). */
function featureSection(rs: RunResult[], names: string[]): string {
  const dir = join(scratch.path, 'prof');
  const files = existsSync(dir) ? readdirSync(dir).map((f) => join(dir, f)) : [];
  const perThousand = perThousandOf(rs, (r) => names.reduce((m, p) => m + (r.usage.get(p)?.cpuSec ?? 0), 0));
  if (files.length === 0 || perThousand === null) return '(--profile: no profiles or no deliveries to read)';
  // Each profile starts with its process: skip its start-up, endpoint registration and warm-up.
  const { busyMs, shares } = featureShares(files, { skipMs: scenariosStartedAt - sluiceStartedAt });
  return [
    `#### What each feature costs (profiles of this run, ${fmt(busyMs / 1000, 1)} busy CPU-s after the warm-up)`,
    '',
    `All Sluice processes: ${fmt(perThousand, 3)} CPU-s per 1,000 deliveries over the scenarios (profiling ` +
      'itself adds some). A sample counts for a feature when its code is anywhere on the stack, so a row ' +
      'includes what it calls (crypto, socket writes) and rows overlap.',
    '',
    '| feature | share of busy CPU | CPU-s per 1,000 deliveries |',
    '|---|---:|---:|',
    ...shares.map((s) => `| ${s.name} | ${fmt(100 * s.share, 1)} % | ${fmt(s.share * perThousand, 3)} |`),
  ].join('\n');
}

/**
 * --curve's report: Sluice's gross CPU per 1,000 deliveries at each point, its ratios against 8,000/s and
 * saturation (the targets of issue 33), idle per process, and latency at each point.
 */
function curveSection(
  results: RunResult[],
  sluiceCpuOf: (r: RunResult) => number,
  idle: Map<string, Usage> | null,
  sluiceProcs: string[],
): { text: string; points: Array<[string, number]> } {
  const rows = results.filter((r) => r.sc.name.startsWith('curve-') || r.sc.name === 'f10-single');
  const per = new Map(rows.map((r) => [r.sc.name, r.stats.unique ? (sluiceCpuOf(r) * 1000) / r.stats.unique : NaN]));
  const at8k = per.get('curve-8000') ?? NaN;
  const sat = per.get('f10-single') ?? NaN;
  const ratio = (a: number, b: number) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? a / b : NaN);
  const TARGETS: Record<string, number> = { 'curve-500': 1.5, 'curve-2000': 1.2, 'curve-8000': 1.2 };
  const lines = rows.map((r) => {
    const cost = per.get(r.sc.name)!;
    const against = r.sc.name === 'curve-8000' ? sat : r.sc.name === 'f10-single' ? NaN : at8k;
    const t = TARGETS[r.sc.name];
    const x = ratio(cost, against);
    return (
      `| ${r.sc.name === 'f10-single' ? 'saturation (f10-single)' : fmt((r.sc.rate ?? 0) * 10)} | ` +
      `${fmt(r.deliveredPerSec)} | ${fmt(sluiceCpuOf(r) / r.wallSec, 3)} | ${fmt(cost, 3)} | ` +
      `${Number.isFinite(x) ? `${fmt(x, 2)}${t ? ` (≤ ${t}${x <= t ? ', met' : ', missed'})` : ''}` : '—'} | ` +
      `${fmt(r.stats.p50)} | ${fmt(r.stats.p99)} |`
    );
  });
  const idleCells = idle
    ? sluiceProcs.map((n) => `${n}: ${fmt((100 * (idle.get(n)?.cpuSec ?? 0)) / IDLE_SECONDS, 2)} % of a core`)
    : [];
  return {
    points: [...per].filter(([, v]) => Number.isFinite(v)),
    text: [
      '#### The cost curve (--curve)',
      '',
      `Idle (${IDLE_SECONDS} s after the warm-up, nothing published): ${idleCells.join('; ') || '—'}.`,
      '',
      'Gross CPU of every Sluice process over each run (publish start to last delivery), per 1,000 ' +
        'deliveries; the ratio is against the 8,000/s point (against saturation for the 8,000/s point).',
      '',
      '| deliveries/s asked | delivered/s | Sluice cores | CPU-s per 1,000 | ratio (target) | p50 ms | p99 ms |',
      '|---|---:|---:|---:|---|---:|---:|',
      ...lines,
    ].join('\n'),
  };
}

bench.run(main);
