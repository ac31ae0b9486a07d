/**
 * `--workers N|auto` for `sluice start` and `sluice ingress`: the primary forks worker processes
 * (node:cluster) that each run a whole node. They share the HTTP port (uWS listens with
 * SO_REUSEPORT, so the kernel spreads connections); the primary serves the node's admin port
 * (admin-aggregate.ts) and worker i its own on base + 1 + i. With `auto` the primary starts one
 * worker and adds or retires others as their event loops' load asks (worker-scaling.ts). A worker
 * that dies unasked ends the run (the operator's supervisor decides); a signal stops all.
 */
import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { CLI_SETTINGS } from '../core/config.ts';
import { performance } from 'node:perf_hooks';
import { ConfigError } from '../core/errors.ts';
import { UsageError } from './args.ts';
import { untilSignal } from './runtime.ts';
import type { ScalingRule } from './worker-scaling.ts';
import type { Metrics } from '../core/metrics.ts';
import { stopStepsUnderWay } from '../core/stop-steps.ts';

export const WORKER_INDEX = 'SLUICE_WORKER_INDEX';

/** How many workers a node runs: `min` = `max` for a fixed count, else between them as load asks. */
export interface WorkerPlan {
  min: number;
  max: number;
  /** When workers are added and retired (min < max). */
  rule: ScalingRule;
}

/** --workers, else SLUICE_WORKERS, else `def`; `auto` is one worker to the number of cores. */
export function workerPlan(raw: string | undefined, usage: string, def: number | 'auto' = 'auto'): WorkerPlan {
  let workers: number | 'auto';
  try {
    // The flag is checked as the variable is.
    workers = CLI_SETTINGS.workers.read(raw === undefined ? process.env : { SLUICE_WORKERS: raw }) ?? def;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    throw new UsageError(`--workers / ${err.message.replace(': ', ' ')}\n\n${usage}`);
  }
  // Checked whatever the count: a wrong value is refused, not ignored until someone sets auto.
  const { max, ...shares } = CLI_SETTINGS.workerScaling.read(process.env);
  const [low, high] = workers === 'auto' ? [1, max ?? availableParallelism()] : [workers, workers];
  return { min: low, max: high, rule: { ...shares, min: low, max: high } };
}

/** A pushed revocation one worker passes to its siblings through the primary. */
export interface RelayedRevocation {
  sluice: 'provisional-revocation';
  client_id: string;
  revoked_at: number;
  until: number;
}

export function isRelayedRevocation(m: unknown): m is RelayedRevocation {
  const r = m as Partial<RelayedRevocation> | null;
  return (
    r?.sluice === 'provisional-revocation' &&
    typeof r.client_id === 'string' &&
    Number.isFinite(r.revoked_at) &&
    Number.isFinite(r.until)
  );
}

/**
 * In a worker: passes the revocations this worker's peer port takes to its siblings, and applies
 * theirs (`apply`). Outside a worker: nothing to relay.
 */
export function relayRevocations(
  apply: (r: RelayedRevocation) => void,
): ((r: Omit<RelayedRevocation, 'sluice'>) => void) | undefined {
  if (!cluster.isWorker) return undefined;
  process.on('message', (m: unknown) => {
    if (isRelayedRevocation(m)) apply(m);
  });
  // A worker added later asks for the revocations relayed before it listened.
  process.send?.({ sluice: 'relay-listening' } satisfies RelayListening);
  return (r) => process.send?.({ sluice: 'provisional-revocation', ...r } satisfies RelayedRevocation);
}

/** This process's index among the workers (0 in a single-process run). */
export function workerIndex(): number {
  return cluster.isWorker ? Number(process.env[WORKER_INDEX] ?? '0') : 0;
}

/**
 * The admin port of worker `index` of `workers` (0 stays 0: each picks a free one). With more than
 * one worker the primary serves `base` for the whole node (admin-aggregate.ts) and worker i
 * serves base + 1 + i.
 */
