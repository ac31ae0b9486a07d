/**
 * Webhook dispatch benchmark, every piece its own OS process: Kafka (`sluice kafka` unless KAFKA_BROKERS is set),
 * `sluice start` or N `sluice ingress` (+ `sluice dispatcher`s), the receiver and load generator of harness/.
 *
 *   npm run bench:dispatch -- [--quick] [--big] [--only f1-single,f1-single-id,half-sat,f10-single,f1-batch,
 *       f10-batch,unhealthy,big] [--events N] [--repeat N] [--concurrency 64] [--batch-size 100] [--rate R]
 *       [--dispatchers N] [--ingresses N] [--workers N|auto] [--quiet-timeout 30] [--skip-hops] [--label current]
 *       [--results FILE] [--sluice-dir DIR] [--profile] [--check [--check-label check]] [--curve [--curve-seconds 15]]
 *
 * Default: every scenario but big and the curve's, the f* ones --repeat times (2). --profile: what each feature
 * costs (node --cpu-prof). --curve (label `curve`, no hops): fan-out 10 at 500, 2,000 and 8,000 deliveries/s, then
 * f10-single. --check: exit 1 when Sluice's CPU per 1,000 deliveries in f10-single (--curve: at each point) is over
 * 125 % of the `check` (`curve`) section's, made by `--only f10-single --skip-hops --label check`. `sluice start` runs
 * --workers (default: a worker per core; the curve: auto, as an operator's node does, with an unreported lead-in at
 * each point's rate until the node keeps its worker count, and the idle window once it is back to one). Writes the
 * `dispatch:<label>` block of bench/RESULTS.md (--quick, --check: only to --results FILE). Exits 1 on a lost delivery.
 */
