/** One k6 run of bench/k6/case.js (a case of the suite or of the front-door bench) and what its summary says. */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../../harness/cli.ts';
import { treeCpuSec } from '../../harness/proc-cpu.ts';
import { fmt } from '../../harness/stats.ts';

/** The k6 binary (scripts/install-k6.sh installs it once). */
export const k6Binary = (): string =>
  execFileSync('bash', [join(ROOT, 'scripts/install-k6.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();

export interface CaseSpec {
  id: string;
  label: string;
  server: 'bare' | 'sluice' | 'conventional';
  method: 'GET' | 'POST';
  url: string;
  /** VU i sends token i mod n, body i mod n. */
  tokens?: string[];
  bodies?: unknown[];
  expect: number;
  duration: number;
  vus: number;
  /** Requests per second of an open model instead of closed-loop VUs. */
  rate?: number;
  /** PEM files of the client certificate an https URL is sent with. */
  clientCert?: { cert: string; key: string };
  /** The server's process: its CPU and its node children's over the run, per response. */
  serverPid?: number;
}

export interface CaseResult extends Pick<CaseSpec, 'id' | 'label' | 'expect'> {
  /** Responses with the expected status per second, and their latency (ms). */
  rps: number;
  p50: number;
  p99: number;
  /** [status, count] of every other status (0: no response), and a failed k6's exit code. */
  unexpected: [string, number][];
  /** Open model: requests never sent for want of a free VU (the server fell behind the rate). */
  notSent: number;
  /** The server's CPU ms (user + system, /proc) per response of any status. */
  cpuMsPerRequest: number | null;
  /** The load average after the case. */
  load: string;
}

/** The load average (1, 5, 15 min), for a case's or a run's figures on a shared machine. */
export const loadAverage = () => Array.from(loadavg(), (x) => x.toFixed(2)).join(' ');

type Summary = { metrics: Record<string, { values: Record<string, number> } | undefined> };

export async function runCase(
  k6: string,
  summaryFile: string,
  spec: CaseSpec,
  say: (line: string) => void,
): Promise<CaseResult> {
  const cpuBefore = spec.serverPid ? treeCpuSec(spec.serverPid) : 0;
  const env = { ...process.env, CASE: JSON.stringify({ ...spec, summaryFile }) };
  const args = ['run', '--quiet', '--no-usage-report', join(ROOT, 'bench/k6/case.js')];
  const run = spawn(k6, args, { env, stdio: ['ignore', 'ignore', 'inherit'] });
  const code = await new Promise<number>((resolve) => run.once('exit', (c, sig) => resolve(c ?? (sig ? 1 : 0))));
  const cpuSec = spec.serverPid ? treeCpuSec(spec.serverPid) - cpuBefore : null;
  const summary: Summary = existsSync(summaryFile) ? JSON.parse(readFileSync(summaryFile, 'utf8')) : { metrics: {} };
  const count = (name: string) => summary.metrics[name]?.values.count ?? 0;
  const unexpected: [string, number][] = Object.keys(summary.metrics)
    .filter((m) => m.startsWith('status_') && m !== `status_${spec.expect}` && count(m) > 0)
    .map((m) => [m.slice('status_'.length), count(m)]);
  // Answered: the expected responses and the other statuses, not "0" (no response).
  const answered = count('expected') + unexpected.reduce((n, [s, k]) => n + (s === '0' ? 0 : k), 0);
  if (code !== 0) unexpected.push(['k6 exit', code]);
  const latency = summary.metrics['http_req_duration{expected_response:true}']?.values ?? {};
  const r: CaseResult = {
    id: spec.id,
    label: spec.label,
    expect: spec.expect,
    rps: count('expected') / spec.duration,
    p50: latency.med ?? Number.NaN,
    p99: latency['p(99)'] ?? Number.NaN,
    unexpected,
    notSent: count('dropped_iterations'),
    cpuMsPerRequest: cpuSec === null || answered === 0 ? null : (cpuSec * 1000) / answered,
    load: loadAverage(),
  };
  say(
    `${spec.label}: ${Math.round(r.rps)} ${spec.expect}/s, p50 ${fmt(r.p50, 2)} ms, p99 ${fmt(r.p99, 2)} ms, ` +
      `server ${fmt(r.cpuMsPerRequest, 4)} CPU-ms/request, not sent ${r.notSent}, ` +
      `other statuses ${unexpected.map(([s, n]) => `${s}: ${n}`).join(', ') || 'none'} (load ${r.load})`,
  );
  return r;
}
