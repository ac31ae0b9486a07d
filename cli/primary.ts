/**
 * The primary of `--workers N|auto` (workers.ts): forks the workers, relays revocations between
 * them, serves the node's admin port, and with `auto` adds and retires workers as their load asks
 * (worker-scaling.ts).
 *
 * A worker that exits unasked stops the others and the run fails (the operator's supervisor
 * restarts the unit). One the primary retired has closed its node as on a stop, handing over its
 * counters first. A worker added for load (index `min` and above) that fails to start (exits, or is not up within
 * START_DEADLINE_MS) is a failed grow: said, and tried again a window later. A grown worker serves
 * the node's health once it reports from a running node, so the node stays ready while a worker
 * starts; a retiring one no longer does.
 */
import cluster, { type Worker } from 'node:cluster';
import { PROVISIONAL_TTL_MS } from '../core/clients/revocation-push.ts';
import { countersOnly, mergeMetrics, startAggregateAdmin } from './admin-aggregate.ts';
import { say, untilSignal } from './runtime.ts';
import { WorkerScaling } from './worker-scaling.ts';
import {
  isFinalMetrics,
  isLoadReport,
  isRelayedRevocation,
  isRelayListening,
  type RelayedRevocation,
  WORKER_INDEX,
  workerAdminPort,
  type WorkerPlan,
} from './workers.ts';

/** How long a worker added for load may take to come up before it counts as a failed grow. */
export const START_DEADLINE_MS = 120_000;

interface Slot {
  index: number;
  worker: Worker;
  forkedAt: number;
  /** It has reported from a running node (with a fixed count: from its fork). */
  up: boolean;
  retiring: boolean;
  /** Its event loop's utilisation in the last second it reported (0-1). */
  busy?: number;
  /** Its counters and histograms, handed over as it retired. */
  final?: string;
}

/**
 * Forks the workers of `plan` (with `env` added, and `v8Flags` after the primary's own Node flags),
 * restarts none, stops them on a signal; resolves with the exit code.
 */
