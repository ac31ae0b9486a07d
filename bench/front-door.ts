/**
 * The front door measured: the edge's hot token (GET /v1/webhooks/endpoints?limit=1 with a cached,
 * valid token: region, scope and rate-limit checks, then the list; bench/suite/route.ts) reached
 * four ways in one run, by k6 on the same machine:
 *   plain    plain HTTP to `sluice ingress --workers N` (the base line)
 *   haproxy  HTTPS with a client certificate to HAProxy 2.6 on `sluice front-door`'s configuration
 *            (mTLS, the framing rules, the certificate headers), which forwards to the plain Sluice
 *   tls      HTTPS to a second Sluice (SLUICE_TLS_CERT/KEY: uWS's TLS app)
 *   mtls     HTTPS with a client certificate to a third (SLUICE_TLS_CLIENT_CA too: the node:tls
 *            client-certificate gate, ingress/client-cert-gate.ts)
 * All run side by side; the cases take turns in rounds (--rounds, default 3), so a burst of other
 * work on a shared machine touches one round of each case rather than one case, and a row is the
 * median of its rounds. k6 keeps its connections (one per VU): a case measures requests, not handshakes.
 *
 *   npm run bench:front-door -- [--quick] [--duration 10] [--rounds 3] [--vus 32] [--workers N]
 *       [--results FILE]
 *
 * Prints a table and, unless --quick (then only with --results), replaces the section between
 * `<!-- front-door:begin -->` and `<!-- front-door:end -->` of bench/RESULTS.md.
 * KAFKA_BROKERS: that cluster; otherwise a `sluice kafka` of its own. Exits 1 when a case saw a
 * status other than 200, 2 on an error.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { availableParallelism, cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { frontDoorConfig } from '../cli/commands/front-door.ts';
import { freePort } from '../core/net/free-port.ts';
import { makeCerts } from '../harness/certs.ts';
import { Children, stop } from '../harness/children.ts';
import { printHelp, ROOT, say } from '../harness/cli.ts';
import { benchKafka, dropBenchTopics } from '../harness/kafka.ts';
import { ProcSampler } from '../harness/proc-cpu.ts';
import { Scratch } from '../harness/scratch.ts';
import { benchClients, startIngress } from '../harness/sluice.ts';
import { bearerToken } from '../harness/sluice-api.ts';
import { fmt, median } from '../harness/stats.ts';
import { benchCommand, measuredCommit, writeMarkedSection } from '../harness/results-section.ts';
import { type CaseResult, k6Binary, runCase } from './suite/k6.ts';
import { ROUTE } from './suite/route.ts';

const SLUICE = join(ROOT, 'bin/sluice.js');
const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');

const { values: opt } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    duration: { type: 'string' },
    vus: { type: 'string' },
    workers: { type: 'string' },
    rounds: { type: 'string' },
    results: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (opt.help) printHelp(import.meta.url);
const quick = opt.quick === true;
const DURATION = Number(opt.duration ?? (quick ? 3 : 10));
const VUS = Number(opt.vus ?? 32);
const WORKERS = Number(opt.workers ?? availableParallelism());
const WARM_UP = quick ? 1 : 5;
const ROUNDS = Number(opt.rounds ?? (quick ? 1 : 3));
const RESULTS = opt.results ?? (quick ? null : join(ROOT, 'bench/RESULTS.md'));
// Debian puts it in /usr/sbin, which a user's PATH may not have.
const HAPROXY = ['haproxy', '/usr/sbin/haproxy'].find((bin) => !spawnSync(bin, ['-v']).error);
if (!HAPROXY) {
  say('haproxy is not installed: apt-get install haproxy');
  process.exit(2);
}
const haproxyVersion = execFileSync(HAPROXY, ['-v'], { encoding: 'utf8' }).split('\n')[0].split(' ')[2];

const scratch = new Scratch('bench-front-door');
const children = new Children(scratch.path, ROOT);
const certDir = join(scratch.path, 'certs');
mkdirSync(certDir);
const certs = makeCerts(certDir);
const clientCert = { cert: certs.client.cert, key: certs.client.key };
const prefix = `bench-front-door-${Date.now()}`;
let kafka: Awaited<ReturnType<typeof benchKafka>> | null = null;
let haproxy: ChildProcess | null = null;

async function shutdown(code: number): Promise<never> {
  if (haproxy) await stop(haproxy);
  await children.stopAll();
  if (kafka?.external) await dropBenchTopics(kafka.brokers, prefix);
  scratch.keepLogs = code !== 0;
  process.exit(code);
}
for (const [signal, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
] as const)
  process.on(signal, () => void shutdown(code));

/** `sluice ingress --workers N` on the bench's topics, with `env` added. */
const startSluice = (name: string, env: Record<string, string>) =>
  startIngress(children, name, SLUICE, WORKERS, {
    ...process.env,
    KAFKA_BROKERS: kafka!.brokers.join(','),
    SLUICE_TOPIC_PREFIX: prefix,
    SLUICE_HOST: '127.0.0.1',
    SLUICE_LOG_LEVEL: 'error',
    SLUICE_ISSUER: '',
    SLUICE_DATA_DIR: scratch.dataDir(name),
    ...env,
  });

