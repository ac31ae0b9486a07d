/**
 * The primary of `--workers N|auto` (workers.ts): forks the workers, relays revocations between
 * them, serves the node's admin port, and with `auto` adds and retires workers as their load asks
 * (worker-scaling.ts).
 *
 * A worker that exits unasked stops the others and the run fails (the operator's supervisor
 * restarts the unit); one the primary retired has closed its node as on a stop, handing over its
 * counters first. A grown worker counts for the node's health once it reports from a running node,
 * so the node stays ready while a worker starts; a retiring one no longer counts.
 */
import cluster, { type Worker } from 'node:cluster';
import { CLI_SETTINGS } from '../core/config.ts';
import { PROVISIONAL_TTL_MS } from '../core/clients/revocation-push.ts';
import { countersOnly, startAggregateAdmin } from './admin-aggregate.ts';
import { say, untilSignal } from './runtime.ts';
import { WorkerScaling } from './worker-scaling.ts';
import {
  isFinalMetrics,
  isLoadReport,
  isRelayedRevocation,
  type RelayedRevocation,
  WORKER_INDEX,
  workerAdminPort,
  type WorkerPlan,
} from './workers.ts';

interface Slot {
  index: number;
  worker: Worker;
  /** It has reported from a running node. */
  up: boolean;
  retiring: boolean;
  /** Its event loop's utilisation in the last second it reported (0-1). */
  busy?: number;
  /** Its counters, handed over as it retired. */
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
  const scaling = elastic
    ? new WorkerScaling({ ...CLI_SETTINGS.workerScaling.read(process.env), ...plan }, Date.now())
    : null;
  const slots = new Map<number, Slot>(); // by cluster worker id
  const adminPortOf = (index: number) => (admin ? workerAdminPort(admin.port, index, plan.max) : 0);
  /** Retired workers' counters, and how often the node grew and shrank. */
  const retired: string[] = [];
  const changes = { grow: 0, shrink: 0 };
  const counting = () => [...slots.values()].filter((s) => !s.retiring && (s.up || !elastic));
  const aggregate =
    admin && admin.port !== 0
      ? await startAggregateAdmin(admin.host, admin.port, {
          healthPorts: () => counting().map((s) => adminPortOf(s.index)),
          metricsPorts: () =>
            [...slots.values()]
              .filter((s) => s.up || !elastic)
              .filter((s) => s.final === undefined)
              .map((s) => ({ port: adminPortOf(s.index), retiring: s.retiring })),
          extraPages: () => [...retired, ...[...slots.values()].flatMap((s) => s.final ?? []), nodeSeries()],
        })
      : null;
  const nodeSeries = () =>
    [
      '# HELP sluice_node_workers Worker processes of this node that are up and not retiring.',
      '# TYPE sluice_node_workers gauge',
      `sluice_node_workers ${counting().length}`,
      '# HELP sluice_node_worker_changes_total Workers added (grow) and retired (shrink) as load asked.',
      '# TYPE sluice_node_worker_changes_total counter',
      `sluice_node_worker_changes_total{change="grow"} ${changes.grow}`,
      `sluice_node_worker_changes_total{change="shrink"} ${changes.shrink}`,
      "# HELP sluice_node_worker_busy_ratio The share of the last second each worker's event loop was busy.",
      '# TYPE sluice_node_worker_busy_ratio gauge',
      ...counting()
        .filter((s) => s.busy !== undefined)
        .map((s) => `sluice_node_worker_busy_ratio{worker="${s.index}"} ${s.busy}`),
    ].join('\n');

  // Provisional revocations relayed lately: a worker that starts later gets them too.
  const relayed: { m: RelayedRevocation; at: number }[] = [];
  const send = (s: Slot, m: unknown) => {
    if (s.worker.isConnected()) s.worker.send(m as object);
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
  const fork = (index: number) => {
    const worker = cluster.fork({ ...env, [WORKER_INDEX]: String(index) });
    slots.set(worker.id, { index, worker, up: !elastic, retiring: false });
  };
  const pct = (busy: number) => `${Math.round(busy * 100)} %`;
  const grow = (busy: number) => {
    const taken = new Set([...slots.values()].map((s) => s.index));
    const index = [...Array(plan.max).keys()].find((i) => !taken.has(i));
    if (index === undefined) return;
    changes.grow++;
    const window = `${scaling!.rule.growAfterMs / 1000} s`;
    say(`adding worker ${index} of up to ${plan.max}: the workers' event loops were ${pct(busy)} busy over ${window}`);
    fork(index);
  };
  const shrink = (busy: number) => {
    const last = counting().sort((a, b) => b.index - a.index)[0];
    if (!last) return;
    changes.shrink++;
    last.retiring = true;
    const window = `${scaling!.rule.shrinkAfterMs / 1000} s`;
    say(`retiring worker ${last.index}: ${counting().length} would have been ${pct(busy)} busy each over ${window}`);
    send(last, 'shutdown');
  };
  const settled = () => [...slots.values()].every((s) => s.up && !s.retiring);

  cluster.on('exit', (w, code, signal) => {
    const slot = slots.get(w.id);
    slots.delete(w.id);
    if (slot?.retiring && !stopping) {
      retired.push(countersOnly(slot.final ?? aggregate?.lastPage(adminPortOf(slot.index)) ?? ''));
      if (code !== 0) say(`worker ${slot.index} retired with exit ${signal ?? code}`);
      scaling?.changed(Date.now(), slot.index);
    } else if (!stopping) {
      failed = true;
      say(`worker ${w.process.pid} exited (${signal ?? code}); stopping the others`);
      stopAll();
    }
    if (slots.size === 0 && stopping) {
      if (resend) clearInterval(resend);
      done();
    }
  });
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
    } else if (isFinalMetrics(m)) {
      slot.final = countersOnly(m.text);
    } else if (isLoadReport(m) && scaling && !stopping) {
      const now = Date.now();
      if (!slot.up) {
        slot.up = true;
        for (const r of relayed) send(slot, r.m);
        scaling.changed(now);
      }
      slot.busy = m.busy;
      scaling.report(slot.index, m.busy, now);
      if (!settled()) return;
      const step = scaling.decide(
        counting().map((s) => s.index),
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
    if (slots.size > 0) await exited;
    else if (resend) clearInterval(resend);
  }
  await aggregate?.close();
  return failed ? 1 : 0;
}
