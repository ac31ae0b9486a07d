import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { loadConfig, type Config } from '../../core/config.ts';
import { createClient } from '../../core/clients/provisioning.ts';
import { parse, UsageError } from '../args.ts';
import { kafkaFor, say, untilSignal } from '../runtime.ts';
import { startNode } from '../assemble.ts';
import type { Command } from '../command.ts';

const USAGE = `usage: sluice start [--workers N]

Runs ingress (SLUICE_PORT, default 8080), admin (SLUICE_ADMIN_PORT, default 9464) and the webhook
dispatcher. When KAFKA_BROKERS is not set it starts the embedded local Kafka on
127.0.0.1:SLUICE_KAFKA_PORT (default 9092) and stops it on exit. With no clients yet, it
provisions and prints a bootstrap admin credential for the tenant "local".

  --workers N   processes that each run ingress + dispatcher (SLUICE_WORKERS; default: the
                number of cores). They share SLUICE_PORT (SO_REUSEPORT: the kernel spreads
                connections) and the Kafka partitions (one consumer group); worker i serves its
                admin port on SLUICE_ADMIN_PORT + i.`;

const WORKER_INDEX = 'SLUICE_WORKER_INDEX';

function workerCount(raw: string | undefined): number {
  const v = raw ?? process.env.SLUICE_WORKERS;
  if (v === undefined || v === '') return availableParallelism();
  if (!/^\d{1,2}$/.test(v) || Number(v) < 1 || Number(v) > 64) throw new UsageError(`--workers / SLUICE_WORKERS must be a whole number from 1 to 64, got "${v}"\n\n${USAGE}`);
  return Number(v);
}

/** One process's node: ingress + dispatcher; the first one provisions the bootstrap credential. */
async function runNode(config: Readonly<Config>, brokers: string[], index: number, workers: number): Promise<void> {
  // Listen for the stop at once: it may come while the node is still starting.
  const stopped = cluster.isWorker ? untilPrimarySaysStop() : untilSignal();
  const adminPort = config.adminPort === 0 ? 0 : config.adminPort + index;
  const node = await startNode(config, { brokers, ingress: true, dispatcher: true, adminPort });
  const base = `http://127.0.0.1:${node.ingress!.port}`;
  if (index === 0) {
    say(`Sluice is up: ${base}  (${workers} worker${workers > 1 ? 's' : ''}; admin: http://127.0.0.1:${node.ingress!.adminPort}/healthz, Kafka: ${brokers.join(',')})`);
    if (node.ctx.clients.size === 0) {
      const c = await createClient(node.ctx, { tenant: 'local', role: 'admin', region: config.region });
      say('');
      say('Bootstrap admin credential for tenant "local" (shown once):');
      say(`  client_id=${c.client_id}`);
      say(`  client_secret=${c.client_secret}`);
      say(`  curl -s ${base}/v1/auth/token -H 'content-type: application/json' \\`);
      say(`    -d '{"grant_type":"client_credentials","client_id":"${c.client_id}","client_secret":"${c.client_secret}"}'`);
    } else {
      say(`${node.ctx.clients.size} client(s) exist already (the bootstrap credential is printed only on the first start);`);
      say(`create another: KAFKA_BROKERS=${brokers.join(',')} npx sluice admin create-client --tenant local --role admin`);
    }
  }
  const signal = await stopped;
  if (index === 0) say(`${signal}: shutting down`);
  await node.close();
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
      setTimeout(() => process.exit(1), graceMs).unref();
      resolve('shutdown');
    };
    process.on('message', onMessage);
    // The primary is gone (killed): stop as if told to.
    process.once('disconnect', () => onMessage('shutdown'));
  });
}

/** Forks the workers, restarts none (a dead worker ends the run: the operator's supervisor decides), stops them on a signal. */
async function runPrimary(workers: number, brokers: string[]): Promise<number> {
  const env = { KAFKA_BROKERS: brokers.join(',') };
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
  for (let i = 0; i < workers; i++) alive.add(cluster.fork({ ...env, [WORKER_INDEX]: String(i) }).id);
  const signal = await Promise.race([untilSignal(20_000), exited.then(() => null)]);
  if (signal) {
    stopping = true;
    for (const id of alive) cluster.workers?.[id]?.send('shutdown');
    await exited;
  }
  return failed ? 1 : 0;
}

export const start: Command = {
  summary: 'run ingress + dispatcher on every core (local Kafka included when KAFKA_BROKERS is unset)',
  async run(argv) {
    const { values } = parse(argv, { workers: { type: 'string' } }, USAGE);
    const config = loadConfig();
    if (cluster.isWorker) {
      await runNode(config, config.kafkaBrokers!, Number(process.env[WORKER_INDEX] ?? '0'), workerCount(values.workers));
      cluster.worker?.disconnect(); // the IPC channel would keep this process alive
      return 0;
    }
    const workers = workerCount(values.workers);
    if (config.masterKeyIsDefault) say('warning: SLUICE_MASTER_KEY is not set; using the development key (never do this in production)');
    const { brokers, local } = await kafkaFor(config, { embedded: true });
    try {
      if (workers === 1) {
        await runNode(config, brokers, 0, 1);
        return 0;
      }
      return await runPrimary(workers, brokers);
    } finally {
      if (local) {
        say('stopping the embedded Kafka');
        await local.stop();
      }
    }
  },
};