interface Case {
  id: string;
  label: string;
  url: string;
  withCert: boolean;
  /** The processes whose CPU is Sluice's in this case. */
  sluicePids: () => number[];
  /** HAProxy's CPU counts in this case. */
  viaHaproxy: boolean;
}

interface Run {
  result: CaseResult;
  /** CPU-seconds per 1,000 answered requests. */
  sluiceCpu: number;
  haproxyCpu: number | null;
}

const k6 = k6Binary();

function specOf(c: Case, tokens: string[]) {
  return {
    id: c.id,
    label: c.label,
    server: 'sluice' as const,
    method: 'GET' as const,
    url: `${c.url}${ROUTE}`,
    tokens,
    expect: 200,
    vus: VUS,
    ...(c.withCert ? { clientCert } : {}),
  };
}

async function measure(c: Case, tokens: string[], round: number): Promise<Run> {
  const sampler = new ProcSampler(
    () =>
      new Map([
        ['sluice', c.sluicePids()],
        ['haproxy', haproxy?.pid ? [haproxy.pid] : []],
      ]),
  );
  const window = sampler.begin();
  const result = await runCase(
    k6,
    join(scratch.path, `${c.id}-${round}.json`),
    { ...specOf(c, tokens), duration: DURATION, label: `round ${round}, ${c.label}` },
    say,
  );
  const usage = sampler.end(window);
  sampler.stop();
  const perThousand = (cpuSec: number) => (result.rps > 0 ? (cpuSec / (result.rps * DURATION)) * 1000 : Number.NaN);
  return {
    result,
    sluiceCpu: perThousand(usage.get('sluice')!.cpuSec),
    haproxyCpu: c.viaHaproxy ? perThousand(usage.get('haproxy')!.cpuSec) : null,
  };
}

async function startHaproxy(upstreamPort: number): Promise<number> {
  const port = await freePort();
  const cfg = join(scratch.path, 'haproxy.cfg');
  writeFileSync(
    cfg,
    frontDoorConfig({
      listen: `127.0.0.1:${port}`,
      upstreams: [`127.0.0.1:${upstreamPort}`],
      cert: certs.server.pem,
      clientCa: certs.ca.cert,
    }),
  );
  haproxy = spawn(HAPROXY!, ['-f', cfg], { stdio: 'ignore' });
  for (const deadline = Date.now() + 10_000; ; await new Promise((r) => setTimeout(r, 100))) {
    if (haproxy.exitCode !== null) throw new Error(`haproxy exited ${haproxy.exitCode} (haproxy -c -f ${cfg})`);
    const up = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => resolve(true)).once('error', () => resolve(false));
      socket.once('close', () => socket.destroy());
      socket.once('connect', () => socket.end());
    });
    if (up) return port;
    if (Date.now() > deadline) throw new Error('haproxy does not listen');
  }
}

const startedLoad = load();
const machine =
  `${cpus().length} × ${cpus()[0]?.model.trim()}, ${Math.round(totalmem() / 2 ** 30)} GiB, Linux ${release()}, ` +
  `Node ${process.version}, HAProxy ${haproxyVersion}`;
say(`# front door bench${quick ? ' (--quick)' : ''}: ${machine}; load average ${startedLoad}`);

