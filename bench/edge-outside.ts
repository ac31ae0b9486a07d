/**
 * The token edge measured from outside, every piece its own OS process as an operator runs them:
 * Kafka (`sluice kafka`, unless KAFKA_BROKERS is set), node 1 = `sluice start` (its default
 * workers: one cluster worker per core), node 2 = `sluice ingress`, the clients made with
 * `sluice admin create-client` (the revocation victims in bulk, bench/edge-outside/provision.ts),
 * and a Node load generator (bench/harness/load.ts, undici).
 * This process only orchestrates: it starts them, asks the load generator to run each case,
 * samples /proc, and reports.
 *
 *   npm run bench:edge-outside -- [--quick] [--seconds 10] [--revocations 200] [--idle-seconds 30]
 *       [--results FILE]
 *
 * Cases:
 *  1. token issuance, closed model, 64 connections, POST /v1/auth/token to node 1 for --seconds
 *     after a 2 s warm-up: one client, then 32 clients round-robin. 200s/s, other statuses,
 *     p50/p99, CPU-s per 1,000 tokens of `sluice start` (primary + workers) and of the load generator.
 *     The per-client token rate limit is off (SLUICE_TOKEN_RATE_PER_MINUTE=0): this is the ceiling.
 *  2. revocation seen by a client, --revocations rounds one at a time: from sending
 *     POST /v1/auth/revocations to node 1 until node 2, and node 1, refuse (401) the victim's
 *     token, each polled back to back on its own connection; and until the POST's 201.
 *  3. idle CPU over --idle-seconds (after 5 s settling), % of one core per Sluice process.
 *
 * --quick: 4 clients instead of 32, 3 s, 10 revocations, 5 idle seconds, and bench/RESULTS.md
 * left alone unless --results is given; otherwise the section between `<!-- edge-outside:begin -->`
 * and `<!-- edge-outside:end -->` of bench/RESULTS.md (or --results FILE) is replaced.
 * Exits 0, 1 when a case saw unexpected statuses, 2 on an error.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, freePorts } from '../core/net/free-port.ts';
import { Children, stop, tail, waitForLine, type Launched } from './harness/children.ts';
import { printHelp, ROOT, resultsFile, say, sleep } from './harness/cli.ts';
import { type Credentials, type LoadReply, type LoadRequest, rpc, type TokenResult } from './harness/ipc.ts';
import { benchKafka, dropBenchTopics } from './harness/kafka.ts';
import { machineCpu, ProcSampler, processTree } from './harness/proc-cpu.ts';
import { Scratch } from './harness/scratch.ts';
import { sluiceEnv, waitReady } from './harness/sluice.ts';
import type { ProvisionSpec } from './edge-outside/provision.ts';
import { report, unexpectedOf, type Figures, type TokenCase } from './edge-outside/report.ts';
import { writeMarkedSection } from './results-section.ts';

const SLUICE = join(ROOT, 'bin/sluice.js');

const { values: opt } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    seconds: { type: 'string' },
    revocations: { type: 'string' },
    'idle-seconds': { type: 'string' },
    results: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (opt.help) printHelp(import.meta.url);
const quick = opt.quick === true;
const num = (raw: string | undefined, full: number, small: number) => (raw ? Number(raw) : quick ? small : full);
const SECONDS = num(opt.seconds, 10, 3);
const REVOCATIONS = num(opt.revocations, 200, 10);
const IDLE_SECONDS = num(opt['idle-seconds'], 30, 5);
const TOKEN_CLIENTS = quick ? 4 : 32;
const CONNECTIONS = 64;
const WARM_UP_SECONDS = 2;
const SETTLE_SECONDS = 5;
/** A node that has not refused a revoked token this long after the POST counts as "never" (and exit 1). */
const ROUND_TIMEOUT_MS = 10_000;
for (const [name, v] of Object.entries({ SECONDS, REVOCATIONS, IDLE_SECONDS }))
  if (!(Number.isFinite(v) && v > 0)) throw new Error(`${name.toLowerCase()} must be a positive number`);

// ---------------------------------------------------------------- child processes and cleanup

