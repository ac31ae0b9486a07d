/**
 * The front door measured: the edge's hot token (bench/suite/route.ts with a cached, valid token)
 * reached four ways in one run by k6: plain HTTP to `sluice ingress --workers N` (the base line);
 * HTTPS with a client certificate to HAProxy 2.6 on `sluice front-door`'s configuration, forwarding
 * to the plain one; HTTPS to a second Sluice (uWS's TLS app); HTTPS with a client certificate to a
 * third (the node:tls gate, ingress/client-cert-gate.ts). The cases take turns in rounds, so a burst
 * of other work touches one round of each case rather than one case.
 *
 *   npm run bench:front-door -- [--quick] [--duration 10] [--rounds 3] [--vus 32] [--workers N]
 *       [--results FILE]
 *
 * Writes the `front-door` section of bench/RESULTS.md (with --quick only to --results). Exits 1
 * when a case saw a status other than 200, 2 on an error.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { availableParallelism, cpus } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { frontDoorConfig } from '../cli/commands/front-door.ts';
import { freePort } from '../core/net/free-port.ts';
import { BenchRun } from '../harness/bench.ts';
import { makeCerts } from '../harness/certs.ts';
import { stop } from '../harness/children.ts';
import { printHelp, resultsFile, say, sleep, writeResults } from '../harness/cli.ts';
import { ProcSampler } from '../harness/proc-cpu.ts';
import { provenance, table } from '../harness/report.ts';
import { benchClients, startIngress } from '../harness/sluice.ts';
import { bearerToken } from '../harness/sluice-api.ts';
import { fmt, median } from '../harness/stats.ts';
import { type CaseResult, k6Binary, runCase } from './suite/k6.ts';
import { ROUTE } from './suite/route.ts';

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
// Debian puts it in /usr/sbin, which a user's PATH may not have.
const HAPROXY = ['haproxy', '/usr/sbin/haproxy'].find((bin) => !spawnSync(bin, ['-v']).error);
if (!HAPROXY) {
  say('haproxy is not installed: apt-get install haproxy');
  process.exit(2);
}
const haproxyVersion = execFileSync(HAPROXY, ['-v'], { encoding: 'utf8' }).split('\n')[0].split(' ')[2];
const bench = new BenchRun('bench-front-door', undefined, 'bench-front-door');
const k6 = k6Binary();

interface Case {
  id: string;
  label: string;
  url: string;
  withCert: boolean;
  /** The processes whose CPU is Sluice's in this case. */
  sluicePids: () => number[];
  /** HAProxy's process, when the case goes through it. */
  haproxy: ChildProcess | null;
}

/** One round of a case: k6's result, and CPU-seconds per 1,000 answered requests. */
interface Run {
  result: CaseResult;
  sluiceCpu: number;
  haproxyCpu: number | null;
}

/** HAProxy on `sluice front-door`'s configuration before `upstreamPort`, once it listens. */
async function startHaproxy(upstreamPort: number, certs: ReturnType<typeof makeCerts>) {
  const port = await freePort();
  const cfg = join(bench.scratch.path, 'haproxy.cfg');
  const upstreams = [`127.0.0.1:${upstreamPort}`];
  writeFileSync(
    cfg,
    frontDoorConfig({ listen: `127.0.0.1:${port}`, upstreams, cert: certs.server.pem, clientCa: certs.ca.cert }),
  );
  const proc = spawn(HAPROXY!, ['-f', cfg], { stdio: 'ignore' });
  bench.onShutdown(() => stop(proc));
  const listens = () =>
    new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('error', () => resolve(false));
      socket.once('connect', () => {
        resolve(true);
        socket.end();
      });
    });
  for (const deadline = Date.now() + 10_000; !(await listens()); await sleep(100)) {
    if (proc.exitCode !== null) throw new Error(`haproxy exited ${proc.exitCode} (haproxy -c -f ${cfg})`);
    if (Date.now() > deadline) throw new Error('haproxy does not listen');
  }
  return { port, proc };
}