export async function runPrimary(
  plan: WorkerPlan,
  env: Record<string, string>,
  v8Flags: string[] = [],
  admin?: { host: string; port: number },
): Promise<number> {
  // A flag the primary already runs with (the #! line's) is not given twice.
  const added = v8Flags.filter((f) => !process.execArgv.includes(f));
  if (added.length > 0) cluster.setupPrimary({ execArgv: [...process.execArgv, ...added] });
  const elastic = plan.min < plan.max;
  const scaling = elastic ? new WorkerScaling(plan.rule, Date.now()) : null;
  if (elastic && plan.rule.shrinkBusy >= plan.rule.growBusy)
    say(
      `warning: SLUICE_WORKERS_SHRINK_BUSY (${plan.rule.shrinkBusy}) is not below SLUICE_WORKERS_GROW_BUSY ` +
        `(${plan.rule.growBusy}): the node will add and retire workers by turns`,
    );
  // By cluster worker id, from the fork until the worker has exited and its IPC channel is read.
  const slots = new Map<number, Slot>();
  const adminPortOf = (index: number) => (admin ? workerAdminPort(admin.port, index, plan.max) : 0);
  /** The workers that serve the node: up and not retiring. */
  const serving = () => [...slots.values()].filter((s) => s.up && !s.retiring);
  /** Every retired worker's counters and histograms, summed into one page. */
  let retired = '';
  const changes = { grow: 0, shrink: 0 };
  const nodeSeries = () =>
    [
      '# HELP sluice_node_workers Worker processes of this node that are up and not retiring.',
      '# TYPE sluice_node_workers gauge',
      `sluice_node_workers ${serving().length}`,
      '# HELP sluice_node_worker_changes_total Workers added (grow) and retired (shrink) as load asked.',
      '# TYPE sluice_node_worker_changes_total counter',
      `sluice_node_worker_changes_total{change="grow"} ${changes.grow}`,
      `sluice_node_worker_changes_total{change="shrink"} ${changes.shrink}`,
      "# HELP sluice_node_worker_busy_ratio The share of the last second each worker's event loop was busy.",
      '# TYPE sluice_node_worker_busy_ratio gauge',
      ...serving()
        .filter((s) => s.busy !== undefined)
        .map((s) => `sluice_node_worker_busy_ratio{worker="${s.index}"} ${s.busy}`),
    ].join('\n');
  const aggregate =
    admin && admin.port !== 0
      ? await startAggregateAdmin(admin.host, admin.port, () => {
          const reporting = [...slots.values()].filter((s) => s.up);
          return {
            health: serving().map((s) => adminPortOf(s.index)),
            // A retiring worker is scraped until its final page comes, then that page stands in.
            metrics: reporting
              .filter((s) => s.final === undefined)
              .map((s) => ({ port: adminPortOf(s.index), retiring: s.retiring })),
            extra: [retired, ...reporting.flatMap((s) => s.final ?? []), nodeSeries()],
          };
        })
      : null;

  // Provisional revocations relayed lately: a worker that starts listening later gets them too.
  const relayed: { m: RelayedRevocation; at: number }[] = [];
  const send = (s: Slot, m: unknown) => {
    // A send to a worker that just died fails later, as an error on the worker (handled in fork).
    if (s.worker.isConnected()) s.worker.send(m as object, undefined, () => {});
  };
  let stopping = false;
  let failed = false;
  let done: () => void = () => {};
  const exited = new Promise<void>((resolve) => (done = resolve));
  // A worker still loading its modules has no listener yet and would drop the message: it is said
  // again each second until every worker has gone (a worker takes the first and ignores the rest).
  let resend: NodeJS.Timeout | null = null;
  const stopAll = () => {
    stopping = true;
    const tell = () => {
      for (const s of slots.values()) send(s, 'shutdown');
    };
    tell();
    resend ??= setInterval(tell, 1000);
  };
  const finish = () => {
    if (resend) clearInterval(resend);
    done();
  };

  const fork = (index: number) => {
    const worker = cluster.fork({ ...env, [WORKER_INDEX]: String(index) });
    const slot: Slot = { index, worker, forkedAt: Date.now(), up: !elastic, retiring: false };
    slots.set(worker.id, slot);
    worker.on('error', () => {}); // an IPC write to a worker that died: its exit says what matters
    // Gone once it has exited and its IPC channel is read to its end: a retiring worker's final page
    // is written before the channel closes, and the exit event can come first.
    let exit: { code: number; signal: string | null } | null = null;
    worker.once('exit', (code, signal) => {
      exit = { code, signal };
      if (!worker.isConnected()) gone(slot, code, signal);
    });
    worker.once('disconnect', () => exit && gone(slot, exit.code, exit.signal));
  };
  const pct = (busy: number) => `${Math.round(busy * 100)} %`;
  const grow = (busy: number) => {
    const taken = new Set([...slots.values()].map((s) => s.index));
    const index = [...Array(plan.max).keys()].find((i) => !taken.has(i));
    if (index === undefined) return;
    changes.grow++;
    const window = `${plan.rule.growAfterMs / 1000} s`;
    say(`adding worker ${index} of up to ${plan.max}: the workers' event loops were ${pct(busy)} busy over ${window}`);
    fork(index);
  };
  const shrink = (busy: number) => {
    const last = serving().sort((a, b) => b.index - a.index)[0];
    if (!last) return;
    changes.shrink++;
    last.retiring = true;
    const window = `${plan.rule.shrinkAfterMs / 1000} s`;
    say(`retiring worker ${last.index}: ${serving().length} would have been ${pct(busy)} busy each over ${window}`);
    send(last, 'shutdown');
  };
  /** A grown worker not up in time is stopped (its exit is then a failed grow). */
  const overdue = (now: number) => {
    for (const s of slots.values())
      if (s.index >= plan.min && !s.up && !s.retiring && now - s.forkedAt > START_DEADLINE_MS) {
        say(`worker ${s.index} was not up within ${START_DEADLINE_MS / 1000} s; stopping it`);
        s.retiring = true;
        s.worker.process.kill('SIGKILL');
      }
  };
  const settled = () => [...slots.values()].every((s) => s.up && !s.retiring);

  function gone(slot: Slot, code: number, signal: string | null): void {
    slots.delete(slot.worker.id);
    const how = signal ?? code;
    if (stopping) {
      if (slots.size === 0) finish();
    } else if (slot.retiring && slot.up) {
      // A retired worker's counters stay in the node's sums: its final page, else the last one scraped.
      const port = adminPortOf(slot.index);
      retired = mergeMetrics([retired, slot.final ?? countersOnly(aggregate?.lastPage(port) ?? '')]);
      aggregate?.forget(port);
      if (code !== 0) say(`worker ${slot.index} retired with exit ${how}`);
      scaling?.changed(Date.now(), slot.index);
    } else if (slot.index >= plan.min && !slot.up) {
      say(`adding worker ${slot.index} failed (it exited ${how} before it was up); trying again later`);
      scaling?.changed(Date.now(), slot.index);
    } else {
      failed = true;
      say(`worker ${slot.worker.process.pid} exited (${how}); stopping the others`);
      stopAll();
      if (slots.size === 0) finish();
    }
  }
  cluster.on('message', (from, m: unknown) => {
    const slot = slots.get(from.id);
    if (!slot) return;
    if (isRelayedRevocation(m)) {
      // A revocation pushed by another region reaches the one worker holding the peer port: it is
      // passed on to the others, so every worker refuses the client before the Kafka record arrives.
      const now = Date.now();
      while (relayed.length > 0 && relayed[0].at < now - PROVISIONAL_TTL_MS) relayed.shift();
      relayed.push({ m, at: now });
      for (const s of slots.values()) if (s !== slot) send(s, m);
    } else if (isRelayListening(m)) {
      for (const r of relayed) send(slot, r.m);
    } else if (isFinalMetrics(m)) {
      slot.final = m.text; // counters and histograms alone (Metrics.countersPage)
    } else if (isLoadReport(m) && scaling && !stopping) {
      const now = Date.now();
      overdue(now);
      if (!slot.up) {
        // The first report says the node is up; the load of its start is not judged.
        slot.up = true;
        scaling.changed(now);
        return;
      }
      slot.busy = m.busy;
      scaling.report(slot.index, m.busy, now);
      if (!settled()) return;
      const step = scaling.decide(
        serving().map((s) => s.index),
        now,
      );
      if (step?.step === 'grow') grow(step.busy);
      else if (step?.step === 'shrink') shrink(step.busy);
    }
  });
  for (let i = 0; i < plan.min; i++) fork(i);
  const signal = await Promise.race([untilSignal(20_000), exited.then(() => null)]);
  if (signal) {
    stopAll();
    if (slots.size === 0) finish();
    await exited;
  }
  await aggregate?.close();
  return failed ? 1 : 0;
}
