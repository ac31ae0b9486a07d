import cluster from 'node:cluster';
import { loadConfig, type Config } from '../../core/config.ts';
import { parse } from '../args.ts';
import { kafkaFor, say } from '../runtime.ts';
import { DISPATCHER_V8_FLAGS } from '../heap.ts';
import {
  closeNode,
  reportLoad,
  untilStop,
  workerAdminPort,
  workerDone,
  workerIndex,
  type WorkerPlan,
  workerPlan,
} from '../workers.ts';
import { runPrimary } from '../primary.ts';
import type { Command } from '../command.ts';
import { adminUrl } from '../../ingress/admin-server.ts';

const USAGE = `usage: sluice start [--workers N]

Runs ingress (SLUICE_PORT, default 8080), admin (SLUICE_ADMIN_PORT, default 9464, on
SLUICE_ADMIN_HOST, default 127.0.0.1 only) and the webhook dispatcher. When KAFKA_BROKERS is
not set it starts the embedded local Kafka on 127.0.0.1:SLUICE_KAFKA_PORT (default 9092) and
stops it on exit. With no clients yet, it provisions and prints a bootstrap admin credential for
the tenant "local". With SLUICE_TLS_CERT and SLUICE_TLS_KEY the port speaks HTTPS, and with
SLUICE_TLS_CLIENT_CA too it requires a client certificate of that CA (docs/configuration.md).

  --workers N|auto  processes that each run ingress + dispatcher (SLUICE_WORKERS; default:
                auto, one worker and up to one per core while their event loops are busy). They
                share SLUICE_PORT (SO_REUSEPORT: the kernel spreads connections) and the Kafka
                partitions (one consumer group); worker i serves its admin port on
                SLUICE_ADMIN_PORT + 1 + i.`;

/** One process's node: ingress + dispatcher; the first one provisions the bootstrap credential. */
async function runNode(config: Readonly<Config>, brokers: string[], index: number, plan: WorkerPlan): Promise<void> {
  // Listen for the stop at once: it may come while the node is still starting.
  const stopped = untilStop();
  // Loaded here: the primary of `--workers N` only forks and watches, and needs none of the node.
  const [{ startNode }, { createClient }] = await Promise.all([
    import('../assemble.ts'),
    import('../../core/clients/provisioning.ts'),
  ]);
  const node = await startNode(config, {
    brokers,
    ingress: true,
    dispatcher: true,
    adminPort: workerAdminPort(config.adminPort, index, plan.max),
  });
  const stopReports = reportLoad(plan);
  const base = `${config.tls ? 'https' : 'http'}://127.0.0.1:${node.ingress!.port}`;
  // With workers the primary serves the node's admin port (every worker's metrics summed).
  const nodeAdmin = plan.max > 1 && config.adminPort !== 0 ? config.adminPort : node.ingress!.adminPort;
  if (index === 0) {
    const workers =
      plan.min === plan.max
        ? `${plan.min} worker${plan.min > 1 ? 's' : ''}`
        : `workers: ${plan.min} to ${plan.max} as load asks`;
    say(
      `Sluice is up: ${base}  (${workers}; ` +
        `admin: ${adminUrl(config.adminHost, nodeAdmin, '/healthz')}, Kafka: ${brokers.join(',')})`,
    );
    if (node.ctx.clients.size === 0) {
      const c = await createClient(node.ctx, { tenant: 'local', role: 'admin', region: config.region });
      say('');
      say('Bootstrap admin credential for tenant "local" (shown once):');
      say(`  client_id=${c.client_id}`);
      say(`  client_secret=${c.client_secret}`);
      if (config.tls)
        say(
          `  (HTTPS: give curl --cacert <your CA>${config.tls.clientCaFile ? ' and --cert/--key of a client' : ''}` +
            ', or --resolve when the certificate names a host)',
        );
      say(`  curl -s ${base}/v1/auth/token -H 'content-type: application/json' \\`);
      say(
        `    -d '{"grant_type":"client_credentials",` +
          `"client_id":"${c.client_id}","client_secret":"${c.client_secret}"}'`,
      );
    } else {
      say(
        `${node.ctx.clients.size} client(s) exist already ` +
          '(the bootstrap credential is printed only on the first start);',
      );
      say(
        `create another: KAFKA_BROKERS=${brokers.join(',')} npx sluice admin create-client --tenant local --role admin`,
      );
    }
  }
  const signal = await stopped;
  if (index === 0) say(`${signal}: shutting down`);
  await closeNode(node, stopReports);
}

export const start: Command = {
  async run(argv) {
    const { values } = parse(argv, { workers: { type: 'string' } }, USAGE);
    const config = loadConfig();
    if (cluster.isWorker) {
      await runNode(config, config.kafkaBrokers!, workerIndex(), workerPlan(values.workers, USAGE));
      workerDone();
      return 0;
    }
    const plan = workerPlan(values.workers, USAGE);
    if (config.masterKeyIsDefault)
      say('warning: SLUICE_MASTER_KEY is not set; using the development key (never do this in production)');
    const { brokers, local } = await kafkaFor(config, { embedded: true });
    try {
      if (plan.max === 1) {
        await runNode(config, brokers, 0, plan);
        return 0;
      }
      return await runPrimary(plan, { KAFKA_BROKERS: brokers.join(',') }, DISPATCHER_V8_FLAGS, {
        host: config.adminHost,
        port: config.adminPort,
      });
    } finally {
      if (local) {
        say('stopping the embedded Kafka');
        await local.stop();
      }
    }
  },
};
