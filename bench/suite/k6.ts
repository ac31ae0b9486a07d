/** One edge case of the suite: a k6 run of bench/k6/case.js and what its summary says. */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../../harness/cli.ts';
import { treeCpuSec } from '../../harness/proc-cpu.ts';

const SCRIPT = join(ROOT, 'bench/k6/case.js');

/** The k6 binary (scripts/install-k6.sh installs it once). */
export const k6Binary = (): string =>
  execFileSync('bash', [join(ROOT, 'scripts/install-k6.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();

export interface CaseSpec {
  id: string;
  label: string;
  /** Which server answered: the ratios compare like with like. */
  server: 'bare' | 'sluice' | 'conventional';
  method: 'GET' | 'POST';
  url: string;
  tokens?: string[];
  bodies?: unknown[];
  expect: number;
  duration: number;
  vus: number;
  /** Requests per second of an open model instead of closed-loop VUs. */
  rate?: number;
  /** PEM files of the client certificate an https URL is sent with. */
  clientCert?: { cert: string; key: string };
  /** The server's process (its node children included): its CPU over the run, per request answered. */
  serverPid?: number;
}

export interface CaseResult {
  id: string;
  label: string;
  expect: number;
  /** Responses with the expected status per second of the case. */
  rps: number;
  /** Latency of the expected responses. */
  p50: number;
  p99: number;
  /** [status, count] of every other status (0: no response), and a failed k6. */
  unexpected: [string, number][];
  /**
   * Open model: requests k6 never sent for want of a free VU (the server fell behind the rate): shown, and the p99
   * target judges it.
   */
  notSent: number;
  /** The server's CPU (user + system, /proc, every process of it) per response of any status, in ms. */
  cpuMsPerRequest: number | null;
  load: string;
}

type Summary = { metrics: Record<string, { values: Record<string, number> } | undefined> };

export async function runCase(
  k6: string,
  summaryFile: string,
  spec: CaseSpec,
  say: (line: string) => void,
): Promise<CaseResult> {
  const env = {
    ...process.env,
    URL: spec.url,
    METHOD: spec.method,
    EXPECT: String(spec.expect),
    DURATION: String(spec.duration),
    VUS: String(spec.vus),
    TOKENS: (spec.tokens ?? []).join(','),
    BODIES: JSON.stringify(spec.bodies ?? []),
    RATE: String(spec.rate ?? 0),
    SUMMARY_FILE: summaryFile,
    TLS_CERT: spec.clientCert?.cert ?? '',
    TLS_KEY: spec.clientCert?.key ?? '',
  };
  const cpuBefore = spec.serverPid ? treeCpuSec(spec.serverPid) : 0;
  const code = await new Promise<number>((resolve) => {
    const child = spawn(k6, ['run', '--quiet', '--no-usage-report', SCRIPT], {
      env,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    child.once('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0)));
  });
  const summary: Summary = existsSync(summaryFile) ? JSON.parse(readFileSync(summaryFile, 'utf8')) : { metrics: {} };
  const count = (name: string) => summary.metrics[name]?.values.count ?? 0;
  const unexpected: [string, number][] = Object.keys(summary.metrics)
    .filter((m) => m.startsWith('status_') && m !== `status_${spec.expect}` && count(m) > 0)
    .map((m) => [m.slice('status_'.length), count(m)]);
  const cpuSec = spec.serverPid ? treeCpuSec(spec.serverPid) - cpuBefore : null;
  if (code !== 0) unexpected.push(['k6 exit', code]);
  const answered = count('expected') + unexpected.reduce((n, [s, k]) => n + (s === '0' || s === 'k6 exit' ? 0 : k), 0);
  const latency = summary.metrics['http_req_duration{expected_response:true}']?.values ?? {};
  const result: CaseResult = {
    id: spec.id,
    label: spec.label,
    expect: spec.expect,
    rps: count('expected') / spec.duration,
    p50: latency.med ?? Number.NaN,
    p99: latency['p(99)'] ?? Number.NaN,
    unexpected,
    notSent: count('dropped_iterations'),
    cpuMsPerRequest: cpuSec === null || answered === 0 ? null : (cpuSec * 1000) / answered,
    load: loadavg()
      .map((x) => x.toFixed(2))
      .join(' '),
  };
  const notSent = result.notSent ? `; ${result.notSent} not sent (no free VU: the server fell behind the rate)` : '';
  const failed = unexpected.length
    ? `; FAILED, other statuses: ${unexpected.map(([s, n]) => `${s}: ${n}`).join(', ')}`
    : '';
  say(
    `${spec.label}: ${Math.round(result.rps)} ${spec.expect}/s, ` +
      `p50 ${result.p50.toFixed(2)} ms, p99 ${result.p99.toFixed(2)} ms` +
      `${result.cpuMsPerRequest === null ? '' : `, server ${result.cpuMsPerRequest.toFixed(4)} CPU-ms/request`}` +
      `${notSent}${failed} (load ${result.load})`,
  );
  return result;
}