export function workerAdminPort(base: number, index: number, workers = 1): number {
  if (base === 0) return 0;
  return workers > 1 ? base + 1 + index : base;
}

/** How a worker (or a single process) waits for its stop. */
export function untilStop(): Promise<string> {
  return cluster.isWorker ? untilPrimarySaysStop() : untilSignal();
}

/** Called once a worker's node has closed: the IPC channel would keep the process alive. */
export function workerDone(): void {
  cluster.worker?.disconnect();
}

/**
 * A worker stops when the primary says so. A Ctrl-C reaches every process of the group at once,
 * so a worker ignores the signals themselves: a second one must not cut its shutdown short.
 */
function untilPrimarySaysStop(graceMs = 15_000): Promise<string> {
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => {});
  return new Promise((resolve) => {
    const onMessage = (m: unknown) => {
      if (m !== 'shutdown') return;
      process.off('message', onMessage);
      const force = () => {
        process.stderr.write(
          `sluice worker: shutdown did not finish; exiting. Still under way: ${stopStepsUnderWay()}\n`,
        );
        process.exit(1);
      };
      setTimeout(force, graceMs).unref();
      resolve('shutdown');
    };
    process.on('message', onMessage);
    // The primary is gone (killed): stop as if told to.
    process.once('disconnect', () => onMessage('shutdown'));
  });
}

/** A worker now takes relayed revocations: the primary sends it those of the last PROVISIONAL_TTL_MS. */
export interface RelayListening {
  sluice: 'relay-listening';
}

export function isRelayListening(m: unknown): m is RelayListening {
  return (m as Partial<RelayListening> | null)?.sluice === 'relay-listening';
}

/** A worker's report of its event loop's utilisation over the last second (0-1). */
export interface LoadReport {
  sluice: 'load';
  busy: number;
}

export function isLoadReport(m: unknown): m is LoadReport {
  const r = m as Partial<LoadReport> | null;
  return r?.sluice === 'load' && typeof r.busy === 'number' && r.busy >= 0 && r.busy <= 1;
}

/** A closing worker's counters and histograms: the node's sums keep what it counted. */
export interface FinalMetrics {
  sluice: 'final-metrics';
  text: string;
}

export function isFinalMetrics(m: unknown): m is FinalMetrics {
  const r = m as Partial<FinalMetrics> | null;
  return r?.sluice === 'final-metrics' && typeof r.text === 'string';
}

/**
 * In a worker of a node whose worker count follows the load: says the node is up (a first report,
 * which the primary does not judge), then reports the event loop's utilisation every `periodMs` to
 * the primary (worker-scaling.ts). Returns the stop.
 */
export function reportLoad(plan: WorkerPlan, periodMs = 1000): () => void {
  if (!cluster.isWorker || plan.min === plan.max) return () => {};
  let mark = performance.eventLoopUtilization();
  const send = (busy: number) => {
    if (process.connected) process.send?.({ sluice: 'load', busy } satisfies LoadReport);
  };
  send(0);
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    send(Math.min(1, Math.max(0, performance.eventLoopUtilization(now, mark).utilization || 0)));
    mark = now;
  }, periodMs).unref();
  return () => clearInterval(timer);
}

/**
 * Closes a worker's node (or a single process's): its load reports stop, the node closes, and a
 * worker hands the primary its counters and histograms, which the node's sums keep (primary.ts).
 */
export async function closeNode(
  node: { close(): Promise<void>; ctx: { metrics: Metrics } },
  stopReports: () => void,
): Promise<void> {
  stopReports();
  await node.close();
  if (!cluster.isWorker || !process.connected) return;
  // After the close, so every delivery is counted; counters alone, as a gauge would read closed stores.
  const text = await node.ctx.metrics.countersPage().catch(() => null);
  if (text === null) return;
  // Resolved by the write, not by send's return: a page this size is queued (false), and a
  // disconnect before the queue drains would drop it.
  await new Promise<void>((resolve) => {
    process.send?.({ sluice: 'final-metrics', text } satisfies FinalMetrics, undefined, {}, () => resolve());
  });
}