async function main(): Promise<number> {
  const certDir = join(bench.scratch.path, 'certs');
  mkdirSync(certDir);
  const certs = makeCerts(certDir);
  const clientCert = { cert: certs.client.cert, key: certs.client.key };
  const { brokers } = await bench.startKafka();
  const tlsEnv = { SLUICE_TLS_CERT: certs.server.cert, SLUICE_TLS_KEY: certs.server.key };
  const startSluice = (name: string, env: Record<string, string>) =>
    startIngress(bench.children, name, bench.sluice, WORKERS, {
      ...process.env,
      KAFKA_BROKERS: brokers.join(','),
      SLUICE_TOPIC_PREFIX: bench.prefix,
      SLUICE_HOST: '127.0.0.1',
      SLUICE_LOG_LEVEL: 'error',
      SLUICE_ISSUER: '',
      SLUICE_DATA_DIR: bench.scratch.dataDir(name),
      ...env,
    });
  say(`\nstarting three \`sluice ingress --workers ${WORKERS}\` (plain, TLS, mTLS) and HAProxy before the plain one`);
  const plain = await startSluice('sluice-plain', {});
  const tls = await startSluice('sluice-tls', tlsEnv);
  const mtls = await startSluice('sluice-mtls', { ...tlsEnv, SLUICE_TLS_CLIENT_CA: certs.ca.cert });
  const door = await startHaproxy(plain.port, certs);
  const base = `http://127.0.0.1:${plain.port}`;
  // One client per VU: no client meets the per-client rate limit (10,000/s).
  const [clients] = await benchClients(brokers, bench.prefix, VUS, ['admin']);
  const tokens = await Promise.all(clients.map((c) => bearerToken(base, c)));
  const https = (port: number) => `https://127.0.0.1:${port}`;
  const cases: Case[] = [
    { id: 'plain', label: 'plain HTTP to Sluice', url: base, withCert: false, sluicePids: plain.pids, haproxy: null },
    {
      id: 'haproxy',
      label: 'HTTPS + client certificate to HAProxy (sluice front-door), plain HTTP on to Sluice',
      url: https(door.port),
      withCert: true,
      sluicePids: plain.pids,
      haproxy: door.proc,
    },
    {
      id: 'tls',
      label: "HTTPS to Sluice (uWS's TLS app)",
      url: https(tls.port),
      withCert: false,
      sluicePids: tls.pids,
      haproxy: null,
    },
    {
      id: 'mtls',
      label: 'HTTPS + client certificate to Sluice (node:tls gate before uWS)',
      url: https(mtls.port),
      withCert: true,
      sluicePids: mtls.pids,
      haproxy: null,
    },
  ];
  const k6Run = (c: Case, duration: number, name: string, label: string) =>
    runCase(
      k6,
      join(bench.scratch.path, `${c.id}-${name}.json`),
      {
        id: c.id,
        server: 'sluice',
        method: 'GET',
        url: `${c.url}${ROUTE}`,
        tokens,
        expect: 200,
        vus: VUS,
        duration,
        label,
        ...(c.withCert ? { clientCert } : {}),
      },
      say,
    );

  say(`\n## warm-up, ${WARM_UP} s each (not recorded)`);
  for (const c of cases) await k6Run(c, WARM_UP, 'warm-up', `(warm-up) ${c.label}`);
  const runs = new Map<Case, Run[]>(cases.map((c) => [c, []]));
  for (let round = 1; round <= ROUNDS; round++) {
    say(`\n## round ${round} of ${ROUNDS}`);
    for (const c of cases) {
      const sampler = new ProcSampler(
        () =>
          new Map([
            ['sluice', c.sluicePids()],
            ['haproxy', c.haproxy?.pid ? [c.haproxy.pid] : []],
          ]),
      );
      const window = sampler.begin();
      const result = await k6Run(c, DURATION, String(round), `round ${round}, ${c.label}`);
      const usage = sampler.end(window);
      sampler.stop();
      const perThousand = (cpuSec: number) => (cpuSec / (result.rps * DURATION)) * 1000;
      const haproxyCpu = c.haproxy ? perThousand(usage.get('haproxy')!.cpuSec) : null;
      runs.get(c)!.push({ result, sluiceCpu: perThousand(usage.get('sluice')!.cpuSec), haproxyCpu });
    }
  }
  const report = render(cases, runs);
  say(`\n${report}`);
  writeResults(resultsFile(opt.results, quick), 'front-door', report);
  return [...runs.values()].flat().some((r) => r.result.unexpected.length > 0) ? 1 : 0;
}

function render(cases: Case[], runs: Map<Case, Run[]>): string {
  const med = (rs: Run[], pick: (r: Run) => number | null) => median(rs.map((r) => pick(r) ?? Number.NaN));
  const plainRps = med(runs.get(cases[0])!, (r) => r.result.rps);
  const rows = cases.map((c) => {
    const rs = runs.get(c)!;
    const rps = med(rs, (r) => r.result.rps);
    const unexpected = rs.flatMap((r) => r.result.unexpected);
    return [
      c.label,
      `${fmt(rps)} (${rs.map((r) => fmt(r.result.rps)).join(', ')})`,
      `${fmt((rps / plainRps) * 100)} %`,
      fmt(
        med(rs, (r) => r.result.p50),
        2,
      ),
      fmt(
        med(rs, (r) => r.result.p99),
        2,
      ),
      fmt(
        med(rs, (r) => r.sluiceCpu),
        3,
      ),
      c.haproxy
        ? fmt(
            med(rs, (r) => r.haproxyCpu),
            3,
          )
        : null,
      unexpected.length ? `**${unexpected.map(([s, n]) => `${s}: ${n}`).join(', ')}**` : 'none',
    ];
  });
  return [
    '## The front door: hot token over HTTP, TLS, mTLS and through HAProxy (`npm run bench:front-door`)',
    '',
    ...provenance({
      command: bench.command('bench:front-door'),
      sluiceDir: bench.sluiceDir,
      startedAt: bench.startedAt,
      load1: bench.load1,
    }),
    ...(quick ? ['', '**--quick: a smoke run, not a measurement.**'] : []),
    '',
    `k6, ${VUS} VUs (one token and one kept-alive connection each: requests, not handshakes): \`GET ${ROUTE}\` ` +
      'with a valid cached token. Three `sluice ingress ' +
      `--workers ${WORKERS}\` side by side (plain, TLS, mTLS; an idle one costs ~1 % of a core) and HAProxy ` +
      `${haproxyVersion} (its default threads) before the plain one share the machine's ${cpus().length} ` +
      'cores with k6. ' +
      `${WARM_UP} s of warm-up per case, then ${ROUNDS} round(s) of every case in turn, ${DURATION} s each; a row ` +
      'is the median of its rounds (each round in brackets). CPU: user + system time of the Sluice processes ' +
      '(and of HAProxy) over the case, per 1,000 answered requests.',
    '',
    ...table(
      [
        'case',
        '200/s (rounds)',
        'vs plain',
        'p50 ms',
        'p99 ms',
        'Sluice CPU-s / 1,000',
        'HAProxy CPU-s / 1,000',
        'other statuses',
      ],
      rows,
      'lrrrrrrl',
    ),
  ].join('\n');
}

bench.run(main);
