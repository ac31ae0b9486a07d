/**
 * The token edge from outside, every piece its own OS process as an operator runs them: Kafka, node 1 =
 * `sluice start`, node 2 = `sluice ingress`, the load generator (harness/load.ts); this process orchestrates
 * and samples /proc. Cases: token issuance; revocation as a client sees it on both nodes; idle CPU.
 *
 *   npm run bench:edge-outside -- [--quick] [--seconds 10] [--revocations 200] [--idle-seconds 30] [--results FILE]
 *
 * --quick: 4 token clients instead of 32, 3 s, 10 revocations, 5 idle seconds, nothing written unless
 * --results. Exits 0, 1 when a case saw unexpected statuses, 2 on an error.
 */
import { availableParallelism, cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { KAFKA_VERSION } from '../core/kafka/local-broker.ts';
import { freePorts } from '../core/net/free-port.ts';
import { BenchRun } from '../harness/bench.ts';
import { type Launched, waitForLine } from '../harness/children.ts';
import { printHelp, ROOT, resultsFile, say, sleep, writeResults } from '../harness/cli.ts';
import type { Credentials } from '../harness/load.ts';
import { machineCpu, ProcSampler, processTree, type Usage } from '../harness/proc-cpu.ts';
import { provenance, table } from '../harness/report.ts';
import { benchClients, sluiceEnv, waitReady } from '../harness/sluice.ts';
import { adminClient } from '../harness/sluice-api.ts';
import { fmt, latency } from '../harness/stats.ts';

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

async function main(): Promise<number> {
  const { brokers, external } = await bench.startKafka();
  const { call: load, proc: loadProc } = bench.load();

  const workers = availableParallelism();
  // node 1's, node 2's and node 2's admin port, then node 1's admin ports: its primary's and one per worker.
  const first = await freePorts(workers + 4);
  const ports = { node1: first, node2: first + 1, admin2: first + 2, admin1: first + 3 };
  const env: NodeJS.ProcessEnv = {
    ...sluiceEnv({ brokers, prefix, port: ports.node1, dataDir: scratch.dataDir() }),
    SLUICE_TOKEN_RATE_PER_MINUTE: '0',
  };
  for (const name of ['SLUICE_WORKERS', 'SLUICE_PORT', 'SLUICE_ADMIN_PORT']) delete env[name];
  const node = (name: string, command: string, port: number, admin: number, more: NodeJS.ProcessEnv = {}) => {
    const nodeEnv = { ...env, ...more, SLUICE_PORT: `${port}`, SLUICE_ADMIN_PORT: `${admin}` };
    return children.spawn(name, bench.sluice, [command], nodeEnv, 'sluice');
  };
  say(`starting sluice start and sluice ingress (topic prefix ${prefix})...`);
  // A worker per core from the start: the edge is measured at the node's full width.
  const node1 = node('sluice-start', 'start', ports.node1, ports.admin1, { SLUICE_WORKERS: String(workers) });
  const node2 = node('sluice-ingress', 'ingress', ports.node2, ports.admin2);
  // Its first worker makes a bootstrap admin if it finds no client, after it is ready: wait for its
  // decision before adding ours (else it may or may not make one).
  const decided = waitForLine(node1, /Bootstrap admin credential|client\(s\) exist already/, 120_000, 'sluice start');
  decided.catch(() => {}); // awaited after the /readyz checks, which report an early exit first
  // With workers, the primary's /readyz sums theirs; each worker's own is on the admin port + 1 + i.
  const admins: [Launched, string, number][] = [[node2, 'sluice ingress', ports.admin2]];
  for (let i = 0; i < workers; i++) admins.push([node1, `sluice start worker ${i + 1}`, ports.admin1 + 1 + i]);
  for (const [n, name, port] of admins) await waitReady(n, name, port);
  await decided;
  const bootstrap = (await waitReady(node1, 'sluice start worker 1', ports.admin1 + 1)).clients as number;
  const workerPids = processTree(node1.proc.pid!).slice(1);
  const workerNames = workerPids.map((_, i) => `sluice start: worker ${i}`);

  // The token clients and the officer with the CLI, one run at a time; the victims (a warm-up one and
  // one per round) in this process, as the CLI makes them (a CLI run is 1-2 s).
  say(`creating ${TOKEN_CLIENTS + 1} clients with sluice admin create-client, ${REVOCATIONS + 1} in bulk...`);
  const t0 = Date.now();
  const tokenClients: Credentials[] = [];
  for (let i = 0; i < TOKEN_CLIENTS; i++) tokenClients.push(await adminClient(bench.sluice, ROOT, env, 'bench'));
  const officer = await adminClient(bench.sluice, ROOT, env, 'bench', 'security-officer');
  const cliSeconds = (Date.now() - t0) / 1000;
  const [[warmUp, ...victims]] = await benchClients(brokers, prefix, REVOCATIONS + 1, ['security-officer']);
  const created = TOKEN_CLIENTS + 1 + REVOCATIONS + 1;
  for (const [n, name, port] of admins) await waitReady(n, name, port, (b) => b.clients >= created + bootstrap);
  const createSeconds = (Date.now() - t0) / 1000;
  say(`  ${created} clients in ${createSeconds.toFixed(1)} s (CLI ${cliSeconds.toFixed(1)} s), seen everywhere`);

  const sampler = new ProcSampler(
    () =>
      new Map<string, number[]>([
        ['sluice start', processTree(node1.proc.pid!)],
        ['sluice start: primary', [node1.proc.pid!]],
        ...workerPids.map((pid, i): [string, number[]] => [workerNames[i], [pid]]),
        ['sluice ingress', processTree(node2.proc.pid!)],
        ['load generator', [loadProc.pid!]],
      ]),
  );
  bench.onShutdown(async () => sampler.stop());
  /** A window of CPU per process group, and of cores busy on the whole machine (ours and anyone's). */
  const measure = () => {
    const [window, m0] = [sampler.begin(), machineCpu()];
    return () => {
      const m1 = machineCpu();
      const cores = m1.total > m0.total ? ((m1.busy - m0.busy) / (m1.total - m0.total)) * cpus().length : Number.NaN;
      return { usage: sampler.end(window), machineCores: cores };
    };
  };

  // 1. token issuance; the window opens when the load generator's warm-up ends.
  const node1Base = `http://127.0.0.1:${ports.node1}`;
  const tokenSpec = { base: node1Base, connections: CONNECTIONS, warmUpSeconds: WARM_UP_SECONDS, seconds: SECONDS };
  const tokenCase = async (label: string, clients: Credentials[]) => {
    let close: ReturnType<typeof measure> | null = null;
    const onMessage = (m: { event?: string }) => {
      if (m?.event === 'measuring') close = measure();
    };
    loadProc.on('message', onMessage);
    const r = await load({ op: 'tokens', spec: { ...tokenSpec, clients } })
      .finally(() => loadProc.off('message', onMessage))
      .then((reply) => reply.tokens!);
    if (!close) throw new Error('the load generator never said it was measuring');
    say(`tokens, ${label}: ${fmt(r.okPerSec)}/s (200s only), p50 ${fmt(r.p50, 2)} ms, p99 ${fmt(r.p99, 2)} ms`);
    const others = Object.entries(r.statuses).filter(([k]) => k !== '200');
    return { label, r, others, ...(close as ReturnType<typeof measure>)() };
  };
  const tokenCases = [
    await tokenCase('one client', tokenClients.slice(0, 1)),
    await tokenCase(`${TOKEN_CLIENTS} clients, round-robin`, tokenClients),
  ];
  type TokenCase = (typeof tokenCases)[number];

  // 2. revocation seen by a client
  say(`revocation: ${REVOCATIONS} rounds...`);
  const node2Base = `http://127.0.0.1:${ports.node2}`;
  const revSpec = { node1: node1Base, node2: node2Base, officer, warmUp, victims, roundTimeoutMs: ROUND_TIMEOUT_MS };
  const rev = (await load({ op: 'revocation', spec: revSpec })).revocation!;
  say(`  done: ${rev.postMs.length} rounds measured, unexpected ${JSON.stringify(rev.unexpected)}`);

  // 3. idle CPU
  say(`idle: ${SETTLE_SECONDS} s settling, then ${IDLE_SECONDS} s measured...`);
  await sleep(SETTLE_SECONDS * 1000);
  const closeIdle = measure();
  await sleep(IDLE_SECONDS * 1000);
  const idle = closeIdle();

  // ---------------------------------------------------------------- report
  const cpu = (u: Map<string, Usage>, name: string) => u.get(name)?.cpuSec ?? 0;
  const ms = (x: number | null) => fmt(x, x !== null && x < 10 ? 2 : 1);
  const perThousand = (name: string) => (c: TokenCase) => fmt(c.r.ok ? (cpu(c.usage, name) * 1000) / c.r.ok : null, 3);
  const notOurs = ({ usage: u, machineCores, r }: TokenCase) =>
    machineCores - (cpu(u, 'sluice start') + cpu(u, 'sluice ingress') + cpu(u, 'load generator')) / r.seconds;
  const cores = (c: TokenCase) => fmt(cpu(c.usage, 'sluice start') / c.r.seconds, 2);
  const perWorker = (c: TokenCase) => workerNames.map((w) => fmt(cpu(c.usage, w), 1)).join(' / ');
  // One row per figure, one column per case.
  const tokenFigures: [string, (c: TokenCase) => string][] = [
    ['tokens/s (200s)', (c) => fmt(c.r.okPerSec)],
    ['200s', (c) => fmt(c.r.ok)],
    ['other responses', (c) => c.others.map(([k, v]) => `${k}×${fmt(v)}`).join(', ')],
    ['p50 / p99 ms', (c) => `${ms(c.r.p50)} / ${ms(c.r.p99)}`],
    ['`sluice start` CPU-s / 1,000 tokens', perThousand('sluice start')],
    ['`sluice start` cores busy (CPU-s of each worker)', (c) => `${cores(c)} (${perWorker(c)})`],
    ['load generator CPU-s / 1,000 tokens', perThousand('load generator')],
    ['`sluice ingress` CPU-s', (c) => fmt(cpu(c.usage, 'sluice ingress'), 2)],
    ['machine cores busy (others)', (c) => `${fmt(c.machineCores, 2)} (${fmt(notOurs(c), 2)})`],
  ];
  const revRow = (what: string, xs: number[]) => {
    const l = latency(xs.filter(Number.isFinite));
    return [what, l.count, ms(l.p50), ms(l.p99), ms(l.max), xs.length - l.count];
  };
  const rounds = [...rev.node2Ms.entries()].filter(([, x]) => Number.isFinite(x)).sort((a, b) => b[1] - a[1]);
  const slowest = rounds.slice(0, 5).map(([i, x]) => `#${i + 1} ${ms(x)}`);
  const over100 = (xs: number[]) => xs.filter((x) => x > 100).length;
  // Every answer a case did not expect: token requests other than 200, revocation rounds gone wrong.
  const unexpected = [
    ...tokenCases.flatMap((c) => c.others.map(([k, v]) => `tokens, ${c.label}: ${k} ×${v}`)),
    ...Object.entries(rev.unexpected).map(([k, v]) => `revocation, ${k} ×${v}`),
  ];
  const idleRow = (name: string, label = `\`${name}\``) => {
    const c = cpu(idle.usage, name);
    return [label, fmt(c, 2), `${fmt((100 * c) / IDLE_SECONDS, 2)} %`];
  };
  const kafka = `Kafka ${KAFKA_VERSION} ${external ? 'already running' : 'started by the bench (`sluice kafka`)'}`;
  const section = [
    '## The token edge from outside, every piece its own OS process (`npm run bench:edge-outside`)',
    '',
    ...provenance({ command: bench.command('bench:edge-outside'), sluiceDir: ROOT, startedAt: bench.startedAt, kafka }),
    '',
    `Processes: Kafka; node 1 = \`sluice start\` (primary + ${workerPids.length} cluster workers); node 2 = ` +
      '`sluice ingress`; the load generator (harness/load.ts: undici, keep-alive, pipelining 1). Both nodes share ' +
      `node 1's issuer. Clients: ${TOKEN_CLIENTS + 1} made by \`sluice admin create-client\` runs one at a time ` +
      `(${fmt(cliSeconds, 1)} s), ${fmt(REVOCATIONS + 1)} revocation victims by the bench itself ` +
      `(${fmt(createSeconds - cliSeconds, 1)} s until every Sluice process had them all). ` +
      '`SLUICE_TOKEN_RATE_PER_MINUTE=0`: no per-client token limit, so case 1 is the issuance ceiling; the ' +
      "per-client request limit keeps its default (10,000/s), far above a revocation round's polls.",
    '',
    `### 1. Token issuance: closed model, ${CONNECTIONS} connections, POST /v1/auth/token to node 1`,
    '',
    `${WARM_UP_SECONDS} s warm-up (not counted), then ${SECONDS} s; rate and latency of the 200s only. CPU: ` +
      'user + system (/proc) over the measured seconds; cores busy = CPU-s per second. Machine: cores busy on ' +
      'the whole machine (/proc/stat); in parentheses, those not used by Sluice or the load generator.',
    '',
    ...table(
      ['', ...tokenCases.map((c) => c.label)],
      tokenFigures.map(([name, cell]) => [name, ...tokenCases.map(cell)]),
    ),
    '',
    `### 2. Revocation seen by a client: ${fmt(REVOCATIONS)} rounds, one at a time`,
    '',
    'Each round: a fresh token of a victim from node 1, checked (200) on both nodes; then both nodes polled ' +
      'back to back with it (GET /v1/audit?limit=1, one keep-alive connection each) while node 1 gets ' +
      "POST /v1/auth/revocations with the officer's token. Only a TOKEN_REVOKED 401 to a poll sent after the " +
      `POST counts. Resolution: one poll round trip (p50 ${ms(rev.pollP50)} ms, p99 ${ms(rev.pollP99)} ms, ` +
      `${fmt(rev.polls)} polls). One unreported round first. Node 1's POST and polls may reach different workers.`,
    '',
    ...table(
      ['from sending the POST until', 'rounds', 'p50 ms', 'p99 ms', 'max ms', `never (${ROUND_TIMEOUT_MS / 1000} s)`],
      [
        revRow('node 2 (`sluice ingress`) answers 401', rev.node2Ms),
        revRow('node 1 (`sluice start`) answers 401', rev.node1Ms),
        revRow('node 1 answers the POST 201', rev.postMs),
      ],
    ),
    '',
    `Slowest rounds at node 2 (round number, ms): ${slowest.join(', ') || '—'}. Rounds over 100 ms: ` +
      `node 2 ${over100(rev.node2Ms)}, node 1 ${over100(rev.node1Ms)}, the 201 ${over100(rev.postMs)} ` +
      `of ${rev.postMs.length}.`,
    '',
    ...(unexpected.length ? [`Unexpected answers: ${unexpected.join('; ')}.`, ''] : []),
    `### 3. Idle CPU: ${IDLE_SECONDS} s with no requests, after ${SETTLE_SECONDS} s settling`,
    '',
    ...table(
      ['process', 'CPU-s', '% of one core'],
      [
        idleRow('sluice ingress', '`sluice ingress` (node 2)'),
        idleRow('sluice start', '`sluice start` (node 1, all its processes)'),
        idleRow('sluice start: primary'),
        ...workerNames.map((w) => idleRow(w)),
        idleRow('load generator', 'load generator (idle, for reference)'),
      ],
    ),
    '',
    `The whole machine meanwhile: ${fmt(idle.machineCores, 2)} cores busy (/proc/stat, Kafka and others included).`,
  ].join('\n');
  say(`\n${section}`);
  const file = resultsFile(opt.results, quick);
  if (file) writeResults(file, 'edge-outside', section);
  else say('\n(--quick: bench/RESULTS.md left alone; pass --results FILE to write the section)');
  if (unexpected.length === 0) return 0;
  process.stderr.write(`unexpected statuses: ${unexpected.join('; ')}\n`);
  return 1;
}

bench.run(main);
