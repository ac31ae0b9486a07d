/**
 * The benchmark suite: every scenario, each with its baseline in the same run, into bench/RESULTS.md.
 *
 *   npm run bench                      the whole suite; rewrites the suite's section of bench/RESULTS.md
 *   npm run bench -- --quick           a smoke of every scenario (short cases; dispatch and state in
 *                                      their own --quick form); writes nothing unless --results FILE
 *   npm run bench -- --check           exits 1 when a ratio or figure misses its target (a CI gate), or when
 *                                      Sluice's CPU per 1,000 deliveries in f10-single is over 125 % of RESULTS.md's
 *       [--only edge,revocation,dispatch,state] [--results FILE] [--workers N] [--duration S] [--vus N]
 *       [--sluice-dir DIR]   (measure another checkout's `sluice ingress`, e.g. a deliberately slowed one)
 *
 * Scenarios:
 *   edge        k6 against separate server processes, one case at a time, every server on --workers
 *               processes (default: the cores): bare uWS (the ceiling), Sluice `sluice ingress
 *               --workers N` with a hot token, a 403, token issuance and an open-model run at half
 *               the hot token's saturation, and the conventional stack (node:http + jose.jwtVerify per
 *               request + scope check) with and without a verified-token cache, on the same route.
 *   revocation  bench/revocation.ts: 3 `sluice ingress` processes, the state consumer's fetch wait at
 *               20 ms and at 500 ms: propagation from the POST, and idle CPU per node.
 *   dispatch    bench/dispatch.ts (writes its own section of RESULTS.md).
 *   state       bench/state.ts (writes its own section of RESULTS.md).
 * KAFKA_BROKERS: use that cluster; otherwise the suite runs its own `sluice kafka`.
 */
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { KAFKA_VERSION } from '../core/kafka/local-broker.ts';
import { freePort, freePorts } from '../core/net/free-port.ts';
import { Children, waitForLine } from '../harness/children.ts';
import { printHelp, ROOT, say } from '../harness/cli.ts';
import { fmt } from '../harness/stats.ts';
import { dropBenchTopics } from '../harness/kafka.ts';
import { Scratch } from '../harness/scratch.ts';
import { benchClients, startIngress } from '../harness/sluice.ts';
import { bearerToken } from '../harness/sluice-api.ts';
import { writeMarkedSection } from '../harness/results-section.ts';
import { ROUTE } from './suite/route.ts';
import { k6Binary, runCase, type CaseResult, type CaseSpec } from './suite/k6.ts';
import { DEFAULT_FETCH_WAIT_MS, judge, type Verdict } from './suite/targets.ts';

const RUN_TS = join(ROOT, 'bin/run-ts.js');
const SCENARIOS = ['edge', 'revocation', 'dispatch', 'state'] as const;

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
const only = opt.only ? opt.only.split(',') : [...SCENARIOS];
for (const s of only)
  if (!(SCENARIOS as readonly string[]).includes(s))
    throw new Error(`unknown scenario "${s}"; known: ${SCENARIOS.join(', ')}`);
const WORKERS = Number(opt.workers ?? availableParallelism());
const DURATION = Number(opt.duration ?? (quick ? 3 : 20));
const VUS = Number(opt.vus ?? 32);
const WARM_UP = quick ? 1 : 5;
const SLUICE_DIR = opt['sluice-dir'] ?? ROOT;
const RESULTS = opt.results ?? (quick ? null : join(ROOT, 'bench/RESULTS.md'));
const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');

const scratch = new Scratch('bench-suite');
const work = scratch.path;
const children = new Children(work, SLUICE_DIR);
let brokers: string[] = process.env.KAFKA_BROKERS?.split(',') ?? [];
const external = brokers.length > 0;
const prefix = `bench-suite-${Date.now()}`;
let failed = false;