import { existsSync, readdirSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { KAFKA_VERSION } from '../core/kafka/local-broker.ts';
import { freePort, freePorts } from '../core/net/free-port.ts';
import { BenchRun } from '../harness/bench.ts';
import type { Launched } from '../harness/children.ts';
import { checkLabel, printHelp, resultsFile, ROOT, say, sleep } from '../harness/cli.ts';
import { kafkaPid, settleGroups } from '../harness/kafka.ts';
import { ProcSampler, processTree, type Usage } from '../harness/proc-cpu.ts';
import type { PortSpec } from '../harness/receiver.ts';
import { provenance, table } from '../harness/report.ts';
import { writeDispatchSection, writeMarkedSection } from '../harness/results-section.ts';
import { RECEIVER_ENV, sluiceEnv, startDispatchers, waitReady } from '../harness/sluice.ts';
import { adminClient, bearerToken, type BenchClient, registerEndpoint, sluiceApi } from '../harness/sluice-api.ts';
import { fmt, median } from '../harness/stats.ts';
import { judgeCpu, recordedCpu } from './dispatch/cpu-check.ts';
import { featureShares } from './dispatch/feature-cost.ts';
import type { HopKafkaResult, HopKafkaSpec } from './dispatch/hop-kafka.ts';
import type { HopPostResult, HopPostSpec } from './dispatch/hop-post.ts';

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
    'skip-hops': { type: 'boolean' },
    check: { type: 'boolean', default: false },
    'check-label': { type: 'string' },
    label: { type: 'string' },
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
const LABEL = opt.label ?? (CURVE ? 'curve' : 'current');
const CHECK_LABEL = opt['check-label'] ?? (CURVE ? 'curve' : 'check');
checkLabel(LABEL);
const num = (v: string | undefined, otherwise: number) => (v === undefined ? otherwise : Number(v));
const size = (full: number, small: number) => num(opt.events, quick ? small : full);
const REPEAT = num(opt.repeat, quick ? 1 : 2);
const [CONCURRENCY, BATCH, INGRESSES] = [opt.concurrency, opt['batch-size'], opt.ingresses].map(Number);
const DISPATCHERS = INGRESSES > 0 ? Math.max(1, Number(opt.dispatchers)) : Number(opt.dispatchers);
const QUIET_MS = Number(opt['quiet-timeout']) * 1000;
const PAD = 200;
/** The cost curve's points (deliveries/s), how long each publishes, its unreported warm-up, the idle window. */
const CURVE_RATES = [500, 2000, 8000];
const CURVE_SECONDS = num(opt['curve-seconds'], quick ? 5 : 15);
const CURVE_WARM = { rate: 2000, seconds: quick ? 3 : 45 };
/**
 * Each curve point's unreported lead-in at its rate, repeated (up to 4 times) while the node's workers change; after
 * a change, one more of CURVE_JOINED_SECONDS: a new worker's V8 optimises the curve's paths over its first minute of
 * load, as the curve warm-up let the first do.
 */
const CURVE_LEAD_SECONDS = quick ? 3 : 20;
const CURVE_JOINED_SECONDS = quick ? 3 : 60;
const IDLE_SECONDS = quick ? 5 : 20;
/** The Sluice checkout measured (another one, e.g. a worktree of an older commit, for a baseline). */
const SLUICE_DIR = opt['sluice-dir'] ?? ROOT;
const RESULTS_MD = join(ROOT, 'bench/RESULTS.md');
if (opt.check && INGRESSES > 0) throw new Error('--check measures `sluice start`: it does not take --ingresses');

type Mode = 'ok' | '503' | 'hang';
interface Scenario {
  name: string;
  title: string;
  modes: Mode[];
  events: number;
  publish: 'single' | 'batch';
  model: 'closed' | 'open';
  runs: number;
  /** Open model: events/s (else --rate, or half of f1-single's saturation). */
  rate?: number;
  /** Every event published with its own id (the idempotent path: claim, event, published marker). */
  ids?: boolean;
}
const ok = (n: number): Mode[] => Array(n).fill('ok');
function scenario(name: string, title: string, modes: Mode[], events: number, more?: Partial<Scenario>): Scenario {
  return { name, title, modes, events, publish: 'single', model: 'closed', runs: 1, ...more };
}
/** A point of the cost curve: fan-out 10, open model, `deliveries` a second for `seconds`. */
function curvePoint(name: string, deliveries: number, seconds: number): Scenario {
  const title = `fan-out 10, single, open model at ${deliveries} deliveries/s`;
  return scenario(name, title, ok(10), (deliveries * seconds) / 10, { model: 'open', rate: deliveries / 10 });
}
const UNHEALTHY: Mode[] = [...ok(7), '503', '503', 'hang'];
const [repeated, batch] = [{ runs: REPEAT }, { runs: REPEAT, publish: 'batch' } as const];
const SCENARIOS: Scenario[] = [
  scenario('f1-single', 'fan-out 1, single publish', ok(1), size(20_000, 200), repeated),
  scenario(
    'f1-single-id',
    'fan-out 1, single publish, each with its own id (claim + event + published marker)',
    ok(1),
    size(20_000, 200),
    { ...repeated, ids: true },
  ),
  // Its events and rate come from this run's f1-single (or --events / --rate).
  scenario('half-sat', 'fan-out 1, single, open model at 50 % of saturation', ok(1), 0, { model: 'open' }),
  scenario('f10-single', 'fan-out 10, single publish', ok(10), size(10_000, 100), CURVE ? {} : repeated),
  scenario('f1-batch', `fan-out 1, batch publish (${BATCH}/request)`, ok(1), size(50_000, 400), batch),
  scenario('f10-batch', `fan-out 10, batch publish (${BATCH}/request)`, ok(10), size(15_000, 200), batch),
  scenario('unhealthy', 'fan-out 10: 7 ok, 2 answer 503 + Retry-After, 1 hangs', UNHEALTHY, size(10_000, 100)),
  ...CURVE_RATES.map((d) => curvePoint(`curve-${d}`, d, CURVE_SECONDS)),
  scenario('big', 'fan-out 10, single publish, big', ok(10), size(100_000, 100_000)),
];
const selected = CURVE
  ? [...CURVE_RATES.map((d) => `curve-${d}`), 'f10-single']
  : (opt.only?.split(',') ?? SCENARIOS.map((s) => s.name).filter((n) => (n === 'big' ? opt.big : !/^curve-/.test(n))));
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
scratch.keepLogs = opt.profile === true; // the profiles stay in the work directory
let sampler: ProcSampler | null = null;
bench.onShutdown(async () => sampler?.stop());
/** --profile: every Sluice process (cluster workers included) writes a .cpuprofile into <work>/prof. */
const PROF = opt.profile ? ['--cpu-prof', `--cpu-prof-dir=${join(scratch.path, 'prof')}`] : [];

/** A one-shot helper of bench/dispatch/: spec in, one IPC message out. */
function runOnce<T>(script: string, spec: object): Promise<T> {
  const c = children.forkTs(script, join(ROOT, 'bench/dispatch', script), [JSON.stringify(spec)]);
  return new Promise((resolve, reject) => {
    c.proc.once('message', (m) => resolve(m as T));
    c.proc.once('exit', (code) => reject(new Error(`${script} exited (${code}) without a result`)));
  });
}

const sum = <T>(xs: Iterable<T>, f: (x: T) => number) => [...xs].reduce((n, x) => n + f(x), 0);
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
  const metrics = (p: number) =>
    fetch(`http://127.0.0.1:${p}/metrics`).then(
      (r) => r.text(),
      () => '',
    );
  const texts = await Promise.all(adminPorts.map(metrics));
  return sum(texts, (t) => Number(/^sluice_deliveries_total\{outcome="deferred"\} (\d+)$/m.exec(t)?.[1] ?? 0));
}

