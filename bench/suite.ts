/**
 * The benchmark suite: k6 against Sluice's edge and its baselines, revocation propagation and idle CPU
 * (bench/revocation.ts), then bench/dispatch.ts and bench/state.ts, which write their own sections.
 *
 *   npm run bench [-- --quick] [--check] [--only edge,revocation,dispatch,state] [--results FILE]
 *       [--workers N] [--duration S] [--vus N] [--sluice-dir DIR]
 *
 * --quick: short cases, nothing written unless --results. --check: exit 1 when a target of
 * bench/suite/targets.ts is missed, or dispatch's f10-single CPU per delivery is over 125 % of RESULTS.md's.
 * --sluice-dir: measure another checkout's Sluice. KAFKA_BROKERS: use that cluster, else a `sluice kafka`.
 */
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { KAFKA_VERSION } from '../core/kafka/local-broker.ts';
import { freePort } from '../core/net/free-port.ts';
import { BenchRun } from '../harness/bench.ts';
import { waitForLine } from '../harness/children.ts';
import { printHelp, ROOT, resultsFile, say } from '../harness/cli.ts';
import { provenance, table } from '../harness/report.ts';
import { writeMarkedSection } from '../harness/results-section.ts';
import { benchClients, sluiceEnv, startIngress } from '../harness/sluice.ts';
import { bearerToken } from '../harness/sluice-api.ts';
import { fmt } from '../harness/stats.ts';
import { type CaseResult, type CaseSpec, k6Binary, loadAverage, runCase } from './suite/k6.ts';
import { ROUTE } from './suite/route.ts';
import { DEFAULT_FETCH_WAIT_MS, judge } from './suite/targets.ts';

const RUN_TS = join(ROOT, 'bin/run-ts.js');
const SCENARIOS = ['edge', 'revocation', 'dispatch', 'state'];

const { values: opt } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    check: { type: 'boolean', default: false },
    only: { type: 'string' },
    results: { type: 'string' },
    workers: { type: 'string' },
    duration: { type: 'string' },
    vus: { type: 'string' },
    'sluice-dir': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (opt.help) printHelp(import.meta.url);
const quick = opt.quick === true;
const only = opt.only?.split(',') ?? SCENARIOS;
for (const s of only)
  if (!SCENARIOS.includes(s)) throw new Error(`unknown scenario "${s}"; known: ${SCENARIOS.join(', ')}`);
const WORKERS = Number(opt.workers ?? availableParallelism());
const DURATION = Number(opt.duration ?? (quick ? 3 : 20));
const VUS = Number(opt.vus ?? 32);
const WARM_UP = quick ? 1 : 5;
const RESULTS = resultsFile(opt.results, quick);

const bench = new BenchRun('bench-suite', opt['sluice-dir'] ?? ROOT, 'bench-suite');
const { children, scratch } = bench;
const k6 = k6Binary();

// ---------------------------------------------------------------- edge

interface EdgeCase {
  id: string;
  label: string;
  /** bench/suite/baseline.ts's arguments (a server for the case), else Sluice. */
  baseline?: string[];
  tokens?: string[];
  /** POST /v1/auth/token with these bodies instead of GET ROUTE. */
  bodies?: unknown[];
  expect?: number;
  /** An open model at half the req/s of that (closed-model) case: its saturation. */
  halfOf?: string;
}

