/**
 * Webhook dispatch benchmark with every piece its own OS process, as an operator runs them:
 * Kafka (`sluice kafka`, unless KAFKA_BROKERS is set), `sluice start` (+ `--dispatchers N` extra
 * `sluice dispatcher` members), a node:http receiver (bench/dispatch/receiver.ts), a Node load
 * generator (bench/dispatch/load.ts) and the hop-ceiling probes (bench/dispatch/hop-*.ts).
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
 *       [--curve]            the cost curve (label `curve`, hops skipped): idle for 20 s, then open-model
 *                            runs at 500, 2,000 and 8,000 deliveries/s (fan-out 10, 15 s each), then
 *                            f10-single at saturation; prints CPU-s per 1,000 deliveries at each and their
 *                            ratios. With --check: each point against the `curve` section (+25 %)
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
import { execFile, fork, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, readdirSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, release, totalmem, type } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { KAFKA_VERSION } from '../core/kafka/local-broker.ts';
import { freePort, freePorts } from '../core/net/free-port.ts';
import type {
  HopKafkaResult,
  HopKafkaSpec,
  HopPostResult,
  HopPostSpec,
  LoadRequest,
  LoadResult,
  LoadSpec,
  PortMode,
  PortStats,
  ReceiverRequest,
  ReceiverStats,
} from './dispatch/ipc.ts';
import { rpc } from './harness/ipc.ts';
import { ProcSampler, processTree, type Usage } from './harness/proc-cpu.ts';
import { median } from './harness/stats.ts';
import { writeSection } from './dispatch/results.ts';
import { judgeCpu, recordedCpu } from './dispatch/cpu-check.ts';
import { shebangNodeFlags } from '../cli/heap.ts';
import { featureShares } from './dispatch/feature-cost.ts';
import { benchCommand, measuredCommit, writeMarkedSection } from './results-section.ts';
import { waitForLine } from './harness/children.ts';
import { checkLabel, printHelp } from './harness/cli.ts';
import { dropBenchTopics, kafkaPid as kafkaJavaPid, settleGroups } from './harness/kafka.ts';
import { Scratch } from './harness/scratch.ts';
import { RECEIVER_ENV, sluiceEnv, waitReady } from './harness/sluice.ts';
import { fmt } from './state/report.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const RUN_TS = join(ROOT, 'bin/run-ts.js');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const say = (line = '') => process.stdout.write(`${line}\n`);

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
/** How long each point of the curve publishes, and how long idle is sampled. */
const CURVE_SECONDS = opt['curve-seconds'] ? Number(opt['curve-seconds']) : quick ? 5 : 15;
const IDLE_SECONDS = quick ? 5 : 20;
const size = (full: number, small: number) => (opt.events ? Number(opt.events) : quick ? small : full);
const REPEAT = opt.repeat ? Number(opt.repeat) : quick ? 1 : 2;
const CONCURRENCY = Number(opt.concurrency);
const BATCH = Number(opt['batch-size']);
const INGRESSES = Number(opt.ingresses);
/** Separate `sluice dispatcher` processes: --dispatchers, and at least one beside separate ingresses. */
const DISPATCHERS = INGRESSES > 0 ? Math.max(1, Number(opt.dispatchers)) : Number(opt.dispatchers);
const QUIET_MS = Number(opt['quiet-timeout']) * 1000;
const PAD = 200;
/**
 * The Sluice checkout whose processes are measured (another one, e.g. a worktree of an older commit, for a
 * baseline).
 */
const SLUICE_DIR = opt['sluice-dir'] ?? ROOT;
const SLUICE = join(SLUICE_DIR, 'bin/sluice.js');
checkLabel(opt.label);
if (opt.check && INGRESSES > 0) throw new Error('--check measures `sluice start`: it does not take --ingresses');