const scratch = new Scratch('bench-edge-outside');
const children = new Children(scratch.path, ROOT);
/** The `sluice admin` runs in flight (execFile: their output is their answer). */
const cliRuns = new Set<ChildProcess>();
let sampler: ProcSampler | null = null;
let brokers: string[] = [];
let prefix = '';
let externalKafka = false;
let shuttingDown = false;

/** Stops every child (helpers, then Sluice, then Kafka), drops the topics of an external broker, exits. */
async function shutdown(code: number): Promise<void> {
  if (shuttingDown) return;
  shuttingDown = true;
  sampler?.stop();
  await Promise.all([...cliRuns].map((p) => stop(p)));
  await children.stopAll();
  if (externalKafka && prefix) await dropBenchTopics(brokers, prefix);
  scratch.keepLogs = code === 2; // exiting removes the work directory; a failed run keeps its logs
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

/** One `sluice admin create-client --json` run. */
function createClient(env: NodeJS.ProcessEnv, role: string): Promise<Credentials> {
  return new Promise((resolve, reject) => {
    const args = [SLUICE, 'admin', 'create-client', '--tenant', 'bench', '--role', role, '--json'];
    const p = execFile(process.execPath, args, { cwd: ROOT, env }, (err, stdout, stderr) => {
      cliRuns.delete(p);
      const line = stdout.split('\n').find((l) => l.startsWith('{'));
      if (err || !line) return reject(new Error(`sluice admin create-client failed: ${err?.message ?? ''}\n${stderr}`));
      const { client_id, client_secret } = JSON.parse(line) as Credentials;
      resolve({ client_id, client_secret });
    });
    cliRuns.add(p);
  });
}

/**
 * `count` clients of one role in one process (bench/edge-outside/provision.ts): a CLI run each
 * would take 1-2 s apiece, and concurrent runs gain nothing (their audit appends fence each other).
 */
function provision(env: NodeJS.ProcessEnv, role: string, count: number): Promise<Credentials[]> {
  const vars = Object.fromEntries(
    Object.entries(env).filter((e): e is [string, string] => /^(KAFKA|SLUICE)_/.test(e[0])),
  );
  const spec: ProvisionSpec = { env: vars, tenant: 'bench', role, count };
  const c = children.forkTs('provision', join(ROOT, 'bench/edge-outside/provision.ts'), [JSON.stringify(spec)]);
  return new Promise((resolve, reject) => {
    c.proc.once('message', (m: { clients: Credentials[] }) => resolve(m.clients));
    void c.exited.then((code) =>
      reject(new Error(`provision.ts exited (${code}) without its clients:\n${tail(c.log)}`)),
    );
  });
}

/** Distinct free ports: node 1's, its admin ports (one per worker), node 2's and its admin port. */
async function pickPorts(workers: number) {
  for (;;) {
    const [node1, admin1, node2, admin2] = [
      await freePort(),
      await freePorts(workers),
      await freePort(),
      await freePort(),
    ];
    const all = [node1, ...Array.from({ length: workers }, (_, i) => admin1 + i), node2, admin2];
    if (new Set(all).size === all.length) return { node1, admin1, node2, admin2 };
  }
}

/** Cores busy on the whole machine (every process, ours or not) since `from` (machineCpu()). */
function machineCores(from: ReturnType<typeof machineCpu>): number {
  const to = machineCpu();
  return to.total > from.total ? ((to.busy - from.busy) / (to.total - from.total)) * cpus().length : Number.NaN;
}

/** A cluster worker's index (SLUICE_WORKER_INDEX in its environment), else null. */
function workerIndexOf(pid: number): number | null {
  try {
    const m = /(?:^|\0)SLUICE_WORKER_INDEX=(\d+)/.exec(readFileSync(`/proc/${pid}/environ`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------- the run

async function main(): Promise<number> {
  const startedAt = new Date();
  const load1 = loadavg()[0];

  // 1. Kafka
  const kafka = await benchKafka(children, scratch, SLUICE, say);
  brokers = kafka.brokers;
  externalKafka = kafka.external;

  // 2. the load generator
  const loadProc = children.forkTs('load', join(ROOT, 'bench/harness/load.ts')).proc;
  const load = rpc<LoadRequest, LoadReply>(loadProc);

  // 3. Sluice: node 1 = `sluice start` (default workers: one per core), node 2 = `sluice ingress`
  prefix = `bench-${randomBytes(4).toString('hex')}`;
  const workers = availableParallelism();
  const ports = await pickPorts(workers);
  const env: NodeJS.ProcessEnv = {
    ...sluiceEnv({ brokers, prefix, port: ports.node1, dataDir: scratch.dataDir() }),
    SLUICE_TOKEN_RATE_PER_MINUTE: '0',
  };
  for (const name of ['SLUICE_WORKERS', 'SLUICE_PORT', 'SLUICE_ADMIN_PORT']) delete env[name];
  const nodeEnv = (port: number, admin: number) => ({
    ...env,
    SLUICE_PORT: String(port),
    SLUICE_ADMIN_PORT: String(admin),
  });
  say(`starting sluice start and sluice ingress (topic prefix ${prefix})...`);
  const node1 = children.spawn('sluice-start', SLUICE, ['start'], nodeEnv(ports.node1, ports.admin1), 'sluice');
  const node2 = children.spawn('sluice-ingress', SLUICE, ['ingress'], nodeEnv(ports.node2, ports.admin2), 'sluice');
  // Its first worker makes a bootstrap admin if it finds no client, after it is ready: wait for its
  // decision before adding ours (else it may or may not make one).
  const decided = waitForLine(node1, /Bootstrap admin credential|client\(s\) exist already/, 120_000, 'sluice start');
  decided.catch(() => {}); // awaited below, after the /readyz checks (which report an early exit first)
  const admins: [Launched, string, number][] = [
    // With workers, the primary's /readyz sums theirs; each worker's own (with its views' counts)
    // is on the admin port + 1 + i.
    ...Array.from({ length: workers }, (_, i): [Launched, string, number] => [
      node1,
      `sluice start worker ${i + 1}`,
      ports.admin1 + 1 + i,
    ]),
    [node2, 'sluice ingress', ports.admin2],
  ];
  for (const [node, name, port] of admins) await waitReady(node, name, port);
  await decided;
  const bootstrap = (await waitReady(node1, 'sluice start worker 1', ports.admin1 + 1)).clients as number;
  const workerPids = processTree(node1.proc.pid!).slice(1);
  const byIndex = workerPids
    .map((pid, i) => ({ pid, index: workerIndexOf(pid) ?? i }))
    .sort((a, b) => a.index - b.index);

  // 4. clients: with the CLI, one run at a time, the token clients (admin) and the officer; the
  // victims (a warm-up one + one per round) in one provisioning process.
  say(`creating ${TOKEN_CLIENTS + 1} clients with sluice admin create-client, ${REVOCATIONS + 1} in bulk...`);
  const t0 = Date.now();
  const tokenClients: Credentials[] = [];
  for (let i = 0; i < TOKEN_CLIENTS; i++) tokenClients.push(await createClient(env, 'admin'));
  const officer = await createClient(env, 'security-officer');
  const cliSeconds = (Date.now() - t0) / 1000;
  const [warmUp, ...victims] = await provision(env, 'security-officer', REVOCATIONS + 1);
  const created = TOKEN_CLIENTS + 1 + REVOCATIONS + 1;
  // Every process has read them all (and the bootstrap admin).
  for (const [node, name, port] of admins) await waitReady(node, name, port, (b) => b.clients >= created + bootstrap);
  const createSeconds = (Date.now() - t0) / 1000;
  say(`  ${created} clients in ${createSeconds.toFixed(1)} s (CLI ${cliSeconds.toFixed(1)} s), seen everywhere`);

  sampler = new ProcSampler(() => {
    const m = new Map<string, number[]>();
    m.set('sluice start', processTree(node1.proc.pid!));
    m.set('sluice start: primary', [node1.proc.pid!]);
    for (const w of byIndex) m.set(`sluice start: worker ${w.index}`, [w.pid]);
    m.set('sluice ingress', processTree(node2.proc.pid!));
    m.set('load generator', [loadProc.pid!]);
    return m;
  });

  // 5. case 1: token issuance
  const node1Base = `http://127.0.0.1:${ports.node1}`;
  const tokenCases: TokenCase[] = [];
  for (const [label, clients] of [
    ['one client', tokenClients.slice(0, 1)],
    [`${TOKEN_CLIENTS} clients, round-robin`, tokenClients],
  ] as const) {
    let window: ReturnType<ProcSampler['begin']> | null = null;
    let machine0 = machineCpu();
    const onMessage = (m: { event?: string }) => {
      if (m?.event !== 'measuring') return;
      window = sampler!.begin();
      machine0 = machineCpu();
    };
    loadProc.on('message', onMessage);
    let r: TokenResult;
    try {
      const spec = { base: node1Base, clients: [...clients], connections: CONNECTIONS };
      r = (await load({ op: 'tokens', spec: { ...spec, warmUpSeconds: WARM_UP_SECONDS, seconds: SECONDS } })).tokens!;
    } finally {
      loadProc.off('message', onMessage);
    }
    if (!window) throw new Error('the load generator never said it was measuring');
    const usage = sampler.end(window);
    tokenCases.push({ label, result: r, usage, machineCores: machineCores(machine0) });
    say(
      `tokens, ${label}: ${r.okPerSec.toFixed(0)}/s (200s only), p50 ${r.p50?.toFixed(2)} ms, ` +
        `p99 ${r.p99?.toFixed(2)} ms, statuses ${JSON.stringify(r.statuses)}`,
    );
  }

  // 6. case 2: revocation seen by a client
  say(`revocation: ${REVOCATIONS} rounds...`);
  const rev = (
    await load({
      op: 'revocation',
      spec: {
        node1: node1Base,
        node2: `http://127.0.0.1:${ports.node2}`,
        officer,
        warmUp,
        victims,
        roundTimeoutMs: ROUND_TIMEOUT_MS,
      },
    })
  ).revocation!;
  say(`  done: ${rev.postMs.length} rounds measured, unexpected ${JSON.stringify(rev.unexpected)}`);

  // 7. case 3: idle CPU
  say(`idle: ${SETTLE_SECONDS} s settling, then ${IDLE_SECONDS} s measured...`);
  await sleep(SETTLE_SECONDS * 1000);
  const idleWindow = sampler.begin();
  const idleMachine0 = machineCpu();
  await sleep(IDLE_SECONDS * 1000);
  const idle = sampler.end(idleWindow);
  const idleMachineCores = machineCores(idleMachine0);

  // report
  const figures: Figures = {
    command: ['bench:edge-outside', ROOT, externalKafka ? brokers : null],
    startedAt,
    load1,
    brokers,
    externalKafka,
    workers: byIndex.length,
    cliClients: TOKEN_CLIENTS + 1,
    cliSeconds,
    bulkClients: REVOCATIONS + 1,
    createSeconds,
    connections: CONNECTIONS,
    warmUpSeconds: WARM_UP_SECONDS,
    seconds: SECONDS,
    tokenCases,
    revocations: REVOCATIONS,
    revocation: rev,
    roundTimeoutMs: ROUND_TIMEOUT_MS,
    settleSeconds: SETTLE_SECONDS,
    idleSeconds: IDLE_SECONDS,
    idle,
    idleMachineCores,
  };
  const section = report(figures);
  say('');
  say(section);
  const file = resultsFile(opt.results, quick);
  if (file) {
    writeMarkedSection(file, 'edge-outside', section);
    say(`\nwritten to ${file}`);
  } else say('\n(--quick: bench/RESULTS.md left alone; pass --results FILE to write the section)');

  const unexpected = unexpectedOf(figures);
  if (unexpected.length > 0) {
    process.stderr.write(`unexpected statuses: ${unexpected.join('; ')}\n`);
    return 1;
  }
  return 0;
}

main().then(
  (code) => shutdown(code),
  (err: Error) => {
    // After a signal, errors from the children going away are expected: the shutdown reports.
    if (!shuttingDown) process.stderr.write(`bench:edge-outside failed: ${err.stack ?? err}\n`);
    return shutdown(2);
  },
);