const { call: receiver, proc: receiverProc } = bench.receiver();
const { call: load, proc: loadProc } = bench.load();
const listen = async (modes: Mode[]) =>
  (await receiver({ op: 'listen', ports: modes.map((m, i) => ({ name: `p${i}`, ...PORT[m] })) })).ports!;
/** What the receiver had of the healthy deliveries; `last`: the last first receipt (epoch ms; 0: none). */
async function receiverStats() {
  const { stats, latency } = await receiver({ op: 'stats' });
  const [unique, duplicates] = [sum(stats!, (p) => p.ok), sum(stats!, (p) => p.duplicates)];
  return { ports: stats!, unique, duplicates, ...latency!, last: Math.max(0, ...stats!.map((p) => p.lastOkAt ?? 0)) };
}

let liveEndpoints: string[] = [];
/** One run: fresh endpoints (the old ones deleted: the fan-out stays right), publish, wait, read. */
async function measure(sc: Scenario, run: number, rate: number) {
  await Promise.all(liveEndpoints.map((id) => api('DELETE', `/v1/webhooks/endpoints/${id}`)));
  const ports = await listen(sc.modes);
  liveEndpoints = await Promise.all(ports.map((p) => registerEndpoint(api, `http://127.0.0.1:${p}/hook`)));
  if (DISPATCHERS > 0) await sleep(1000); // every dispatcher's endpoint view sees the change
  const healthy = sc.modes.filter((m) => m === 'ok').length;
  const deferred0 = await deferredTotal();
  const [window, windowAt] = [sampler!.begin(), Date.now()];
  const { publish, model, events, ids } = sc;
  const spec = { base, client, publish, batchSize: BATCH, model, connections: CONCURRENCY, rate, events, ids };
  const lr = (await load({ op: 'publish', spec: { ...spec, padBytes: PAD } })).publish!;
  // The route answered before the scenarios began (batchAvailable): a 404 now is a fault.
  if (lr.batchUnavailable) throw new Error(`${sc.name}: the batch route answered 404 mid-run`);
  const expected = lr.accepted * healthy;
  const timedOut = await waitForDeliveries(expected, deferred0);
  const stats = await receiverStats();
  const usage = sampler!.end(window);
  const deferred = (await deferredTotal()) - deferred0;
  const deliveredPerSec = stats.last ? stats.unique / (Math.max(1, stats.last - lr.firstSentAt) / 1000) : 0;
  const [lost, wallSec] = [expected - stats.unique, (Date.now() - windowAt) / 1000];
  return { sc, run, load: lr, healthy, expected, stats, deliveredPerSec, lost, deferred, timedOut, usage, wallSec };
}
type RunResult = Awaited<ReturnType<typeof measure>>;

/** True when the deliveries (first 2xx over the ports) stopped coming before `expected` of them did. */
async function waitForDeliveries(expected: number, deferred0: number): Promise<boolean> {
  for (let last = -1, progressAt = Date.now(); ; await sleep(250)) {
    const n = sum(Object.values((await receiver({ op: 'progress' })).progress!), (x) => x);
    if (n >= expected) return false;
    if (n !== last) [last, progressAt] = [n, Date.now()];
    const quiet = Date.now() - progressAt;
    // A deferred delivery comes back through the 30 s rung: give those 30 s more.
    if (quiet > QUIET_MS && (quiet > QUIET_MS + 30_000 || (await deferredTotal()) === deferred0)) return true;
  }
}