async function edge(): Promise<CaseResult[]> {
  say(`\n## edge: k6, ${VUS} VUs, ${DURATION} s per case, every server on ${WORKERS} processes`);
  const env = {
    ...sluiceEnv({ brokers: bench.brokers, prefix: bench.prefix, port: 0, dataDir: scratch.dataDir() }),
    SLUICE_ISSUER: '', // unset: from the port `sluice ingress` picks
    // The token case measures issuance itself: the per-client issuance limit (600/min) is off.
    SLUICE_TOKEN_RATE_PER_MINUTE: '0',
  };
  const sluice = await startIngress(children, 'sluice-ingress', bench.sluice, WORKERS, env);
  const base = `http://127.0.0.1:${sluice.port}`;
  const { issuer } = (await (await fetch(`${base}/.well-known/oauth-authorization-server`)).json()) as {
    issuer: string;
  };
  // One client per VU: none meets the per-client rate limit (default 10,000/s).
  const [wide, narrow] = await benchClients(bench.brokers, bench.prefix, VUS, ['admin', 'inference-reader']);
  const hot = await Promise.all(wide.map((c) => bearerToken(base, c)));
  const narrowed = await Promise.all(narrow.map((c) => bearerToken(base, c)));
  const grant = 'client_credentials';
  const bodies = wide.map(({ client_id, client_secret }) => ({ grant_type: grant, client_id, client_secret }));
  const conv = ['conventional', '--issuer', issuer, '--sluice', base];
  const plan: EdgeCase[] = [
    { id: 'bare', label: 'bare uWS, no auth (the ceiling)', baseline: ['bare'] },
    { id: 'hot', label: 'Sluice: hot token, region + scope check + rate limit + list', tokens: hot },
    { id: 'forbidden', label: 'Sluice: scope violation (403 problem+json)', tokens: narrowed, expect: 403 },
    { id: 'conv', label: 'node:http + jose.jwtVerify per request + scope check', baseline: conv, tokens: hot },
    { id: 'convCache', label: 'the same + verified-token cache', baseline: [...conv, '--cache'], tokens: hot },
    { id: 'issue', label: 'Sluice: issue a token (POST /v1/auth/token, ES256)', bodies },
    { id: 'halfSat', label: 'Sluice: hot token, open model at half of its saturation', tokens: hot, halfOf: 'hot' },
  ];
  const results: CaseResult[] = [];
  let sluiceWarm = false;
  for (const c of plan) {
    const of = results.find((r) => r.id === c.halfOf);
    const rate = of ? Math.max(10, Math.round(of.rps / 2)) : undefined;
    const { baseline, halfOf, ...fields } = c;
    const kind = (baseline?.[0] ?? 'sluice') as CaseSpec['server'];
    const method = c.bodies ? ('POST' as const) : ('GET' as const);
    const label = rate ? `${c.label} (${rate} req/s)` : c.label;
    const spec = { ...fields, label, server: kind, method, expect: c.expect ?? 200, vus: VUS, rate };
    // Each server's first case starts after a short unrecorded run (JIT, connection set-up).
    const measure = async (url: string, serverPid: number, warm: boolean) => {
      const s = { ...spec, url: `${url}${c.bodies ? '/v1/auth/token' : ROUTE}`, serverPid };
      const warmUp = { ...s, duration: WARM_UP, label: `(warm-up, not recorded) ${s.label}` };
      if (warm) await runCase(k6, join(scratch.path, `${c.id}-warm-up.json`), warmUp, say);
      return runCase(k6, join(scratch.path, `${c.id}.json`), { ...s, duration: DURATION }, say);
    };
    if (!c.baseline) {
      results.push(await measure(base, sluice.launched.proc.pid!, !sluiceWarm));
      sluiceWarm = true;
      continue;
    }
    // A baseline: its own server on --workers processes for this case.
    const port = await freePort();
    const args = [join(ROOT, 'bench/suite/baseline.ts'), ...c.baseline, '--port', `${port}`, '--workers', `${WORKERS}`];
    const server = children.spawn(c.id, RUN_TS, args, process.env, 'helper');
    await waitForLine(server, /^ready$/, 60_000, c.id);
    results.push(await measure(`http://127.0.0.1:${port}`, server.proc.pid!, true));
    server.proc.kill('SIGTERM');
    await server.exited;
  }
  sluice.launched.proc.kill('SIGTERM');
  await sluice.launched.exited;
  return results;
}

// ---------------------------------------------------------------- the other benches