const cases: Case[] = [];
const runs = new Map<string, Run[]>();
try {
  kafka = await benchKafka(children, scratch, SLUICE, say);
  say(`\nstarting three \`sluice ingress --workers ${WORKERS}\` (plain, TLS, mTLS) and HAProxy before the plain one`);
  const plain = await startSluice('sluice-plain', {});
  const tls = await startSluice('sluice-tls', { SLUICE_TLS_CERT: certs.server.cert, SLUICE_TLS_KEY: certs.server.key });
  const mtls = await startSluice('sluice-mtls', {
    SLUICE_TLS_CERT: certs.server.cert,
    SLUICE_TLS_KEY: certs.server.key,
    SLUICE_TLS_CLIENT_CA: certs.ca.cert,
  });
  const doorPort = await startHaproxy(plain.port);
  const base = `http://127.0.0.1:${plain.port}`;
  // One client per VU: no client meets the per-client rate limit (10,000/s).
  const [clients] = await benchClients(kafka.brokers, prefix, VUS, ['admin']);
  const tokens = await Promise.all(clients.map((c) => bearerToken(base, c)));
  cases.push(
    {
      id: 'plain',
      label: 'plain HTTP to Sluice',
      url: base,
      withCert: false,
      sluicePids: plain.pids,
      viaHaproxy: false,
    },
    {
      id: 'haproxy',
      label: 'HTTPS + client certificate to HAProxy (sluice front-door), plain HTTP on to Sluice',
      url: `https://127.0.0.1:${doorPort}`,
      withCert: true,
      sluicePids: plain.pids,
      viaHaproxy: true,
    },
    {
      id: 'tls',
      label: "HTTPS to Sluice (uWS's TLS app)",
      url: `https://127.0.0.1:${tls.port}`,
      withCert: false,
      sluicePids: tls.pids,
      viaHaproxy: false,
    },
    {
      id: 'mtls',
      label: 'HTTPS + client certificate to Sluice (node:tls gate before uWS)',
      url: `https://127.0.0.1:${mtls.port}`,
      withCert: true,
      sluicePids: mtls.pids,
      viaHaproxy: false,
    },
  );
  say(`\n## warm-up, ${WARM_UP} s each (not recorded)`);
  for (const c of cases)
    await runCase(
      k6,
      join(scratch.path, `${c.id}-warm-up.json`),
      { ...specOf(c, tokens), duration: WARM_UP, label: `(warm-up) ${c.label}` },
      say,
    );
  // Rounds of every case in turn: a burst of other work on the machine touches one round of each, not one case.
  for (let round = 1; round <= ROUNDS; round++) {
    say(`\n## round ${round} of ${ROUNDS}`);
    for (const c of cases) runs.set(c.id, [...(runs.get(c.id) ?? []), await measure(c, tokens, round)]);
  }
} catch (err) {
  process.stderr.write(`front door bench: ${(err as Error).stack ?? err}\n`);
  await shutdown(2);
}

const failed = [...runs.values()].flat().some((r) => r.result.unexpected.length > 0);
const report = render();
say(`\n${report}`);
if (RESULTS) {
  writeMarkedSection(RESULTS, 'front-door', report);
  say(`\nwrote the front-door section of ${RESULTS}`);
}
await shutdown(failed ? 1 : 0);

function render(): string {
  const f = fmt;
  const of = (id: string) => runs.get(id) ?? [];
  const plainRps = median(of('plain').map((r) => r.result.rps));
  const lines = [
    '## The front door: hot token over HTTP, TLS, mTLS and through HAProxy (`npm run bench:front-door`)',
    '',
    `\`${benchCommand('bench:front-door', ROOT, kafka?.external ? kafka.brokers : null)}\`, ` +
      `${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, ` +
      `Sluice at ${measuredCommit(ROOT)}, on ${machine}. ` +
      `Load average at the start ${startedLoad}, at the end ${load()}.` +
      (quick ? ' **--quick: a smoke run, not a measurement.**' : ''),
    '',
    `k6, ${VUS} VUs (one token and one kept-alive connection each): \`GET ${ROUTE}\` with a valid cached token ` +
      '(region, scope and rate-limit checks, the list). Three `sluice ingress ' +
      `--workers ${WORKERS}\` run side by side (plain, TLS, mTLS; an idle one costs ~1 % of a core) and HAProxy ` +
      "(`sluice front-door`'s configuration, its default threads) before the plain one; k6 and every server " +
      `share the machine's ${cpus().length} cores. After ${WARM_UP} s of warm-up per case, ${ROUNDS} round(s) of ` +
      `every case in turn, ${DURATION} s each; a row is the median of its rounds (the rounds' req/s in brackets). ` +
      'CPU: user + system time of the Sluice processes (and of HAProxy) over the case, per 1,000 answered requests.',
    '',
    '| case | 200/s (rounds) | vs plain | p50 ms | p99 ms | Sluice CPU-s / 1,000 | HAProxy CPU-s / 1,000 | ' +
      'other statuses |',
    '|---|---:|---:|---:|---:|---:|---:|---|',
  ];
  for (const c of cases) {
    const rs = of(c.id);
    if (rs.length === 0) continue;
    const rps = median(rs.map((r) => r.result.rps));
    const unexpected = rs.flatMap((r) => r.result.unexpected);
    const other = unexpected.length ? `**${unexpected.map(([s, n]) => `${s}: ${n}`).join(', ')}**` : 'none';
    const haproxyCpu = c.viaHaproxy ? median(rs.map((r) => r.haproxyCpu ?? Number.NaN)) : null;
    lines.push(
      `| ${c.label} | ${f(rps)} (${rs.map((r) => f(r.result.rps)).join(', ')}) | ${f((rps / plainRps) * 100)} % | ` +
        `${f(median(rs.map((r) => r.result.p50)), 2)} | ${f(median(rs.map((r) => r.result.p99)), 2)} | ` +
        `${f(median(rs.map((r) => r.sluiceCpu)), 3)} | ${f(haproxyCpu, 3)} | ${other} |`,
    );
  }
  return lines.join('\n');
}
