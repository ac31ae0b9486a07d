/**
 * `--workers N` for `sluice start` and `sluice ingress`: the primary forks N worker processes
 * (node:cluster) that each run a whole node. They share the HTTP port (uWS listens with
 * SO_REUSEPORT, so the kernel spreads connections); the primary serves the node's admin port
 * (admin-aggregate.ts) and worker i its own on base + 1 + i. A dead worker ends the run (the
 * operator's supervisor decides); a signal stops all.
 */
import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { CLI_SETTINGS } from '../core/config.ts';
import { ConfigError } from '../core/errors.ts';
import { UsageError } from './args.ts';
import { say, untilSignal } from './runtime.ts';
import { stopStepsUnderWay } from '../core/stop-steps.ts';
import { startAggregateAdmin } from './admin-aggregate.ts';

const WORKER_INDEX = 'SLUICE_WORKER_INDEX';

/** --workers, else SLUICE_WORKERS, else `def` (the number of cores when undefined). */
export function workerCount(raw: string | undefined, usage: string, def?: number): number {
  try {
    // The flag is checked as the variable is.
    const workers = CLI_SETTINGS.workers.read(raw === undefined ? process.env : { SLUICE_WORKERS: raw });
    return workers ?? def ?? availableParallelism();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    throw new UsageError(`--workers / ${err.message.replace(': ', ' ')}\n\n${usage}`);
  }
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

/**
 * Forks the workers (with `env` added, and `v8Flags` after the primary's own Node flags), restarts
 * none, stops them on a signal; resolves with the exit code.
 */
export async function runPrimary(
  workers: number,
  env: Record<string, string>,
  v8Flags: string[] = [],
  admin?: { host: string; port: number },
): Promise<number> {
  // A flag the primary already runs with (the #! line's) is not given twice.
  const added = v8Flags.filter((f) => !process.execArgv.includes(f));
  if (added.length > 0) cluster.setupPrimary({ execArgv: [...process.execArgv, ...added] });
  // The node's admin port: every worker's metrics summed, health only when all are healthy.
  const aggregate =
    admin && admin.port !== 0
      ? await startAggregateAdmin(
          admin.host,
          admin.port,
          Array.from({ length: workers }, (_, i) => workerAdminPort(admin.port, i, workers)),
        )
      : null;
  const alive = new Set<number>();
  let stopping = false;
  let failed = false;
  const exited = new Promise<void>((resolve) => {
    cluster.on('exit', (w, code, signal) => {
      alive.delete(w.id);
      if (!stopping) {
        failed = true;
        say(`worker ${w.process.pid} exited (${signal ?? code}); stopping the others`);
        stopping = true;
        for (const id of alive) cluster.workers?.[id]?.send('shutdown');
      }
      if (alive.size === 0) resolve();
    });
  });
  // A revocation pushed by another region reaches the one worker holding the peer port: it is
  // passed on to the others, so every worker refuses the client before the Kafka record arrives.
  cluster.on('message', (from, m: unknown) => {
    if (!isRelayedRevocation(m)) return;
    for (const id of alive) if (id !== from.id) cluster.workers?.[id]?.send(m);
  });
  for (let i = 0; i < workers; i++) alive.add(cluster.fork({ ...env, [WORKER_INDEX]: String(i) }).id);
  const signal = await Promise.race([untilSignal(20_000), exited.then(() => null)]);
  if (signal) {
    stopping = true;
    for (const id of alive) cluster.workers?.[id]?.send('shutdown');
    await exited;
  }
  await aggregate?.close();
  return failed ? 1 : 0;
}
