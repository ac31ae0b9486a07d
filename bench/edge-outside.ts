/**
 * The token edge measured from outside, every piece its own OS process as an operator runs them:
 * Kafka (`sluice kafka`, unless KAFKA_BROKERS is set), node 1 = `sluice start` (its default
 * workers: one cluster worker per core), node 2 = `sluice ingress`, the clients made with
 * `sluice admin create-client` (the revocation victims in bulk, bench/edge-outside/provision.ts),
 * and a Node load generator (harness/load.ts, undici).
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
import { readFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { KAFKA_VERSION } from '../core/kafka/local-broker.ts';
import { freePort, freePorts } from '../core/net/free-port.ts';
import { tail, waitForLine, type Launched } from '../harness/children.ts';
import { printHelp, ROOT, resultsFile, say, sleep, writeResults } from '../harness/cli.ts';
import type { Credentials, RevocationResult, TokenResult } from '../harness/load.ts';
import { BenchRun } from '../harness/bench.ts';
import { machineCpu, ProcSampler, processTree, type Usage } from '../harness/proc-cpu.ts';
import { sluiceEnv, waitReady } from '../harness/sluice.ts';
import { adminClient } from '../harness/sluice-api.ts';
import { fmt, percentile } from '../harness/stats.ts';
import type { ProvisionSpec } from './edge-outside/provision.ts';
import { machineLine, measuredCommit } from '../harness/results-section.ts';

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

const bench = new BenchRun('bench-edge-outside');
const { scratch, children, prefix } = bench;
let sampler: ProcSampler | null = null;
bench.onShutdown(async () => sampler?.stop());
let brokers: string[] = [];
let externalKafka = false;

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
  const { startedAt, load1 } = bench;

  // 1. Kafka
  ({ brokers, external: externalKafka } = await bench.startKafka());

  // 2. the load generator
  const { call: load, proc: loadProc } = bench.load();

  // 3. Sluice: node 1 = `sluice start` (default workers: one per core), node 2 = `sluice ingress`
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
  for (let i = 0; i < TOKEN_CLIENTS; i++) tokenClients.push(await adminClient(SLUICE, ROOT, env, 'bench'));
  const officer = await adminClient(SLUICE, ROOT, env, 'bench', 'security-officer');
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
  const section = report({
    startedAt,
    load1,
    workers: byIndex.length,
    cliSeconds,
    createSeconds,
    tokenCases,
    revocation: rev,
    idle,
    idleMachineCores,
  });
  say('');
  say(section);
  const file = resultsFile(opt.results, quick);
  if (file) writeResults(file, 'edge-outside', section);
  else say('\n(--quick: bench/RESULTS.md left alone; pass --results FILE to write the section)');

  // Every answer a case did not expect: token requests other than 200, revocation rounds gone wrong.
  const unexpected = [
    ...tokenCases.flatMap((c) =>
      Object.entries(c.result.statuses)
        .filter(([k]) => k !== '200')
        .map(([k, v]) => `tokens, ${c.label}: ${k} ×${v}`),
    ),
    ...Object.entries(rev.unexpected).map(([k, v]) => `revocation, ${k} ×${v}`),
  ];
  if (unexpected.length > 0) {
    process.stderr.write(`unexpected statuses: ${unexpected.join('; ')}\n`);
    return 1;
  }
  return 0;
}

// ---------------------------------------------------------------- report

interface TokenCase {
  label: string;
  result: TokenResult;
  /** CPU per process group over the measured seconds. */
  usage: Map<string, Usage>;
  /** Cores busy on the whole machine over the same seconds (/proc/stat): ours and anyone else's. */
  machineCores: number;
}

const ms = (x: number | null | undefined) => fmt(x, x !== null && x !== undefined && x < 10 ? 2 : 1);
const cpu = (u: Map<string, Usage>, name: string) => u.get(name)?.cpuSec ?? 0;
/** CPU-s of the processes of this bench that run Sluice or the load. */
const ours = (u: Map<string, Usage>) => cpu(u, 'sluice start') + cpu(u, 'sluice ingress') + cpu(u, 'load generator');
const workerNames = (u: Map<string, Usage>) => [...u.keys()].filter((k) => k.startsWith('sluice start: worker'));