/** A bench script as a child whose output is shown as it comes; resolves with its exit code. */
function runChild(name: string, args: string[], env = process.env): Promise<number> {
  const script = join(ROOT, `bench/${name}.ts`);
  const child = spawn(process.execPath, [RUN_TS, script, ...args], { cwd: ROOT, env, stdio: 'inherit' });
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
}

/** bench/revocation.ts --json's figures (ms). */
interface Revocation {
  fetchWaitMs: number;
  revocations: number;
  othersFromSent: { p50: number; p99: number; max: number };
  post201: { p50: number; p99: number; max: number };
  idleCpuPct: number[];
  idleSeconds: number;
  load: string;
}

async function revocation(): Promise<Revocation[]> {
  const out: Revocation[] = [];
  const [rounds, idle] = quick ? [20, 3] : [200, 30];
  const env = { ...process.env, KAFKA_BROKERS: bench.brokers.join(',') };
  for (const wait of [20, DEFAULT_FETCH_WAIT_MS]) {
    const json = join(scratch.path, `revocation-${wait}.json`);
    say(`\n## revocation, state consumer fetch wait ${wait} ms: ${rounds} revocations, then ${idle} s idle`);
    const args = ['--revocations', rounds, '--fetch-wait', wait, '--idle-seconds', idle, '--json', json];
    const code = await runChild('revocation', args.map(String), env);
    if (code !== 0) throw new Error(`bench/revocation.ts exited ${code}`);
    out.push({ ...JSON.parse(readFileSync(json, 'utf8')), fetchWaitMs: wait, load: loadAverage() });
  }
  return out;
}

// ---------------------------------------------------------------- run and report