async function main(): Promise<number> {
  const kafka = await bench.startKafka();
  const { brokers } = kafka;
  const kafkaJava = kafkaPid(kafka);
  // `sluice start` runs SLUICE_WORKERS cluster workers (default: the core count); its admin port serves their
  // sum, one port per worker follows it. --ingresses: single-process `sluice ingress` nodes in its place.
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const env: NodeJS.ProcessEnv = {
    ...sluiceEnv({ brokers, prefix, port, dataDir: scratch.dataDir() }),
    ...RECEIVER_ENV,
    SLUICE_WORKERS: opt.workers ?? (CURVE ? 'auto' : String(availableParallelism())),
  };
  const elastic = env.SLUICE_WORKERS === 'auto';
  // Admin ports: the node's, then one per worker it may run.
  const slots = elastic ? Number(process.env.SLUICE_WORKERS_MAX) || availableParallelism() : Number(env.SLUICE_WORKERS);
  const [what, count] = INGRESSES > 0 ? ['ingress', INGRESSES] : ['start', 1];
  say(`starting ${count} sluice ${what} (topic prefix ${prefix}) and ${DISPATCHERS} dispatcher(s)...`);
  const sluiceStartedAt = Date.now();
  const front: { name: string; adminPort: number; launched: Launched }[] = [];
  for (let i = 1; i <= count; i++) {
    const name = INGRESSES > 0 ? `ingress-${i}` : 'sluice';
    const adminPort = await freePorts(INGRESSES > 0 ? 1 : 1 + slots);
    const ports = { SLUICE_PORT: String(i === 1 ? port : await freePort()), SLUICE_ADMIN_PORT: String(adminPort) };
    const launched = children.spawn(name, bench.sluice, [what], { ...env, ...ports }, 'sluice', PROF);
    front.push({ name, adminPort, launched });
  }
  const dispatchers = await startDispatchers(children, bench.sluice, env, DISPATCHERS, null, PROF);
  for (const node of front) await waitReady(node.launched, node.name, node.adminPort);
  // The cluster workers of `sluice start` are the node children of its primary, all forked by now.
  /** The cluster workers `sluice start` runs now (0: one process, or `--ingresses`). */
  const workersNow = () => (INGRESSES > 0 ? 0 : Math.max(0, processTree(front[0].launched.proc.pid!).length - 1));
  const workers = workersNow();
  adminPorts = [...front, ...dispatchers].map((n) => n.adminPort);
  const startName = elastic ? 'sluice start (primary + workers)' : `sluice start (primary + ${workers} workers)`;
  const frontName = (name: string) => (INGRESSES > 0 ? name : workers > 0 ? startName : 'sluice start');
  sampler = new ProcSampler(() => {
    const m = new Map<string, number[]>(kafkaJava ? [['kafka (java)', [kafkaJava]]] : []);
    for (const n of front) m.set(frontName(n.name), processTree(n.launched.proc.pid!));
    for (const d of dispatchers) m.set(d.name, [d.launched.proc.pid!]);
    return m.set('receiver', [receiverProc.pid!]).set('load', [loadProc.pid!]);
  });
  client = await adminClient(bench.sluice, SLUICE_DIR, env, 'bench');
  const batchAvailable = (await api('POST', '/v1/webhooks/events/batch', { events: [] })).status !== 404;

  // Measure a settled system: a process joining a consumer group later would rebalance it mid-run
  // and repeat deliveries; and the first events pay for connections and JIT.
  const notes: string[] = [];
  const members = (INGRESSES > 0 ? 0 : Math.max(1, workers)) + DISPATCHERS;
  if (!(await settleGroups(brokers, prefix, members)))
    notes.push(`the delivery consumer groups were not Stable with ${members} members within 90 s; measured anyway.`);
  const warmUp = quick ? 50 : 1000;
  await measure(scenario('warm-up', 'warm-up', ok(1), warmUp), 0, 0);
  say(`warm-up: ${warmUp} events delivered (not reported)`);
  let idle: Map<string, Usage> | null = null;
  if (CURVE) {
    // V8 optimises the curve's paths (fan-out 10, open model), which the warm-up above barely touches, over
    // the first minute of such load, on threads of its own (0.2 of a core, falling to 0.02): that is start-up,
    // not the cost of a delivery, so it is paid here.
    const warm = curvePoint('curve-warm-up', CURVE_WARM.rate, CURVE_WARM.seconds);
    await measure(warm, 0, warm.rate!);
    say(`curve warm-up: ${fmt(warm.events * 10)} deliveries at ${fmt(CURVE_WARM.rate)}/s (not reported)`);
    await sleep(5000);
    // A node that grew in the warm-up retires its workers a minute after the load ends: idle is measured after.
    for (let waited = 0; workersNow() > 1 && waited < 120_000; waited += 1000) await sleep(1000);
    const w = sampler.begin();
    await sleep(IDLE_SECONDS * 1000);
    idle = sampler.end(w);
  }

  // Hop ceilings: signed POSTs from one process straight to the receiver; kafkajs against the broker.
  const hops: string[][] = [];
  const postCeiling = new Map<number, number>();
  if (!opt['skip-hops'] && !CURVE) {
    for (const endpoints of [1, 10]) {
      const [connections, posts] = endpoints === 1 ? [8, quick ? 1000 : 30_000] : [64, quick ? 2000 : 50_000];
      const spec: HopPostSpec = { ports: await listen(ok(endpoints)), connections, posts, padBytes: PAD };
      const r = await runOnce<HopPostResult>('hop-post.ts', spec);
      const s = await receiverStats();
      postCeiling.set(endpoints, s.unique / ((s.last! - r.startedAt) / 1000));
      const setup = `${endpoints} endpoint(s) × ${connections} connections, ${fmt(posts)} POSTs`;
      const rate = `${fmt(postCeiling.get(endpoints))} deliveries/s`;
      hops.push(['signed POST → receiver (hop-post.ts)', setup + (r.failed ? `, ${r.failed} failed` : ''), rate]);
    }
    const spec: HopKafkaSpec = { brokers, topic: `${prefix}.hop-kafka`, records: quick ? 5000 : 100_000 };
    const k = await runOnce<HopKafkaResult>('hop-kafka.ts', spec);
    const joinMs = `join + first fetch ${fmt(k.consumerJoinMs)} ms included`;
    const consume = `the same records, one consumer group, timed from run() (${joinMs})`;
    hops.push(
      ['Kafka produce (hop-kafka.ts)', k.setup, `${fmt(k.producePerSec)} records/s`],
      ['Kafka consume (hop-kafka.ts)', consume, `${fmt(k.consumePerSec)} records/s`],
      // Each event is 1 record on sluice.events and 1 DeliverySet (up to 100 endpoints) on sluice.deliveries.
      ...[1, 10].map((f) => [
        `Kafka-bound delivery ceiling, fan-out ${f}`,
        `produce rate × ${f}/2: each event is 1 event record + 1 delivery set of ${f}`,
        `≈ ${fmt((k.producePerSec * f) / 2)} deliveries/s`,
      ]),
    );
    for (const h of hops) say(h.join(' | '));
  }

  // The scenarios, in the order asked for (--curve: the curve's points, then saturation).
  const results: RunResult[] = [];
  const workersOf = new Map<RunResult, number>();
  /** A curve point's rate until `sluice start --workers auto` keeps its worker count, then Stable groups. */
  const leadIn = async (sc: Scenario) => {
    let changed = false;
    for (let round = 1; round <= 4; round++) {
      const before = workersNow();
      const seconds = changed ? CURVE_JOINED_SECONDS : CURVE_LEAD_SECONDS;
      const lead = curvePoint(`${sc.name}-lead-in`, sc.rate! * 10, seconds);
      await measure(lead, 0, lead.rate!);
      const after = workersNow();
      say(`${sc.name}: lead-in ${round}, ${seconds} s at its rate (unreported): ${before} → ${after} workers`);
      if (after === before) break;
      changed = true;
    }
    if (!(await settleGroups(brokers, prefix, Math.max(1, workersNow()) + DISPATCHERS)))
      notes.push(`${sc.name}: the delivery consumer groups were not Stable within 90 s of its lead-in.`);
  };
  const scenariosStartedAt = Date.now();
  for (const sc of selected.map((name) => SCENARIOS.find((s) => s.name === name)!)) {
    if (sc.publish === 'batch' && !batchAvailable) {
      notes.push(`${sc.name}: skipped, the batch route answered 404 (batch publish not available).`);
      continue;
    }
    let rate = 0;
    if (sc.model === 'open') {
      const saturation = median(results.filter((r) => r.sc.name === 'f1-single').map((r) => r.load.acceptedPerSec));
      rate = sc.rate ?? num(opt.rate, saturation / 2);
      if (!(rate > 0)) {
        notes.push(`${sc.name}: skipped, needs f1-single in the same run or --rate R.`);
        continue;
      }
      if (sc.rate === undefined) {
        sc.events = num(opt.events, Math.max(50, Math.round(rate * (quick ? 3 : 20))));
        const how = opt.rate ? '--rate' : '50 % of the median f1-single accepted/s';
        notes.push(`${sc.name}: open model at ${fmt(rate)} events/s (${how}), ${fmt(sc.events)} events.`);
      }
    }
    if (elastic && sc.rate !== undefined) await leadIn(sc);
    for (let run = 1; run <= sc.runs; run++) {
      const r = await measure(sc, run, rate);
      results.push(r);
      workersOf.set(r, workersNow());
      const { matched } = r.load;
      if (Object.keys(matched).some((k) => Number(k) !== sc.modes.length))
        notes.push(`${sc.name} run ${run}: matched_endpoints ≠ ${sc.modes.length}: ${JSON.stringify(matched)}.`);
      const got = `${fmt(r.stats.unique)}/${fmt(r.expected)} deliveries at ${fmt(r.deliveredPerSec)}/s`;
      say(`${sc.name} run ${run}/${sc.runs}: ${got}, p99 ${fmt(r.stats.p99)} ms${r.timedOut ? ', TIMED OUT' : ''}`);
    }
  }
  await Promise.all(liveEndpoints.map((id) => api('DELETE', `/v1/webhooks/endpoints/${id}`)));

  // The report.
  const ran = [...new Set(results.map((r) => r.sc))];
  const runsOf = (name: string) => results.filter((r) => r.sc.name === name);
  const procNames = [...new Set(results.flatMap((r) => [...r.usage.keys()]))];
  const sluiceProcs = procNames.filter((n) => /^(sluice|ingress|dispatcher)/.test(n));
  const cpuOf = (procs: string[]) => (r: RunResult) => sum(procs, (p) => r.usage.get(p)?.cpuSec ?? 0);
  /** CPU-s per 1,000 healthy deliveries over `rs` (default: of all Sluice processes); null: nothing delivered. */
  const perThousand = (rs: RunResult[], cpu = cpuOf(sluiceProcs)) => {
    const deliveries = sum(rs, (r) => r.stats.unique);
    return deliveries ? (sum(rs, cpu) * 1000) / deliveries : null;
  };
  const scenarioRows = results.map((r) => {
    const answered = r.sc.publish === 'single' ? ['202'] : ['200', '202'];
    const statuses = Object.entries(r.load.statuses).filter(([k]) => !answered.includes(k));
    const other = [
      ...statuses.map(([k, v]) => `${k}×${v}`),
      ...Object.entries(r.load.itemErrors).map(([k, v]) => `item ${k}×${v}`),
    ];
    const ceiling = r.sc.model === 'open' ? undefined : postCeiling.get(r.sc.modes.length === 1 ? 1 : 10);
    const pct = ceiling === undefined ? null : `${fmt((100 * r.deliveredPerSec) / ceiling)} %`;
    const lost = `${fmt(r.lost)}${r.timedOut ? ' (quiet timeout)' : ''}`;
    const { p50, p99, duplicates } = r.stats;
    const figures = [r.load.acceptedPerSec, r.deliveredPerSec, p50, p99, duplicates, r.deferred].map((x) => fmt(x));
    return [r.sc.name, r.run, `${fmt(r.load.accepted)} × ${r.healthy}`, ...figures, lost, pct, other.join(', ')];
  });
  const unhealthy = runsOf('unhealthy')[0];
  const ref = median(runsOf('f10-single').map((r) => r.deliveredPerSec)) / 10;
  if (unhealthy && Number.isFinite(ref)) {
    const { healthy, deliveredPerSec: got } = unhealthy;
    const perPort = unhealthy.stats.ports.map((p, i) => `${unhealthy.sc.modes[i]} ${fmt(p.requests)}`).join(', ');
    notes.push(
      `unhealthy: the ${healthy} healthy endpoints got ${fmt(got)} deliveries/s (${fmt(got / healthy)} per ` +
        `endpoint) vs ${fmt(ref * 10)}/s (${fmt(ref)} per endpoint) with 10 healthy (f10-single median): ` +
        `${fmt((100 * got) / healthy / ref)} % per endpoint. Received per port (repeats included): ${perPort}.`,
    );
  }
  const resourceRows = ran.map((sc) => {
    const rs = runsOf(sc.name);
    const cells = procNames.map((name) => {
      const us = rs.map((r) => r.usage.get(name)).filter((u): u is Usage => u !== undefined);
      const rss = Math.max(...us.map((u) => u.peakRssMb));
      return us.length === 0 ? null : `${fmt(rss)} MB · ${fmt(perThousand(rs, cpuOf([name])), 3)} s`;
    });
    return [sc.name, fmt(sum(rs, (r) => r.stats.unique)), ...cells, `${fmt(perThousand(rs), 3)} s`];
  });
  const spreadRows = ran.map((sc) => {
    const xs = runsOf(sc.name).map((r) => r.deliveredPerSec);
    return [sc.name, sc.title, xs.length, ...[Math.min(...xs), median(xs), Math.max(...xs)].map((x) => fmt(x))];
  });

  // --curve: the targets of issue 33.
  const curveRuns = CURVE ? [...CURVE_RATES.map((d) => `curve-${d}`), 'f10-single'].flatMap(runsOf) : [];
  const cost = new Map(curveRuns.map((r) => [r.sc.name, perThousand([r]) ?? Number.NaN]));
  const TARGETS: Record<string, number> = { 'curve-500': 1.5, 'curve-2000': 1.2, 'curve-8000': 1.2 };
  const curveRows = curveRuns.map((r) => {
    const { name } = r.sc;
    const against = name === 'f10-single' ? undefined : cost.get(name === 'curve-8000' ? 'f10-single' : 'curve-8000');
    const [x, t] = [cost.get(name)! / (against ?? Number.NaN), TARGETS[name]];
    const ratio = !Number.isFinite(x) ? null : t ? `${fmt(x, 2)} (≤ ${t}, ${x <= t ? 'met' : 'missed'})` : fmt(x, 2);
    const asked = name === 'f10-single' ? 'saturation (f10-single)' : fmt((r.sc.rate ?? 0) * 10);
    const cores = fmt(cpuOf(sluiceProcs)(r) / r.wallSec, 3);
    // What light load pays for is wake-ups (docs/decisions.md, issue 33): the main threads' waits per event.
    const wakeups = sum(sluiceProcs, (p) => r.usage.get(p)?.wakeups ?? 0) / Math.max(1, r.load.accepted);
    const cells = [asked, fmt(r.deliveredPerSec), cores, fmt(cost.get(name), 3), ratio];
    return [...cells, fmt(r.stats.p50), fmt(r.stats.p99), fmt(wakeups, 1), fmt(workersOf.get(r) ?? 0)];
  });
  const idleCells = sluiceProcs.map((n) => `${n}: ${fmt((100 * (idle?.get(n)?.cpuSec ?? 0)) / IDLE_SECONDS, 2)} %`);

  const { startedAt, load1 } = bench;
  const source = { command: bench.command('bench:dispatch'), sluiceDir: SLUICE_DIR, startedAt, load1 };
  const kafkaHow = kafka.external ? `already running (${brokers.join(',')})` : 'started by the bench (`sluice kafka`)';
  const inEach = elastic
    ? ' in each cluster worker of `--workers auto`; the curve gives their count'
    : workers > 0
      ? ` in each of ${workers} cluster workers`
      : '';
  const sluiceProcesses = [
    INGRESSES > 0
      ? `${INGRESSES} \`sluice ingress\` (the load publishes to the first)`
      : `\`sluice start\` (ingress + dispatcher${inEach})`,
    ...(DISPATCHERS ? [`${DISPATCHERS} \`sluice dispatcher\``] : []),
  ].join(' + ');
  const curveWarm = CURVE ? ` and ${CURVE_WARM.seconds} s at ${fmt(CURVE_WARM.rate)} deliveries/s, fan-out 10` : '';
  const scenarioHead = ['scenario', 'run', 'events × endpoints', 'accepted/s', 'delivered/s', 'p50 ms', 'p99 ms'];
  scenarioHead.push('dup', 'deferred', 'lost', '% of POST ceiling', 'other responses');
  const curveHead = ['deliveries/s asked', 'delivered/s', 'Sluice cores', 'CPU-s per 1,000', 'ratio (target)'];
  const section = [
    `### Run "${LABEL}": ${startedAt.toISOString().slice(0, 10)}`,
    '',
    ...provenance({ ...source, kafka: `Kafka ${KAFKA_VERSION} ${kafkaHow}` }),
    '',
    `Processes, each its own OS process on this machine: Kafka, ${sluiceProcesses}, the receiver, the load ` +
      `generator (harness/load.ts, ${CONCURRENCY} connections) and the hop probes. Measured once the delivery ` +
      `consumer groups were Stable with every process in them, after ${fmt(warmUp)} unreported warm-up events` +
      `${curveWarm}. The load generator counts every response by its status (batch answers per item) and ` +
      'stamps each event with its publish time; the receiver measures publish → first receipt per delivery.',
    '',
    '#### Hop ceilings (same run, before the scenarios)',
    '',
    ...table(['hop', 'setup', 'rate'], hops.length ? hops : [['(skipped: --skip-hops)', null, null]], 'llr'),
    '',
    '#### Scenarios',
    '',
    'events × healthy endpoints = expected deliveries. delivered/s: from the first publish to the last first ' +
      'receipt. Latency: publish (request sent) → first receipt. lost: expected − unique received. deferred: ' +
      '`sluice_deliveries_total{outcome="deferred"}` delta over all Sluice processes. The POST ceiling is one ' +
      `sending process; Sluice delivers from ${members} here${members > 1 ? ', so it can pass 100 %' : ''}.`,
    '',
    ...table(scenarioHead, scenarioRows, 'lrrrrrrrrrrl'),
    '',
    ...table(['scenario', '', 'runs', 'delivered/s min', 'median', 'max'], spreadRows, 'llrrrr'),
    ...(notes.length ? ['', ...notes.map((n) => `- ${n}`)] : []),
    '',
    '#### Per-process resources',
    '',
    'Each cell: peak RSS · CPU seconds (user + system, /proc, sampled every 500 ms) per 1,000 healthy ' +
      "deliveries, over the scenario's runs; a group of processes (cluster workers) counts as their sum.",
    '',
    ...table(['scenario', 'deliveries', ...procNames, 'all Sluice processes'], resourceRows),
    ...(!CURVE
      ? []
      : [
          '',
          '#### The cost curve (--curve)',
          '',
          `Idle (${IDLE_SECONDS} s after the warm-up, nothing published), % of a core: ${idleCells.join('; ')}.`,
          '',
          'Gross CPU of every Sluice process over each run (publish start to last delivery), per 1,000 ' +
            'deliveries; the ratio is against the 8,000/s point (against saturation for the 8,000/s point). ' +
            "Wake-ups: the voluntary context switches of the Sluice processes' main threads (/proc) per event " +
            'published (fan-out 10).',
          '',
          ...table([...curveHead, 'p50 ms', 'p99 ms', 'wake-ups per event', 'workers'], curveRows, 'lrrrlrrrr'),
        ]),
  ].join('\n');
  say(`\n${section}`);
  if (opt.profile) {
    await children.stopAll(['sluice']); // a process writes its profile as it exits
    say(`\n${featureSection(perThousand(results), scenariosStartedAt - sluiceStartedAt)}`);
  }

  // --check compares with the figures recorded in RESULTS.md and writes its verdict beside them.
  const points: [string, number | null][] = CURVE
    ? [...cost].filter(([, v]) => Number.isFinite(v))
    : [['f10-single', perThousand(runsOf('f10-single'))]];
  const verdicts = !opt.check
    ? []
    : points.map(([name, measured]) =>
        measured === null
          ? { ok: false, line: '--check: f10-single did not run or delivered nothing' }
          : judgeCpu(recordedCpu(RESULTS_MD, CHECK_LABEL, name), measured, name),
      );
  for (const v of verdicts) say(v.line);
  const checked = verdicts.filter((v) => 'measured' in v).map((v) => `- ${v.line.replace(/^--check: /, '')}`);
  const head = `### The last \`--check\`, against the \`${CHECK_LABEL}\` section`;
  const checkSection = [head, '', ...provenance(source), '', ...checked];
  if (opt.check && !quick) writeMarkedSection(RESULTS_MD, 'dispatch-check:last', checkSection.join('\n'));
  const file = resultsFile(opt.results, quick || opt.check === true);
  if (file) writeDispatchSection(file, LABEL, section);
  say(file ? `\nwritten to ${file} (label "${LABEL}")` : '\n(nothing written: pass --results FILE)');

  const lossy = results.filter((r) => r.lost > 0).map((r) => `${r.sc.name} run ${r.run}: ${r.lost}`);
  if (lossy.length > 0) process.stderr.write(`lost deliveries among healthy endpoints: ${lossy.join(', ')}\n`);
  return lossy.length > 0 || verdicts.some((v) => !v.ok) ? 1 : 0;
}