/** p50, p99 and max of the rounds that saw one, and how many never did (NaN). */
function spread(xs: number[]) {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  const max = s.length ? s[s.length - 1] : null;
  return { n: s.length, p50: percentile(s, 50), p99: percentile(s, 99), max, never: xs.length - s.length };
}

function report(f: {
  startedAt: Date;
  load1: number;
  workers: number;
  /** The CLI made the token clients and the officer in cliSeconds; provision.ts the rest, createSeconds in all. */
  cliSeconds: number;
  createSeconds: number;
  tokenCases: TokenCase[];
  revocation: RevocationResult;
  idle: Map<string, Usage>;
  idleMachineCores: number;
}): string {
  const kafkaHow = externalKafka ? `already running (${brokers.join(',')})` : 'started by the bench (`sluice kafka`)';
  const tokenRows = f.tokenCases.map(({ label, result: r, usage: u, machineCores }) => {
    const others = Object.entries(r.statuses).filter(([k]) => k !== '200');
    const perThousand = (name: string) => fmt(r.ok ? (cpu(u, name) * 1000) / r.ok : null, 3);
    const perWorker = workerNames(u).map((w) => fmt(cpu(u, w), 1));
    const otherCell = others.map(([k, v]) => `${k}×${fmt(v)}`).join(', ') || '—';
    return (
      `| ${label} | ${fmt(r.okPerSec)} | ${fmt(r.ok)} | ${otherCell} | ` +
      `${ms(r.p50)} | ${ms(r.p99)} | ${perThousand('sluice start')} | ` +
      `${fmt(cpu(u, 'sluice start') / r.seconds, 2)} (${perWorker.join(' / ')} CPU-s) | ` +
      `${perThousand('load generator')} | ${fmt(cpu(u, 'sluice ingress'), 2)} | ` +
      `${fmt(machineCores, 2)} (${fmt(machineCores - ours(u) / r.seconds, 2)}) |`
    );
  });
  const rev = f.revocation;
  const revRow = (what: string, xs: number[]) => {
    const s = spread(xs);
    return `| ${what} | ${s.n} | ${ms(s.p50)} | ${ms(s.p99)} | ${ms(s.max)} | ${s.never} |`;
  };
  const revUnexpected = Object.entries(rev.unexpected).map(([k, v]) => `${k} ×${v}`);
  const slowest = rev.node2Ms
    .map((x, i) => ({ x, i }))
    .filter((r) => Number.isFinite(r.x))
    .sort((a, b) => b.x - a.x)
    .slice(0, 5)
    .map((r) => `#${r.i + 1} ${ms(r.x)}`);
  const over = (xs: number[], limit: number) => xs.filter((x) => x > limit).length;
  const idleRow = (name: string, label = `\`${name}\``) => {
    const c = cpu(f.idle, name);
    return `| ${label} | ${fmt(c, 2)} | ${fmt((100 * c) / IDLE_SECONDS, 2)} % |`;
  };
  return [
    '## The token edge from outside, every piece its own OS process (`npm run bench:edge-outside`)',
    '',
    `Run: ${f.startedAt.toISOString().slice(0, 10)}, Sluice at ${measuredCommit(ROOT)}. ` +
      `Command: \`${bench.command('bench:edge-outside')}\``,
    '',
    `Machine: ${machineLine()}; Kafka ${KAFKA_VERSION} ${kafkaHow}; ` +
      `${f.startedAt.toISOString()}; 1-min load average at start ${fmt(f.load1, 2)} (the machine may be shared).`,
    '',
    `Processes, each its own OS process on this machine: Kafka; node 1 = \`sluice start\` (primary + ` +
      `${f.workers} cluster workers, its default of one per core, each ingress + dispatcher); node 2 = ` +
      '`sluice ingress`; the load generator (harness/load.ts: undici, keep-alive, pipelining 1). ' +
      `Before the cases, ${fmt(TOKEN_CLIENTS + 1)} clients (the token clients and the officer) were made by ` +
      `\`sluice admin create-client\` runs, one at a time (${fmt(f.cliSeconds, 1)} s), and the ` +
      `${fmt(REVOCATIONS + 1)} revocation victims by one process doing the same (bench/edge-outside/provision.ts; ` +
      `${fmt(f.createSeconds - f.cliSeconds, 1)} s until every Sluice process had them all). ` +
      "Both nodes share one issuer (node 1's URL). " +
      '`SLUICE_TOKEN_RATE_PER_MINUTE=0`: the per-client token rate limit (default 600/min per node) is off, ' +
      'so case 1 measures the issuance ceiling, not the limit. `SLUICE_RATE_LIMIT_PER_CLIENT` keeps its ' +
      "default (10,000 requests/s per client per process, burst 20,000): a revocation round's polls stay far below it.",
    '',
    `### 1. Token issuance: closed model, ${CONNECTIONS} connections, POST /v1/auth/token to node 1`,
    '',
    `${WARM_UP_SECONDS} s warm-up (not counted), then ${SECONDS} s. tokens/s counts only the 200s; latency ` +
      'of the 200s. CPU: user + system from /proc/<pid>/stat over the measured seconds; `sluice start` is ' +
      'its primary + workers (cores busy = CPU-s per second; the workers in parentheses). Machine: cores busy ' +
      'on the whole machine (/proc/stat), in parentheses those not used by `sluice start`, `sluice ingress` ' +
      'or the load generator (Kafka, other users of the machine).',
    '',
    '| case | tokens/s (200s) | 200s | other responses | p50 ms | p99 ms | `sluice start` CPU-s / 1,000 tokens | ' +
      '`sluice start` cores busy | load generator CPU-s / 1,000 tokens | `sluice ingress` CPU-s | ' +
      'machine cores busy (others) |',
    '|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|',
    ...tokenRows,
    '',
    `### 2. Revocation seen by a client: ${fmt(REVOCATIONS)} rounds, one at a time`,
    '',
    'Each round: a fresh token of a victim (role security-officer) from node 1, checked (200) on both nodes; ' +
      'then both nodes polled back to back with it (GET /v1/audit?limit=1, one keep-alive connection each) ' +
      "while node 1 gets POST /v1/auth/revocations with the officer's token. Times run from sending the POST. " +
      'Only a TOKEN_REVOKED 401 to a poll sent after the POST counts: a poll in flight when the POST left ' +
      `that answers 200 is one more poll. Resolution: one poll round trip (p50 ${ms(rev.pollP50)} ms, ` +
      `p99 ${ms(rev.pollP99)} ms over ${fmt(rev.polls)} polls). One unreported round first. Node 1's POST ` +
      'and its polls travel on different connections, so possibly to different workers of `sluice start`.',
    '',
    `| from sending the POST until | rounds | p50 ms | p99 ms | max ms | never (${fmt(ROUND_TIMEOUT_MS / 1000)} s) |`,
    '|---|---:|---:|---:|---:|---:|',
    revRow('node 2 (`sluice ingress`) answers 401', rev.node2Ms),
    revRow('node 1 (`sluice start`) answers 401', rev.node1Ms),
    revRow('node 1 answers the POST 201', rev.postMs),
    '',
    `Slowest rounds at node 2 (round number, ms): ${slowest.join(', ') || '—'}. Rounds over 100 ms: ` +
      `node 2 ${over(rev.node2Ms, 100)}, node 1 ${over(rev.node1Ms, 100)}, the 201 ${over(rev.postMs, 100)} ` +
      `of ${rev.postMs.length}.`,
    '',
    ...(revUnexpected.length ? [`Unexpected answers: ${revUnexpected.join(', ')}.`, ''] : []),
    `### 3. Idle CPU: ${IDLE_SECONDS} s with no requests, after ${SETTLE_SECONDS} s settling`,
    '',
    '| process | CPU-s | % of one core |',
    '|---|---:|---:|',
    idleRow('sluice ingress', '`sluice ingress` (node 2)'),
    idleRow('sluice start', '`sluice start` (node 1, all its processes)'),
    idleRow('sluice start: primary'),
    ...workerNames(f.idle).map((w) => idleRow(w)),
    idleRow('load generator', 'load generator (idle, for reference)'),
    '',
    `The whole machine meanwhile: ${fmt(f.idleMachineCores, 2)} cores busy ` +
      '(/proc/stat; Kafka and any other user of the machine included).',
  ].join('\n');
}

bench.run(main);