interface Scenario {
  name: string;
  title: string;
  modes: PortMode[];
  publish: 'single' | 'batch';
  model: 'closed' | 'open';
  events: number;
  runs: number;
  /** Open model: events/s (else --rate, or half of f1-single's saturation). */
  rate?: number;
  /** Every event published with its own id (the idempotent path: claim, event, published marker). */
  ids?: boolean;
}
const ok = (n: number): PortMode[] => Array(n).fill('ok');
const SCENARIOS: Scenario[] = [
  {
    name: 'f1-single',
    title: 'fan-out 1, single publish',
    modes: ok(1),
    publish: 'single',
    model: 'closed',
    events: size(20_000, 200),
    runs: REPEAT,
  },
  {
    name: 'f1-single-id',
    title: 'fan-out 1, single publish, each with its own id (claim + event + published marker)',
    modes: ok(1),
    publish: 'single',
    model: 'closed',
    events: size(20_000, 200),
    runs: REPEAT,
    ids: true,
  },
  // events and rate are set from this run's f1-single runs (or --rate / --events).
  {
    name: 'half-sat',
    title: 'fan-out 1, single, open model at 50 % of saturation',
    modes: ok(1),
    publish: 'single',
    model: 'open',
    events: 0,
    runs: 1,
  },
  {
    name: 'f10-single',
    title: 'fan-out 10, single publish',
    modes: ok(10),
    publish: 'single',
    model: 'closed',
    events: size(10_000, 100),
    runs: REPEAT,
  },
  {
    name: 'f1-batch',
    title: `fan-out 1, batch publish (${BATCH}/request)`,
    modes: ok(1),
    publish: 'batch',
    model: 'closed',
    events: size(50_000, 400),
    runs: REPEAT,
  },
  {
    name: 'f10-batch',
    title: `fan-out 10, batch publish (${BATCH}/request)`,
    modes: ok(10),
    publish: 'batch',
    model: 'closed',
    events: size(15_000, 200),
    runs: REPEAT,
  },
  {
    name: 'unhealthy',
    title: 'fan-out 10: 7 ok, 2 answer 503 + Retry-After, 1 hangs',
    modes: [...ok(7), '503', '503', 'hang'],
    publish: 'single',
    model: 'closed',
    events: size(10_000, 100),
    runs: 1,
  },
  ...CURVE_RATES.map(
    (d): Scenario => ({
      name: `curve-${d}`,
      title: `fan-out 10, single, open model at ${d} deliveries/s`,
      modes: ok(10),
      publish: 'single',
      model: 'open',
      rate: d / 10,
      events: (d / 10) * CURVE_SECONDS,
      runs: 1,
    }),
  ),
  {
    name: 'big',
    title: 'fan-out 10, single publish, big',
    modes: ok(10),
    publish: 'single',
    model: 'closed',
    events: size(100_000, 100_000),
    runs: 1,
  },
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

// ---------------------------------------------------------------- child processes

const scratch = new Scratch('bench-dispatch');
const work = scratch.path;
/** stage: the order of shutdown (0 first): bench helpers, then Sluice, then Kafka. */
const children: { name: string; proc: ChildProcess; stage: 0 | 1 | 2 }[] = [];

function track(name: string, proc: ChildProcess, stage: 0 | 1 | 2): ChildProcess {
  children.push({ name, proc, stage });
  return proc;
}

/** A `node bin/sluice.js …` child; its stdout and stderr go to <work>/<name>.log. */
function launch(
  name: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  stage: 1 | 2,
): { proc: ChildProcess; log: string } {
  const log = join(work, `${name}.log`);
  const out = createWriteStream(log);
  // --profile: every Sluice process (cluster workers included) writes a .cpuprofile into <work>/prof.
  const prof = opt.profile && name !== 'kafka' ? ['--cpu-prof', `--cpu-prof-dir=${join(work, 'prof')}`] : [];
  // Run as the tree's `sluice` executable would run it (the Node flags of its #! line).
  const flags = name === 'kafka' ? [] : shebangNodeFlags(SLUICE);
  const proc = spawn(process.execPath, [...flags, ...prof, SLUICE, ...args], {
    cwd: SLUICE_DIR,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (name !== 'kafka') sluiceStartedAt ??= Date.now();
  proc.stdout!.pipe(out);
  proc.stderr!.pipe(out);
  return { proc: track(name, proc, stage), log };
}

/** When the first Sluice process started, and when the first reported scenario did (for --profile). */
let sluiceStartedAt: number | undefined;
let scenariosStartedAt: number | undefined;

/** A bench helper (TypeScript, through bin/run-ts.js) with an IPC channel. */
function forkTs(name: string, script: string, args: string[] = []): ChildProcess {
  return track(
    name,
    fork(RUN_TS, [join(ROOT, 'bench/dispatch', script), ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    }),
    0,
  );
}

/** A one-shot helper: spec in, one IPC message out. */
function runOnce<T>(script: string, spec: object): Promise<T> {
  const proc = forkTs(script, script, [JSON.stringify(spec)]);
  return new Promise((resolve, reject) => {
    proc.once('message', (m) => resolve(m as T));
    proc.once('exit', (code) => reject(new Error(`${script} exited (${code}) without a result`)));
  });
}

async function stopProc(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  proc.kill('SIGTERM');
  const timer = setTimeout(() => proc.kill('SIGKILL'), 20_000);
  await exited;
  clearTimeout(timer);
}

let brokers: string[] = [];
let prefix = '';
let externalKafka = false;

let sampler: ProcSampler | null = null;
let shuttingDown = false;
/** Stops the children (helpers, then Sluice, then Kafka) and exits; the first call wins. */
async function shutdown(code: number): Promise<void> {
  if (shuttingDown) return;
  shuttingDown = true;
  sampler?.stop();
  for (const stage of [0, 1, 2] as const) {
    await Promise.all(children.filter((c) => c.stage === stage).map((c) => stopProc(c.proc)));
    if (stage === 1 && externalKafka && prefix) await dropBenchTopics(brokers, prefix);
  }
  // Exiting removes the work directory: Kafka's data and the view stores always; the logs (and the
  // CPU profiles of --profile) stay after an error or a signal.
  scratch.keepLogs = !(code === 0 || code === 1) || Boolean(opt.profile);
  process.exit(code);
}
for (const [signal, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
] as const) {
  process.on(signal, () => {
    process.stderr.write(`${signal}: stopping the child processes\n`);
    void shutdown(code);
  });
}

// ---------------------------------------------------------------- Sluice API

let base = '';
let client = { client_id: '', client_secret: '' };
let token = { value: '', at: 0 };

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  if (path !== '/v1/auth/token' && Date.now() - token.at > 10 * 60_000) await refreshToken();
  const headers: Record<string, string> = body === undefined ? {} : { 'content-type': 'application/json' };
  if (path !== '/v1/auth/token') headers.authorization = `Bearer ${token.value}`;
  const res = await fetch(base + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  try {
    return { status: res.status, json: text ? JSON.parse(text) : null };
  } catch {
    return { status: res.status, json: text };
  }
}

async function refreshToken(): Promise<void> {
  // The ingress may not have read the client a created a moment ago: retry briefly.
  for (let i = 0; ; i++) {
    const r = await api('POST', '/v1/auth/token', { grant_type: 'client_credentials', ...client });
    if (r.status === 200) {
      token = { value: r.json.access_token, at: Date.now() };
      return;
    }
    if (i >= 40) throw new Error(`POST /v1/auth/token answered ${r.status}: ${JSON.stringify(r.json)}`);
    await sleep(250);
  }
}

let adminPorts: number[] = [];
/** sluice_deliveries_total{outcome="deferred"} summed over every Sluice process (missing = 0). */
async function deferredTotal(): Promise<number> {
  let sum = 0;
  for (const port of adminPorts) {
    try {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const m = /^sluice_deliveries_total\{outcome="deferred"\} (\d+)$/m.exec(text);
      sum += m ? Number(m[1]) : 0;
    } catch {
      /* a process without an admin port: counts 0 */
    }
  }
  return sum;
}

// ---------------------------------------------------------------- the run

interface RunResult {
  sc: Scenario;
  run: number;
  load: LoadResult;
  healthy: number;
  expected: number;
  stats: ReceiverStats;
  deliveredPerSec: number;
  lost: number;
  deferred: number;
  timedOut: boolean;
  usage: Map<string, Usage>;
  /** Wall seconds of the run's CPU window (publish start to the last delivery). */
  wallSec: number;
}

async function main(): Promise<number> {
  const startedAt = new Date();
  const load1 = loadavg()[0];

  // 1. Kafka
  if (process.env.KAFKA_BROKERS) {
    brokers = process.env.KAFKA_BROKERS.split(',');
    externalKafka = true;
  } else {
    const port = await freePorts(2); // the broker's port and its controller's, port + 1
    say(`starting Kafka on 127.0.0.1:${port} (sluice kafka)...`);
    const k = launch(
      'kafka',
      ['kafka', '--port', String(port), '--data-dir', scratch.kafkaDir(), '--fresh'],
      process.env,
      2,
    );
    await waitForLine(k, /Kafka broker ready/, 240_000, 'sluice kafka');
    brokers = [`127.0.0.1:${port}`];
  }
  const kafkaLauncher = children.find((c) => c.name === 'kafka');
  const kafkaPid = kafkaJavaPid({ brokers, launched: kafkaLauncher ?? null });

  // 2. receiver and load generator
  const receiverProc = forkTs('receiver', 'receiver.ts');
  const receiver = rpc<ReceiverRequest, { ports?: number[]; stats?: ReceiverStats }>(receiverProc);
  const listen = async (modes: PortMode[]) => (await receiver({ op: 'listen', modes })).ports!;
  const receiverStats = async (latency: boolean) => (await receiver({ op: 'stats', latency })).stats!;
  const loadProc = forkTs('load', 'load.ts');
  const load = rpc<LoadRequest, { result: LoadResult }>(loadProc);

  // 3. Sluice
  prefix = `bench-${randomBytes(4).toString('hex')}`;
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...sluiceEnv({ brokers, prefix, port, dataDir: scratch.dataDir() }),
    ...RECEIVER_ENV,
    ...(opt.workers ? { SLUICE_WORKERS: opt.workers } : {}),
  };
  // `sluice start` may run several worker processes (SLUICE_WORKERS, default the core count);
  // with --ingresses, N single-process `sluice ingress` nodes take its place.
  const front: { name: string; proc: ChildProcess; log: string; adminPort: number }[] = [];
  if (INGRESSES > 0) {
    say(`starting ${INGRESSES} sluice ingress (topic prefix ${prefix}) and ${DISPATCHERS} dispatcher(s)...`);
    for (let i = 1; i <= INGRESSES; i++) {
      const [p, ap] = i === 1 ? [port, await freePort()] : await Promise.all([freePort(), freePort()]);
      const name = `ingress-${i}`;
      const node = launch(name, ['ingress'], { ...env, SLUICE_PORT: String(p), SLUICE_ADMIN_PORT: String(ap) }, 1);
      front.push({ name, ...node, adminPort: ap });
    }
  } else {
    // The node's port (every worker summed, served by the primary) and one per worker after it.
    const adminPort = await freePorts(1 + (opt.workers ? Number(opt.workers) : availableParallelism()));
    say(`starting sluice start (topic prefix ${prefix}) and ${DISPATCHERS} extra dispatcher(s)...`);
    const node = launch(
      'sluice',
      ['start'],
      { ...env, SLUICE_PORT: String(port), SLUICE_ADMIN_PORT: String(adminPort) },
      1,
    );
    front.push({ name: 'sluice', ...node, adminPort });
  }
  base = `http://127.0.0.1:${port}`;
  const dispatchers: ChildProcess[] = [];
  const dispatcherAdminPorts: number[] = [];
  for (let i = 1; i <= DISPATCHERS; i++) {
    const ap = await freePort();
    dispatcherAdminPorts.push(ap);
    const d = launch(`dispatcher-${i}`, ['dispatcher'], { ...env, SLUICE_ADMIN_PORT: String(ap) }, 1);
    dispatchers.push(d.proc);
    await waitForLine(d, /dispatcher running/, 120_000, `dispatcher ${i}`);
  }
  for (const node of front) await waitReady(node, node.name, node.adminPort);
  // Cluster workers of `sluice start`, if any, are the node children of the primary; all forked by now.
  const sluiceWorkers = INGRESSES > 0 ? 0 : processTree(front[0].proc.pid!).length - 1;
  // `sluice start`'s admin port serves the sum of its workers (its /readyz: all of them ready).
  adminPorts = front.map((n) => n.adminPort);
  adminPorts.push(...dispatcherAdminPorts);

  const frontName = (node: (typeof front)[number]) =>
    INGRESSES > 0
      ? node.name
      : sluiceWorkers > 0
        ? `sluice start (primary + ${sluiceWorkers} workers)`
        : 'sluice start';
  sampler = new ProcSampler(() => {
    const m = new Map<string, number[]>();
    if (kafkaPid) m.set('kafka (java)', [kafkaPid]);
    for (const node of front) m.set(frontName(node), processTree(node.proc.pid!));
    dispatchers.forEach((d, i) => {
      m.set(`dispatcher-${i + 1}`, [d.pid!]);
    });
    m.set('receiver', [receiverProc.pid!]);
    m.set('load', [loadProc.pid!]);
    return m;
  });

  // 4. credential
  const created = await promisify(execFile)(
    process.execPath,
    [SLUICE, 'admin', 'create-client', '--tenant', 'bench', '--role', 'admin', '--json'],
    { cwd: SLUICE_DIR, env },
  );
  client = JSON.parse(created.stdout.split('\n').find((l) => l.startsWith('{'))!);
  await refreshToken();

  const probe = await api('POST', '/v1/webhooks/events/batch', { events: [] });
  const batchAvailable = probe.status !== 404;
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
  await measure(
    { name: 'warm-up', title: 'warm-up', modes: ok(1), publish: 'single', model: 'closed', events: warmUp, runs: 1 },
    0,
    0,
  );
  say(`warm-up: ${warmUp} events delivered (not reported)`);

  // --curve: what each process costs doing nothing, after the warm-up has settled.
  let idle: Map<string, Usage> | null = null;
  if (CURVE) {
    await sleep(5000);
    const w = sampler!.begin();
    await sleep(IDLE_SECONDS * 1000);
    idle = sampler!.end(w);
    say(`idle: ${[...idle].map(([n, u]) => `${n} ${fmt((100 * u.cpuSec) / IDLE_SECONDS, 1)} %`).join(', ')}`);
  }

  // 7. hop ceilings
  const hops: string[] = [];
  const postCeiling = new Map<number, number>();
  if (!opt['skip-hops']) {
    for (const [endpoints, connections, posts] of [
      [1, 8, quick ? 1000 : 30_000],
      [10, 64, quick ? 2000 : 50_000],
    ]) {
      const ports = await listen(ok(endpoints));
      const r = await runOnce<HopPostResult>('hop-post.ts', {
        ports,
        connections,
        posts,
        padBytes: PAD,
      } satisfies HopPostSpec);
      const s = await receiverStats(false);
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
    const k = await runOnce<HopKafkaResult>('hop-kafka.ts', {
      brokers,
      topic: `${prefix}.hop-kafka`,
      records,
      recordBytes: 600,
      batch: 500,
      producers: 4,
      partitions: 6,
    } satisfies HopKafkaSpec);
    hops.push(
      `| Kafka produce (hop-kafka.ts) | ${fmt(records)} records of ~600 B, acks=-1, ` +
        `one request in flight, 4 producers × batches of 500, 6 partitions | ` +
        `${fmt(k.producePerSec)} records/s |`,
    );
    hops.push(
      `| Kafka consume (hop-kafka.ts) | the same records, one consumer group, ` +
        `timed from run() (join + first fetch ${fmt(k.consumerJoinMs)} ms included) | ` +
        `${fmt(k.consumePerSec)} records/s |`,
    );
    // Each event is 1 record on sluice.events and 1 DeliverySet (up to 100 endpoints) on sluice.deliveries.
    for (const f of [1, 10])
      hops.push(
        `| Kafka-bound delivery ceiling, fan-out ${f} | produce rate × ${f}/2: ` +
          `each event is 1 event record + 1 delivery set of ${f} | ` +
          `≈ ${fmt((k.producePerSec * f) / 2)} deliveries/s |`,
      );
    say(hops.slice(-4).join('\n'));
  }

  // 8. scenarios
  const results: RunResult[] = [];
  scenariosStartedAt = Date.now();
  // In the order asked for (--curve: the curve's points, then saturation).
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
      const matchedOff = Object.keys(lr.matched).filter((k) => Number(k) !== sc.modes.length);
      if (matchedOff.length > 0)
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

  /**
   * One run: fresh endpoints (the old ones deleted, so the fan-out stays right), publish, wait, read. Null: no batch
   * route.
   */
  async function measure(sc: Scenario, run: number, rate: number): Promise<RunResult | null> {
    await Promise.all(liveEndpoints.map((id) => api('DELETE', `/v1/webhooks/endpoints/${id}`)));
    const ports = await listen(sc.modes);
    liveEndpoints = await Promise.all(
      ports.map(async (p) => {
        const r = await api('POST', '/v1/webhooks/endpoints', {
          url: `http://127.0.0.1:${p}/hook`,
          events: ['inference.completed'],
        });
        if (r.status !== 201 || r.json.state !== 'ACTIVE')
          throw new Error(`registering an endpoint answered ${r.status}: ${JSON.stringify(r.json)}`);
        return r.json.id as string;
      }),
    );
    if (DISPATCHERS > 0) await sleep(1000); // every dispatcher's endpoint view sees the change
    const healthy = sc.modes.filter((m) => m === 'ok').length;
    const deferred0 = await deferredTotal();
    const window = sampler!.begin();
    const windowAt = Date.now();
    const spec: LoadSpec = {
      base,
      clientId: client.client_id,
      clientSecret: client.client_secret,
      publish: sc.publish,
      batchSize: BATCH,
      model: sc.model,
      connections: CONCURRENCY,
      rate,
      events: sc.events,
      padBytes: PAD,
      ...(sc.ids ? { ids: true } : {}),
    };
    const lr = (await load({ op: 'run', spec })).result;
    if (lr.batchUnavailable) {
      sampler!.end(window);
      return null;
    }
    const expected = lr.accepted * healthy;
    const { stats, timedOut } = await waitForDeliveries(expected, deferred0);
    const usage = sampler!.end(window);
    const deferred = (await deferredTotal()) - deferred0;
    const deliveredPerSec = stats.last ? stats.unique / (Math.max(1, stats.last - lr.firstSentAt) / 1000) : 0;
    return {
      sc,
      run,
      load: lr,
      healthy,
      expected,
      stats,
      deliveredPerSec,
      lost: expected - stats.unique,
      deferred,
      timedOut,
      usage,
      wallSec: (Date.now() - windowAt) / 1000,
    };
  }

  /** --profile: what each feature costs, from the Sluice processes' profiles (feature-cost.ts). */
  function featureSection(rs: RunResult[], names: string[]): string {
    const dir = join(work, 'prof');
    const files = existsSync(dir) ? readdirSync(dir).map((f) => join(dir, f)) : [];
    const delivered = rs.reduce((n, r) => n + r.stats.unique, 0);
    const cpu = rs.reduce((n, r) => n + names.reduce((m, p) => m + (r.usage.get(p)?.cpuSec ?? 0), 0), 0);
    if (files.length === 0 || delivered === 0) return '(--profile: no profiles or no deliveries to read)';
    const perThousand = (cpu * 1000) / delivered;
    // Each profile starts with its process: skip its start-up, endpoint registration and warm-up.
    const skipMs = (scenariosStartedAt ?? 0) - (sluiceStartedAt ?? 0);
    const { busyMs, shares } = featureShares(files, { skipMs });
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

  async function waitForDeliveries(
    expected: number,
    deferred0: number,
  ): Promise<{ stats: ReceiverStats; timedOut: boolean }> {
    let last = -1;
    let progressAt = Date.now();
    for (;;) {
      const s = await receiverStats(false);
      if (s.unique >= expected) return { stats: await receiverStats(true), timedOut: false };
      if (s.unique !== last) {
        last = s.unique;
        progressAt = Date.now();
      }
      const quiet = Date.now() - progressAt;
      // A deferred delivery comes back through the 30 s rung: give those 30 s more.
      if (quiet > QUIET_MS && (quiet > QUIET_MS + 30_000 || (await deferredTotal()) === deferred0))
        return { stats: await receiverStats(true), timedOut: true };
      await sleep(250);
    }
  }

  // 10. report
  const ceilingFor = (sc: Scenario) => postCeiling.get(sc.modes.length === 1 ? 1 : 10) ?? null;
  const scenarioRows = results.map((r) => {
    const others = Object.entries(r.load.statuses).filter(
      ([k]) => !(r.sc.publish === 'single' ? ['202'] : ['200', '202']).includes(k),
    );
    const itemErrs = Object.entries(r.load.itemErrors).map(([k, v]) => `item ${k}×${v}`);
    const ceiling = ceilingFor(r.sc);
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
  const spreadRows = [...new Set(results.map((r) => r.sc))].map((sc) => {
    const xs = results.filter((r) => r.sc === sc).map((r) => r.deliveredPerSec);
    return (
      `| ${sc.name} | ${sc.title} | ${xs.length} | ${fmt(Math.min(...xs))} | ` +
      `${fmt(median(xs))} | ${fmt(Math.max(...xs))} |`
    );
  });
  const unhealthy = results.find((r) => r.sc.name === 'unhealthy');
  const allHealthy = results.filter((r) => r.sc.name === 'f10-single');
  if (unhealthy && allHealthy.length > 0) {
    const ref = median(allHealthy.map((r) => r.deliveredPerSec));
    const perPort = unhealthy.stats.ports.map((p: PortStats) => `${p.mode} ${fmt(p.received)}`).join(', ');
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
  const resourceRows = [...new Set(results.map((r) => r.sc))].map((sc) => {
    const rs = results.filter((r) => r.sc === sc);
    const delivered = rs.reduce((n, r) => n + r.stats.unique, 0);
    const perThousand = (cpu: number) => fmt(delivered ? (cpu * 1000) / delivered : null, 3);
    const cells = procNames.map((name) => {
      const us = rs.map((r) => r.usage.get(name)).filter((u): u is Usage => u !== undefined);
      if (us.length === 0) return '—';
      const cpu = us.reduce((n, u) => n + u.cpuSec, 0);
      return `${fmt(Math.max(...us.map((u) => u.peakRssMb)))} MB · ${perThousand(cpu)} s`;
    });
    const sluiceCpu = rs.reduce((n, r) => n + sluiceProcs.reduce((m, p) => m + (r.usage.get(p)?.cpuSec ?? 0), 0), 0);
    return `| ${sc.name} | ${fmt(delivered)} | ${cells.join(' | ')} | ${perThousand(sluiceCpu)} s |`;
  });

  const sluiceCpuOf = (r: RunResult) => sluiceProcs.reduce((m, p) => m + (r.usage.get(p)?.cpuSec ?? 0), 0);
  const curve = CURVE ? curveSection(results, sluiceCpuOf, idle, sluiceProcs) : null;
  const command = benchCommand('bench:dispatch', ROOT, externalKafka ? brokers : null);
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
    `Machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ` +
      `${fmt(totalmem() / 2 ** 30, 1)} GiB, ${type()} ${release()}, Node ${process.version}; ` +
      `Kafka ${KAFKA_VERSION} ${kafkaHow}; ${startedAt.toISOString()}; 1-min load average at start ${fmt(load1, 2)}.`,
    `Processes: Kafka, ${sluiceProcesses}, ` +
      `the receiver, the load generator (${CONCURRENCY} connections) and the hop probes, ` +
      'each its own OS process on this machine. ' +
      'Measured once the delivery consumer groups were Stable with every process in them ' +
      `and after a warm-up of ${fmt(warmUp)} unreported events.`,
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
    // A process writes its profile as it exits.
    await Promise.all(children.filter((c) => c.stage === 1).map((c) => stopProc(c.proc)));
    say(`\n${featureSection(results, sluiceProcs)}`);
  }

  // --check compares with the figure recorded in RESULTS.md and writes nothing there (unless --results).
  let checkFailed = false;
  const verdicts: string[] = [];
  if (opt.check && curve) {
    for (const [name, measured] of curve.points) {
      const verdict = judgeCpu(recordedCpu(join(ROOT, 'bench/RESULTS.md'), opt['check-label']!, name), measured, name);
      say(verdict.line);
      verdicts.push(verdict.line);
      checkFailed ||= !verdict.ok;
    }
  } else if (opt.check) {
    const f10 = results.filter((r) => r.sc.name === 'f10-single');
    const delivered = f10.reduce((n, r) => n + r.stats.unique, 0);
    const cpu = f10.reduce((n, r) => n + sluiceCpuOf(r), 0);
    if (delivered === 0) {
      say('--check: f10-single did not run or delivered nothing');
      checkFailed = true;
    } else {
      const verdict = judgeCpu(
        recordedCpu(join(ROOT, 'bench/RESULTS.md'), opt['check-label']!, 'f10-single'),
        (cpu * 1000) / delivered,
        'f10-single',
      );
      say(verdict.line);
      verdicts.push(verdict.line);
      checkFailed = !verdict.ok;
    }
  }
  // --check leaves the recorded figures alone and writes its own verdict beside them.
  if (opt.check && !quick)
    writeMarkedSection(
      join(ROOT, 'bench/RESULTS.md'),
      'dispatch-check:last',
      [
        `### The last \`--check\` (${startedAt.toISOString()}, Sluice at ${measuredCommit(SLUICE_DIR)})`,
        '',
        `Command: \`${command}\`; machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ` +
          `1-min load average at start ${fmt(load1, 2)}; against the \`${opt['check-label']}\` section.`,
        '',
        ...verdicts.map((v) => `- ${v.replace(/^--check: /, '')}`),
      ].join('\n'),
    );
  const resultsFile = opt.results ?? (quick || opt.check ? null : join(ROOT, 'bench/RESULTS.md'));
  if (resultsFile) {
    writeSection(resultsFile, opt.label!, section);
    say(`\nwritten to ${resultsFile} (label "${opt.label}")`);
  } else say('\n(--quick: bench/RESULTS.md left alone; pass --results FILE to write the section)');

  const lossy = results.filter((r) => r.lost > 0);
  if (lossy.length > 0) {
    process.stderr.write(
      `lost deliveries among healthy endpoints: ` +
        `${lossy.map((r) => `${r.sc.name} run ${r.run}: ${r.lost}`).join(', ')}\n`,
    );
    return 1;
  }
  return checkFailed ? 1 : 0;
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
  const target = (name: string) =>
    name === 'curve-500' ? 1.5 : name === 'curve-2000' ? 1.2 : name === 'curve-8000' ? 1.2 : null;
  const lines = rows.map((r) => {
    const cost = per.get(r.sc.name)!;
    const against = r.sc.name === 'curve-8000' ? sat : r.sc.name === 'f10-single' ? NaN : at8k;
    const t = target(r.sc.name);
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

main().then(
  (code) => shutdown(code),
  (err: Error) => {
    // After a signal, errors from the children going away are expected: the shutdown reports.
    if (!shuttingDown) process.stderr.write(`bench:dispatch failed: ${err.stack ?? err}\n`);
    return shutdown(2);
  },
);