async function shutdown(code: number): Promise<never> {
  await children.stopAll();
  if (external && only.includes('edge')) await dropBenchTopics(brokers, prefix);
  // Exiting removes the work directory: Kafka's data and the view stores always, the logs unless the run failed.
  scratch.keepLogs = code !== 0;
  process.exit(code);
}
for (const [signal, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
] as const)
  process.on(signal, () => void shutdown(code));

// ---------------------------------------------------------------- set-up

const k6 = k6Binary();
const k6Version = execFileSync(k6, ['version'], { encoding: 'utf8' }).trim().split('\n')[0];
const commit = (() => {
  try {
    return execFileSync('git', ['-C', SLUICE_DIR, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
})();
const machine =
  `${cpus().length} × ${cpus()[0]?.model.trim()}, ${Math.round(totalmem() / 2 ** 30)} GiB, ` +
  `Linux ${release()}, Node ${process.version}, ${k6Version}, Kafka ${KAFKA_VERSION}, ` +
  `Sluice ${commit}`;
say(`# bench suite${quick ? ' (--quick)' : ''}: ${only.join(', ')}; ${machine}; load average ${load()}`);

if (!external && (only.includes('edge') || only.includes('revocation'))) {
  const port = await freePorts(2);
  const kafka = children.spawn(
    'kafka',
    join(ROOT, 'bin/sluice.js'),
    ['kafka', '--port', String(port), '--data-dir', scratch.kafkaDir(), '--fresh'],
    { ...process.env, SLUICE_LOG_LEVEL: 'error' },
    'kafka',
  );
  await waitForLine(kafka, /ready at 127\.0\.0\.1:/, 120_000, 'sluice kafka');
  brokers = [`127.0.0.1:${port}`];
}

// ---------------------------------------------------------------- edge

interface EdgeReport {
  cases: CaseResult[];
  clients: number;
}

/** A baseline server (bench/suite/*.ts) for the duration of one case. */
async function withServer<T>(
  name: string,
  script: string,
  args: string[],
  fn: (base: string, pid: number) => Promise<T>,
): Promise<T> {
  const port = await freePort();
  const server = children.spawn(
    name,
    RUN_TS,
    [join(ROOT, 'bench/suite', script), '--port', String(port), '--workers', String(WORKERS), ...args],
    process.env,
    'helper',
  );
  await waitForLine(server, /^ready$/, 60_000, name);
  try {
    return await fn(`http://127.0.0.1:${port}`, server.proc.pid!);
  } finally {
    server.proc.kill('SIGTERM');
    await server.exited;
  }
}

async function edge(): Promise<EdgeReport> {
  const env = {
    ...process.env,
    KAFKA_BROKERS: brokers.join(','),
    SLUICE_TOPIC_PREFIX: prefix,
    SLUICE_HOST: '127.0.0.1',
    SLUICE_LOG_LEVEL: 'error',
    SLUICE_ISSUER: '',
    SLUICE_DATA_DIR: scratch.dataDir(),
    // The token case measures issuance itself: the per-client issuance limit (600/min) is off.
    SLUICE_TOKEN_RATE_PER_MINUTE: '0',
  };
  const { port, launched: sluice } = await startIngress(
    children,
    'sluice-ingress',
    join(SLUICE_DIR, 'bin/sluice.js'),
    WORKERS,
    env,
  );
  const base = `http://127.0.0.1:${port}`;
  const issuer = ((await (await fetch(`${base}/.well-known/oauth-authorization-server`)).json()) as { issuer: string })
    .issuer;

  // Enough clients that none meets the per-client rate limit (default 10,000/s): one per VU.
  const [wide, narrow] = await benchClients(brokers, prefix, VUS, ['admin', 'inference-reader']);
  const grant = (c: { client_id: string; client_secret: string }) => bearerToken(base, c);
  const wideTokens = await Promise.all(wide.map(grant));
  const narrowTokens = await Promise.all(narrow.map(grant));
  const bodies = wide.map((c) => ({
    grant_type: 'client_credentials',
    client_id: c.client_id,
    client_secret: c.client_secret,
  }));

  // Each server's first case starts after a short unrecorded run (JIT, connection set-up).
  const warmed = new Set<string>();
  const run = async (spec: Omit<CaseSpec, 'duration' | 'vus'>) => {
    const key = spec.url.split('/v1/')[0];
    if (!warmed.has(key)) {
      warmed.add(key);
      await runCase(
        k6,
        join(work, `${spec.id}-warm-up.json`),
        { duration: WARM_UP, vus: VUS, ...spec, label: `(warm-up, not recorded) ${spec.label}` },
        say,
      );
    }
    return runCase(k6, join(work, `${spec.id}.json`), { duration: DURATION, vus: VUS, ...spec }, say);
  };
  const cases: CaseResult[] = [];
  const get = (
    id: string,
    label: string,
    server: CaseSpec['server'],
    url: string,
    tokens: string[],
    expect = 200,
    serverPid = sluice.proc.pid!,
  ) => ({
    id,
    serverPid,
    label,
    server,
    method: 'GET' as const,
    url: `${url}${ROUTE}`,
    tokens,
    expect,
  });
  cases.push(
    await withServer('bare-uws', 'bare-uws.ts', [], (b, pid) =>
      run(get('bare', 'bare uWS, no auth (the ceiling)', 'bare', b, [], 200, pid)),
    ),
  );
  cases.push(
    await run(get('hot', 'Sluice: hot token, region + scope check + rate limit + list', 'sluice', base, wideTokens)),
  );
  cases.push(
    await run(get('forbidden', 'Sluice: scope violation (403 problem+json)', 'sluice', base, narrowTokens, 403)),
  );
  cases.push(
    await withServer('conventional', 'conventional.ts', ['--issuer', issuer, '--sluice', base], (b, pid) =>
      run(get('conv', 'node:http + jose.jwtVerify per request + scope check', 'conventional', b, wideTokens, 200, pid)),
    ),
  );
  cases.push(
    await withServer(
      'conventional-cache',
      'conventional.ts',
      ['--issuer', issuer, '--sluice', base, '--cache'],
      (b, pid) => run(get('convCache', 'the same + verified-token cache', 'conventional', b, wideTokens, 200, pid)),
    ),
  );
  cases.push(
    await run({
      id: 'issue',
      label: 'Sluice: issue a token (POST /v1/auth/token, ES256)',
      server: 'sluice',
      method: 'POST',
      url: `${base}/v1/auth/token`,
      bodies,
      expect: 200,
      serverPid: sluice.proc.pid!,
    }),
  );
  const hot = cases.find((c) => c.id === 'hot')!;
  const half = Math.max(10, Math.round(hot.rps / 2));
  cases.push(
    await run({
      ...get(
        'halfSat',
        `Sluice: hot token, open model at half of its saturation (${half} req/s)`,
        'sluice',
        base,
        wideTokens,
      ),
      rate: half,
    }),
  );
  sluice.proc.kill('SIGTERM');
  await sluice.exited;
  return { cases, clients: VUS };
}

// ---------------------------------------------------------------- revocation

interface Revocation {
  fetchWaitMs: number;
  revocations: number;
  othersFromSent: { p50: number; p99: number; max: number };
  fromSent: { p50: number; p99: number; max: number }[];
  post201: { p50: number; p99: number; max: number };
  idleCpuPct: number[];
  idleSeconds: number;
  load: string;
}

async function revocation(): Promise<Revocation[]> {
  const out: Revocation[] = [];
  for (const wait of [20, DEFAULT_FETCH_WAIT_MS]) {
    const json = join(work, `revocation-${wait}.json`);
    const rounds = quick ? 20 : 200;
    const idle = quick ? 3 : 30;
    say(`\n## revocation, state consumer fetch wait ${wait} ms: ${rounds} revocations, then ${idle} s idle`);
    const code = await runChild(
      'revocation',
      [
        join(ROOT, 'bench/revocation.ts'),
        '--revocations',
        String(rounds),
        '--fetch-wait',
        String(wait),
        '--idle-seconds',
        String(idle),
        '--json',
        json,
      ],
      { KAFKA_BROKERS: brokers.join(',') },
    );
    if (code !== 0) throw new Error(`bench/revocation.ts exited ${code}`);
    out.push({
      ...(JSON.parse(readFileSync(json, 'utf8')) as Omit<Revocation, 'load'>),
      fetchWaitMs: wait,
      load: load(),
    });
  }
  return out;
}

/** A bench script as a child whose output is shown as it comes. */
function runChild(name: string, args: string[], env: Record<string, string>): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [RUN_TS, ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    child.once('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
    void name;
  });
}

// ---------------------------------------------------------------- run

const startedLoad = load();
let edgeReport: EdgeReport | null = null;
let revocations: Revocation[] = [];
const others: { name: string; code: number; load: string }[] = [];
try {
  if (only.includes('edge')) {
    say(`\n## edge: k6, ${VUS} VUs, ${DURATION} s per case, every server on ${WORKERS} processes`);
    edgeReport = await edge();
  }
  if (only.includes('revocation')) revocations = await revocation();
  for (const name of ['dispatch', 'state'] as const) {
    if (!only.includes(name)) continue;
    say(`\n## ${name}: bench/${name}.ts${quick ? ' --quick' : ''}`);
    const args = [
      join(ROOT, `bench/${name}.ts`),
      ...(quick ? ['--quick'] : []),
      ...(RESULTS && RESULTS !== join(ROOT, 'bench/RESULTS.md') ? ['--results', RESULTS] : []),
      ...(name === 'dispatch' && opt['sluice-dir'] ? ['--sluice-dir', SLUICE_DIR] : []),
      // The gate needs f10-single only: Sluice's CPU per delivery against the recorded figure.
      ...(name === 'dispatch' && opt.check ? ['--check', '--only', 'f10-single', '--skip-hops'] : []),
    ];
    const code = await runChild(name, args, external ? { KAFKA_BROKERS: brokers.join(',') } : {});
    others.push({ name, code, load: load() });
    if (code !== 0) failed = true;
  }
} catch (err) {
  process.stderr.write(`bench suite: ${(err as Error).stack ?? err}\n`);
  await shutdown(2);
}

// ---------------------------------------------------------------- report

const verdicts: Verdict[] = judge(edgeReport?.cases ?? [], revocations, () => DURATION);
for (const c of edgeReport?.cases ?? []) if (c.unexpected.length > 0) failed = true;
const report = renderReport();
say(`\n${report}`);
if (RESULTS) {
  writeMarkedSection(RESULTS, 'suite', report, 'after-intro');
  say(`\nwrote the suite's section of ${RESULTS}`);
}
const missed = verdicts.filter((v) => !v.met);
if (failed) say('\nFAILED: a case got statuses other than the expected one, or a scenario exited non-zero (above)');
if (opt.check && missed.length > 0)
  say(`\n--check: ${missed.length} target(s) missed: ${missed.map((v) => v.name).join('; ')}`);
await shutdown(failed || (opt.check && missed.length > 0) ? 1 : 0);

function renderReport(): string {
  const f = fmt;
  const lines: string[] = [];
  lines.push(`## The suite (\`npm run bench${quick ? ' -- --quick' : ''}\`)`, '');
  lines.push(`Run ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC on ${machine}.`);
  lines.push(
    `Load average (1, 5, 15 min) at the start: ${startedLoad}; at the end: ` +
      `${load()}.${quick ? ' **--quick: a smoke run, short cases: not a measurement.**' : ''}`,
    '',
  );
  if (edgeReport) {
    lines.push(`### Edge (k6, one case per run, ${VUS} VUs, ${DURATION} s each)`, '');
    lines.push(
      `Every server runs on ${WORKERS} processes sharing one port (Sluice: ` +
        `\`sluice ingress --workers ${WORKERS}\`; the baselines: node:cluster), ` +
        `k6 on the same machine. The hot-token and 403 cases use ${edgeReport.clients} clients ` +
        `(one token per VU), so no client reaches the default per-client rate limit (10,000/s): ` +
        `the limiter is on, as deployed, and never refuses. ` +
        `Token issuance uses the same ${edgeReport.clients} clients. ` +
        `A row counts only the expected status; any other status fails the case and is listed. ` +
        `Server CPU: every process of the server (/proc, user + system) over the case, per response ` +
        `of any status: what the route costs, whatever k6 itself costs on the same cores.`,
      '',
    );
    lines.push(
      '| case | expected | req/s | server CPU-ms per request | p50 ms | p99 ms | other statuses | load avg after |',
      '|---|---:|---:|---:|---:|---:|---|---|',
    );
    for (const c of edgeReport.cases) {
      const otherStatuses =
        c.unexpected.length === 0 ? 'none' : `**${c.unexpected.map(([s, n]) => `${s}: ${n}`).join(', ')}**`;
      const notSent = c.notSent ? ` (${f(c.notSent)} not sent: behind the rate)` : '';
      lines.push(
        `| ${c.label} | ${c.expect} | ${f(c.rps)} | ${c.cpuMsPerRequest === null ? '—' : f(c.cpuMsPerRequest, 4)} | ` +
          `${f(c.p50, 2)} | ${f(c.p99, 2)} | ` +
          `${otherStatuses}${notSent} | ${c.load} |`,
      );
    }
    lines.push('');
  }
  if (revocations.length > 0) {
    lines.push('### Revocation across 3 `sluice ingress` processes, and idle CPU', '');
    lines.push(
      '`bench/revocation.ts`: revocations one at a time through node 1; ' +
        'each node polled back to back from before the POST. ' +
        '"Every other node" = per revocation, the later of nodes 2 and 3 to refuse the token, ' +
        "timed from sending the POST (audit append, revocation record, node 1's view, " +
        "then the others' fetch). Idle CPU: each node's user + system time over the idle window " +
        '(/proc), no requests.',
      '',
    );
    lines.push(
      '| fetch wait | revocations | every other node refuses (from the POST) p50 / p99 / max ' +
        'ms | POST → 201 p50 / p99 ms | idle CPU per node (% of a core) | load avg after |',
      '|---:|---:|---|---|---|---|',
    );
    for (const r of revocations)
      lines.push(
        `| ${r.fetchWaitMs} ms | ${r.revocations} | ${f(r.othersFromSent.p50, 1)} / ` +
          `${f(r.othersFromSent.p99, 1)} / ${f(r.othersFromSent.max, 1)} | ` +
          `${f(r.post201.p50, 1)} / ${f(r.post201.p99, 1)} | ` +
          `${r.idleCpuPct.map((x) => f(x, 2)).join(', ')} (${r.idleSeconds} s) | ${r.load} |`,
      );
    lines.push('');
  }
  for (const o of others)
    lines.push(
      `${o.name}: \`bench/${o.name}.ts${quick ? ' --quick' : ''}\` exited ${o.code}; ` +
        `its figures are in its own section${RESULTS ? '' : ' (not written: --quick)'} (load ` +
        `average after: ${o.load}).`,
    );
  if (others.length > 0) lines.push('');
  if (verdicts.length > 0) {
    lines.push('### Targets', '', '| target | measured | verdict |', '|---|---:|---|');
    for (const v of verdicts) lines.push(`| ${v.name} | ${v.measured} | ${v.met ? 'met' : `**MISSED** ${v.by}`} |`);
    lines.push('');
  }
  return lines.join('\n');
}
