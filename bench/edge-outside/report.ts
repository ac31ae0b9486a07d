/**
 * The edge-from-outside bench's markdown section (written between `<!-- edge-outside:begin/end -->`)
 * and the list of unexpected statuses that makes it exit 1.
 */
import { cpus, release, totalmem, type } from 'node:os';
import { KAFKA_VERSION } from '../../core/kafka/local-broker.ts';
import type { Usage } from '../harness/proc-cpu.ts';
import { benchCommand, measuredCommit } from '../results-section.ts';
import type { RevocationResult, TokenResult } from '../harness/ipc.ts';
import { fmt } from '../harness/stats.ts';

export interface TokenCase {
  label: string;
  result: TokenResult;
  /** CPU per process group over the measured seconds. */
  usage: Map<string, Usage>;
  /** Cores busy on the whole machine over the same seconds (/proc/stat): ours and anyone else's. */
  machineCores: number;
}

export interface Figures {
  command: Parameters<typeof benchCommand>;
  startedAt: Date;
  load1: number;
  brokers: string[];
  externalKafka: boolean;
  workers: number;
  /** Made by `sluice admin create-client` runs, in cliSeconds; bulkClients by provision.ts; createSeconds in all. */
  cliClients: number;
  cliSeconds: number;
  bulkClients: number;
  createSeconds: number;
  connections: number;
  warmUpSeconds: number;
  seconds: number;
  tokenCases: TokenCase[];
  revocations: number;
  revocation: RevocationResult;
  roundTimeoutMs: number;
  settleSeconds: number;
  idleSeconds: number;
  idle: Map<string, Usage>;
  idleMachineCores: number;
}

const ms = (x: number | null | undefined) => fmt(x, x !== null && x !== undefined && x < 10 ? 2 : 1);
const cpu = (u: Map<string, Usage>, name: string) => u.get(name)?.cpuSec ?? 0;
/** CPU-s of the processes of this bench that run Sluice or the load. */
const ours = (u: Map<string, Usage>) => cpu(u, 'sluice start') + cpu(u, 'sluice ingress') + cpu(u, 'load generator');
const workerNames = (u: Map<string, Usage>) => [...u.keys()].filter((k) => k.startsWith('sluice start: worker'));

/** p50, p99 and max of the rounds that saw one, and how many never did (NaN). */
function spread(xs: number[]) {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  const at = (p: number) =>
    s.length ? s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] : null;
  return { n: s.length, p50: at(50), p99: at(99), max: s.length ? s[s.length - 1] : null, never: xs.length - s.length };
}

export function report(f: Figures): string {
  const kafkaHow = f.externalKafka
    ? `already running (${f.brokers.join(',')})`
    : 'started by the bench (`sluice kafka`)';
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
    return `| ${label} | ${fmt(c, 2)} | ${fmt((100 * c) / f.idleSeconds, 2)} % |`;
  };
  return [
    '## The token edge from outside, every piece its own OS process (`npm run bench:edge-outside`)',
    '',
    `Run: ${f.startedAt.toISOString().slice(0, 10)}, Sluice at ${measuredCommit(f.command[1])}. ` +
      `Command: \`${benchCommand(...f.command)}\``,
    '',
    `Machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ${fmt(totalmem() / 2 ** 30, 1)} GiB, ` +
      `${type()} ${release()}, Node ${process.version}; Kafka ${KAFKA_VERSION} ${kafkaHow}; ` +
      `${f.startedAt.toISOString()}; 1-min load average at start ${fmt(f.load1, 2)} (the machine may be shared).`,
    '',
    `Processes, each its own OS process on this machine: Kafka; node 1 = \`sluice start\` (primary + ` +
      `${f.workers} cluster workers, its default of one per core, each ingress + dispatcher); node 2 = ` +
      '`sluice ingress`; the load generator (bench/harness/load.ts: undici, keep-alive, pipelining 1). ' +
      `Before the cases, ${fmt(f.cliClients)} clients (the token clients and the officer) were made by ` +
      `\`sluice admin create-client\` runs, one at a time (${fmt(f.cliSeconds, 1)} s), and the ` +
      `${fmt(f.bulkClients)} revocation victims by one process doing the same (bench/edge-outside/provision.ts; ` +
      `${fmt(f.createSeconds - f.cliSeconds, 1)} s until every Sluice process had them all). ` +
      "Both nodes share one issuer (node 1's URL). " +
      '`SLUICE_TOKEN_RATE_PER_MINUTE=0`: the per-client token rate limit (default 600/min per node) is off, ' +
      'so case 1 measures the issuance ceiling, not the limit. `SLUICE_RATE_LIMIT_PER_CLIENT` keeps its ' +
      "default (10,000 requests/s per client per process, burst 20,000): a revocation round's polls stay far below it.",
    '',
    `### 1. Token issuance: closed model, ${f.connections} connections, POST /v1/auth/token to node 1`,
    '',
    `${f.warmUpSeconds} s warm-up (not counted), then ${f.seconds} s. tokens/s counts only the 200s; latency ` +
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
    `### 2. Revocation seen by a client: ${fmt(f.revocations)} rounds, one at a time`,
    '',
    'Each round: a fresh token of a victim (role security-officer) from node 1, checked (200) on both nodes; ' +
      'then both nodes polled back to back with it (GET /v1/audit?limit=1, one keep-alive connection each) ' +
      "while node 1 gets POST /v1/auth/revocations with the officer's token. Times run from sending the POST. " +
      'Only a TOKEN_REVOKED 401 to a poll sent after the POST counts: a poll in flight when the POST left ' +
      `that answers 200 is one more poll. Resolution: one poll round trip (p50 ${ms(rev.pollP50)} ms, ` +
      `p99 ${ms(rev.pollP99)} ms over ${fmt(rev.polls)} polls). One unreported round first. Node 1's POST ` +
      'and its polls travel on different connections, so possibly to different workers of `sluice start`.',
    '',
    `| from sending the POST until | rounds | p50 ms | p99 ms | max ms | never (${fmt(f.roundTimeoutMs / 1000)} s) |`,
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
    `### 3. Idle CPU: ${f.idleSeconds} s with no requests, after ${f.settleSeconds} s settling`,
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

/** Every answer a case did not expect: token requests other than 200, revocation rounds gone wrong. */
export function unexpectedOf(f: Figures): string[] {
  const out: string[] = [];
  for (const c of f.tokenCases)
    for (const [k, v] of Object.entries(c.result.statuses)) if (k !== '200') out.push(`tokens, ${c.label}: ${k} ×${v}`);
  for (const [k, v] of Object.entries(f.revocation.unexpected)) out.push(`revocation, ${k} ×${v}`);
  return out;
}
