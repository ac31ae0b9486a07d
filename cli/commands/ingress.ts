import cluster from 'node:cluster';
import { loadConfig } from '../../core/config.ts';
import { parse } from '../args.ts';
import { kafkaFor, say } from '../runtime.ts';
import { startNode } from '../assemble.ts';
import { closeNode, reportLoad, untilStop, workerAdminPort, workerDone, workerIndex, workerPlan } from '../workers.ts';
import { runPrimary } from '../primary.ts';
import type { Command } from '../command.ts';

const USAGE = `usage: sluice ingress [--port P] [--admin-port P] [--workers N]      (needs KAFKA_BROKERS)

Runs one ingress node: token issuance, the edge's scope checks, the control-plane API and the
data-plane proxy. Run several (on one machine they share the port through SO_REUSEPORT; give
each its own --admin-port); they share all state through Kafka. The admin port (/healthz,
/readyz, /metrics) listens on SLUICE_ADMIN_HOST, 127.0.0.1 unless set. With SLUICE_TLS_CERT and
SLUICE_TLS_KEY the port speaks HTTPS, and with SLUICE_TLS_CLIENT_CA too it requires a client
certificate of that CA; \`sluice front-door\` prints an HAProxy configuration to put before it.

  --workers N|auto  processes of this node (SLUICE_WORKERS; default 1; "--workers $(nproc)"
                uses every core, auto adds them up to the cores while their event loops are
                busy). They share the port (SO_REUSEPORT); worker i serves its admin port on
                --admin-port + 1 + i.`;

export const ingress: Command = {
  async run(argv) {
    const { values } = parse(
      argv,
      { port: { type: 'string' }, 'admin-port': { type: 'string' }, workers: { type: 'string' } },
      USAGE,
    );
    const config = loadConfig();
    const { brokers } = await kafkaFor(config, { embedded: false });
    const plan = workerPlan(values.workers, USAGE, 1);
    const adminBase = values['admin-port'] !== undefined ? Number(values['admin-port']) : config.adminPort;
    if (plan.max > 1 && !cluster.isWorker) return runPrimary(plan, {}, [], { host: config.adminHost, port: adminBase });
    const index = workerIndex();
    const stopped = untilStop();
    const node = await startNode(config, {
      brokers,
      ingress: true,
      dispatcher: false,
      port: values.port !== undefined ? Number(values.port) : undefined,
      adminPort: workerAdminPort(adminBase, index, plan.max),
    });
    const stopReports = reportLoad(plan);
    if (index === 0) {
      const admin = node.ingress!.adminPort;
      const more = plan.max > 1 ? `; the node's ${adminBase}, workers' ${admin} … ${admin + plan.max - 1}` : '';
      say(`ingress ready on port ${node.ingress!.port} (admin ${admin}${more}), region ${config.region}`);
    }
    await stopped;
    await closeNode(node, stopReports);
    workerDone();
    return 0;
  },
};