/** --profile: what each feature costs, from the Sluice processes' profiles (dispatch/feature-cost.ts). */
function featureSection(perThousand: number | null, skipMs: number): string {
  const dir = join(scratch.path, 'prof');
  const files = existsSync(dir) ? readdirSync(dir).map((f) => join(dir, f)) : [];
  if (files.length === 0 || perThousand === null) return '(--profile: no profiles or no deliveries to read)';
  // Each profile starts with its process: skip its start-up, endpoint registration and warm-up.
  const { busyMs, shares } = featureShares(files, skipMs);
  const rows = shares.map(([name, share]) => [name, `${fmt(100 * share, 1)} %`, fmt(share * perThousand, 3)]);
  return [
    `#### What each feature costs (profiles of this run, ${fmt(busyMs / 1000, 1)} busy CPU-s after the warm-up)`,
    '',
    `All Sluice processes: ${fmt(perThousand, 3)} CPU-s per 1,000 deliveries over the scenarios (profiling ` +
      'itself adds some). A sample counts for a feature when its code is anywhere on the stack, so a row ' +
      'includes what it calls (crypto, socket writes) and rows overlap.',
    '',
    ...table(['feature', 'share of busy CPU', 'CPU-s per 1,000 deliveries'], rows),
  ].join('\n');
}

bench.run(main);