async function main(): Promise<number> {
  const k6Version = execFileSync(k6, ['version'], { encoding: 'utf8' }).split('\n')[0].trim();
  say(`# bench suite${quick ? ' (--quick)' : ''}: ${only.join(', ')}; ${k6Version}; load average ${loadAverage()}`);
  if (only.includes('edge') || only.includes('revocation')) await bench.startKafka();
  const cases = only.includes('edge') ? await edge() : [];
  const revocations = only.includes('revocation') ? await revocation() : [];
  const others: { name: string; code: number; load: string }[] = [];
  for (const name of ['dispatch', 'state'].filter((n) => only.includes(n))) {
    say(`\n## ${name}: bench/${name}.ts${quick ? ' --quick' : ''}`);
    const args = [...(quick ? ['--quick'] : []), ...(opt.results ? ['--results', opt.results] : [])];
    if (name === 'dispatch' && opt['sluice-dir']) args.push('--sluice-dir', bench.sluiceDir);
    // The gate needs f10-single only: Sluice's CPU per delivery against the recorded figure.
    if (name === 'dispatch' && opt.check) args.push('--check', '--only', 'f10-single', '--skip-hops');
    const code = await runChild(name, args);
    others.push({ name, code, load: loadAverage() });
  }

  const verdicts = judge(cases, revocations, () => DURATION);
  const spread = (l: Revocation['post201']) => [l.p50, l.p99, l.max].map((x) => fmt(x, 1)).join(' / ');
  const ms = (x: number) => fmt(x, 2);
  /** The "other statuses" cell: a case's failures, and an open model's requests not sent. */
  const other = (c: CaseResult) =>
    (c.unexpected.length === 0 ? 'none' : `**${c.unexpected.map(([s, n]) => `${s}: ${n}`).join(', ')}**`) +
    (c.notSent ? ` (${fmt(c.notSent)} not sent: behind the rate)` : '');
  // One row per figure, one column per fetch wait.
  const revocationFigures: [string, (r: Revocation) => unknown][] = [
    ['revocations', (r) => r.revocations],
    ['every other node refuses: p50 / p99 / max ms', (r) => spread(r.othersFromSent)],
    ['POST → 201: p50 / p99 / max ms', (r) => spread(r.post201)],
    ['idle CPU per node (% of a core)', (r) => `${r.idleCpuPct.map((x) => fmt(x, 2)).join(', ')} (${r.idleSeconds} s)`],
    ['load average after', (r) => r.load],
  ];
  const kafka = `Kafka ${KAFKA_VERSION}; ${k6Version}`;
  const lines = [
    '## The suite (`npm run bench`)',
    '',
    ...provenance({ command: bench.command('bench'), sluiceDir: bench.sluiceDir, startedAt: bench.startedAt, kafka }),
    '',
    ...(quick ? ['**--quick: a smoke run, short cases: not a measurement.**', ''] : []),
  ];
  if (cases.length > 0)
    lines.push(
      `### Edge (k6, one case per run, ${VUS} VUs, ${DURATION} s each)`,
      '',
      `Every server on ${WORKERS} processes sharing one port (Sluice: \`sluice ingress --workers ${WORKERS}\`; ` +
        'the baselines: node:cluster), k6 on the same machine. Tokens: one client per VU, so the per-client ' +
        'rate limit (10,000/s) is on, as deployed, and never refuses. A row counts only the expected status; ' +
        'any other fails the case and is listed. Server CPU: all its processes (/proc, user + system) over ' +
        "the case, per response of any status: the route's cost, not k6's on the same cores.",
      '',
      ...table(
        ['case', 'expected', 'req/s', 'server CPU-ms per request', 'p50 ms', 'p99 ms', 'other statuses', 'load after'],
        cases.map((c) => [
          c.label,
          c.expect,
          fmt(c.rps),
          fmt(c.cpuMsPerRequest, 4),
          ms(c.p50),
          ms(c.p99),
          other(c),
          c.load,
        ]),
        'lrrrrrll',
      ),
      '',
    );
  if (revocations.length > 0)
    lines.push(
      '### Revocation across 3 `sluice ingress` processes, and idle CPU',
      '',
      '`bench/revocation.ts`: revocations one at a time through node 1, each node polled back to back from ' +
        'before the POST. "Every other node": per revocation, the later of nodes 2 and 3 to refuse the token, ' +
        "from sending the POST (node 1's writes and view, then the others' fetch). Idle CPU: each node's " +
        'user + system time (/proc) with no requests.',
      '',
      ...table(
        ['fetch wait', ...revocations.map((r) => `${r.fetchWaitMs} ms`)],
        revocationFigures.map(([name, cell]) => [name, ...revocations.map(cell)]),
      ),
      '',
    );
  for (const o of others)
    lines.push(
      `${o.name}: \`bench/${o.name}.ts${quick ? ' --quick' : ''}\` exited ${o.code}; its figures are in its own ` +
        `section${RESULTS ? '' : ' (not written: --quick)'} (load average after: ${o.load}).`,
      '',
    );
  if (verdicts.length > 0) {
    const rows = verdicts.map((v) => [v.name, v.measured, v.met ? 'met' : `**MISSED** ${v.by}`]);
    lines.push('### Targets', '', ...table(['target', 'measured', 'verdict'], rows, 'lrl'));
  }
  const report = lines.join('\n');
  say(`\n${report}`);
  if (RESULTS) {
    writeMarkedSection(RESULTS, 'suite', report, 'after-intro');
    say(`\nwrote the suite's section of ${RESULTS}`);
  }

  const failed = cases.some((c) => c.unexpected.length > 0) || others.some((o) => o.code !== 0);
  const missed = verdicts.filter((v) => !v.met);
  if (failed) say('\nFAILED: a case got statuses other than the expected one, or a scenario exited non-zero (above)');
  if (opt.check && missed.length > 0)
    say(`\n--check: ${missed.length} target(s) missed: ${missed.map((v) => v.name).join('; ')}`);
  const code = failed || (opt.check && missed.length > 0) ? 1 : 0;
  scratch.keepLogs = code !== 0;
  return code;
}

bench.run(main);
