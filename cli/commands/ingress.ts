import { loadConfig } from '../../core/config.ts';
import { parse } from '../args.ts';
import { kafkaFor, say, untilSignal } from '../runtime.ts';
import { startNode } from '../assemble.ts';
import type { Command } from '../command.ts';

const USAGE = `usage: sluice ingress [--port P] [--admin-port P]      (needs KAFKA_BROKERS)

Runs one ingress node: token issuance, the edge's scope checks, the control-plane API and the
data-plane proxy. Run several (on one machine they share the port through SO_REUSEPORT; give
each its own --admin-port); they share all state through Kafka.`;

export const ingress: Command = {
  summary: 'run an ingress node (needs KAFKA_BROKERS)',
  async run(argv) {
    const { values } = parse(argv, { port: { type: 'string' }, 'admin-port': { type: 'string' } }, USAGE);
    const config = loadConfig();
    const { brokers } = await kafkaFor(config, { embedded: false });
    const node = await startNode(config, {
      brokers,
      ingress: true,
      dispatcher: false,
      port: values.port !== undefined ? Number(values.port) : undefined,
      adminPort: values['admin-port'] !== undefined ? Number(values['admin-port']) : undefined,
    });
    say(`ingress ready on port ${node.ingress!.port} (admin ${node.ingress!.adminPort}), region ${config.region}`);
    await untilSignal();
    await node.close();
    return 0;
  },
};
