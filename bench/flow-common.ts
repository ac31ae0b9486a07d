/** What the flow benches (flow-control, noisy-neighbour, recovery) share: options, processes, receiver, section. */
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { freePort } from '../core/net/free-port.ts';
import type { BenchRun } from '../harness/bench.ts';
import { checkLabel, printHelp, ROOT, resultsFile, say, sleep, writeResults } from '../harness/cli.ts';
import { settleGroups } from '../harness/kafka.ts';
import type { PortStats } from '../harness/receiver.ts';
import { provenance } from '../harness/report.ts';
import { type Dispatcher, RECEIVER_ENV, sluiceEnv, startDispatchers } from '../harness/sluice.ts';
import { adminClient, bearerToken, sluiceApi } from '../harness/sluice-api.ts';
import { fmt, type Latency } from '../harness/stats.ts';

type Args = { label: string; quick: boolean; results?: string };
type Block = string | string[] | false;
/** The consumer groups every Sluice process with a dispatcher joins (harness/kafka.ts settleGroups). */
const GROUPS = ['fan-out', 'dispatch', 'dispatch-rungs', 'dispatch-lanes'];

/**
 * --quick, --label, --results, --help and the bench's own options: `numbers` (name → [default, default with
 * --quick]; positive, or 0 or more when named in `zero`) and `strings`.
 */
export function benchArgs<K extends string>(
  scriptUrl: string,
  numbers: Record<K, readonly [full: number, quick?: number]>,
  strings: string[] = [],
  zero: NoInfer<K>[] = [],
) {
  const options: ParseArgsConfig['options'] = {
    quick: { type: 'boolean', default: false },
    label: { type: 'string', default: 'current' },
    help: { type: 'boolean', short: 'h' },
  };
  for (const k of [...Object.keys(numbers), ...strings, 'results']) options[k] = { type: 'string' };
  const { values } = parseArgs({ options });
  if (values.help) printHelp(scriptUrl);
  checkLabel(values.label as string);
  const quick = values.quick === true;
  const n = {} as Record<K, number>;
  for (const [k, [full, short]] of Object.entries(numbers) as [K, readonly [number, number?]][]) {
    n[k] = Number(values[k] ?? (quick ? (short ?? full) : full));
    if (!(n[k] > 0 || (n[k] === 0 && zero.includes(k))) || !Number.isFinite(n[k]))
      throw new Error(`--${k} must be ${zero.includes(k) ? '0 or more' : 'positive'}`);
  }
  const str = values as Record<string, string | undefined>;
  return { label: values.label as string, quick, results: str.results, n, str };
}

/**
 * Kafka, the receiver, the load generator, `sluice start` (SLUICE_WORKERS 1 unless `extraEnv` says) and `dispatchers`
 * `sluice dispatcher` members, each named in the consumer groups by its Kafka client id, once those groups settled.
 * `from`: the section's provenance and processes; `notes`: its notes; `tenant(name)`: a tenant's client and API.
 */
export async function startAll(bench: BenchRun, script: string, dispatchers: number, extraEnv: NodeJS.ProcessEnv = {}) {
  const { prefix, sluiceDir, startedAt, load1 } = bench;
  await bench.startKafka();
  const from = provenance({ command: bench.command(script), sluiceDir, startedAt, load1 });
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...sluiceEnv({ brokers: bench.brokers, prefix, port, dataDir: bench.scratch.dataDir() }),
    ...RECEIVER_ENV,
    SLUICE_WORKERS: '1',
    ...extraEnv,
  };
  const started = await bench.sluiceStart(port, { ...env, SLUICE_KAFKA_CLIENT_ID: `${prefix}-start` });
  const nodes: Dispatcher[] = [
    { name: 'sluice start', clientId: `${prefix}-start`, ...started },
    ...(await startDispatchers(bench.children, bench.sluice, env, dispatchers, prefix)),
  ];
  const notes: string[] = [];
  const members = Number(env.SLUICE_WORKERS) + dispatchers;
  if (!(await settleGroups(bench.brokers, prefix, members, GROUPS)))
    notes.push(`the consumer groups were not Stable with ${members} members within 90 s; measured anyway.`);
  const base = `http://127.0.0.1:${port}`;
  const tenant = async (name: string) => {
    const client = await adminClient(bench.sluice, ROOT, env, name);
    const token = await bearerToken(base, client);
    return { client, api: sluiceApi(base, () => token) };
  };
  const sluice = `\`sluice start\` (${env.SLUICE_WORKERS} worker(s)) + ${dispatchers} \`sluice dispatcher\``;
  from.push('', `Processes: Kafka, ${sluice}, receiver, load generator.`);
  return { from, notes, receiver: bench.receiver().call, load: bench.load().call, base, nodes, tenant };
}

type Receiver = ReturnType<BenchRun['receiver']>['call'];

/** The receiver's tallies by name (`splitAt`, epoch ms: an ordered port's latencies before and after it). */
export async function portStats(receiver: Receiver, splitAt?: number): Promise<Record<string, PortStats>> {
  return Object.fromEntries((await receiver({ op: 'stats', splitAt })).stats!.map((s) => [s.name, s]));
}

/** Waits until each named tally answered 2xx to `want[name]` events, or `limitMs` passed; true when they all did. */
export async function awaitDelivered(receiver: Receiver, want: Record<string, number>, limitMs: number) {
  say(`  awaiting receipts ${JSON.stringify(want)} (${limitMs / 1000} s at most)...`);
  for (const deadline = Date.now() + limitMs; ; await sleep(250)) {
    const ok = (await receiver({ op: 'progress' })).progress!;
    if (Object.entries(want).every(([k, count]) => (ok[k] ?? 0) >= count)) return true;
    if (Date.now() > deadline) return false;
  }
}

/** An admin port's /metrics: `metric(name)` has the samples of one, each one's labels (inside the braces) and value. */
export async function scrape(adminPort: number) {
  const text = await fetch(`http://127.0.0.1:${adminPort}/metrics`).then(
    (r) => r.text(),
    () => '',
  );
  const sample = (m: RegExpMatchArray) => ({ labels: m[1] ?? '', value: Number(m[2]) });
  return (name: string) => [...text.matchAll(new RegExp(`^${name}(?:\\{([^}]*)\\})?\\s+(\\S+)`, 'gm'))].map(sample);
}

/** Table cells: numbers formatted by `fmt`. */
export const cells = (...xs: unknown[]) => xs.map((x) => (typeof x === 'number' ? fmt(x) : x));

/** "p50 / p99 / max" of a latency (ms). */
export const pct = (l: Latency) => `${fmt(l.p50)} / ${fmt(l.p99)} / ${fmt(l.max)}`;

/**
 * Prints the section `<name>:<label>`: its heading, `blocks` (the provenance, paragraphs and tables; false: none) a
 * blank line apart, and the notes; writes it to the results file.
 */
export function writeReport(args: Args, name: string, title: string, notes: string[], blocks: Block[]) {
  const all = [`### ${title}: ${args.label}`, ...blocks, notes.map((x) => `- ${x}`)];
  const shown = all.filter((b): b is string | string[] => b !== false && b.length > 0);
  const section = shown.map((b) => (typeof b === 'string' ? b : b.join('\n'))).join('\n\n');
  say(`\n${section}`);
  writeResults(resultsFile(args.results, args.quick), `${name}:${args.label}`, section);
}
