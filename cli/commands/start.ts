import { loadConfig } from '../../core/config.ts';
import { createClient } from '../../core/clients/provisioning.ts';
import { parse } from '../args.ts';
import { kafkaFor, say, untilSignal } from '../runtime.ts';
import { startNode } from '../assemble.ts';
import type { Command } from '../command.ts';

const USAGE = `usage: sluice start

Runs everything in one process: ingress (SLUICE_PORT, default 8080), admin (SLUICE_ADMIN_PORT,
default 9464) and the webhook dispatcher. When KAFKA_BROKERS is not set it starts the embedded
local Kafka on 127.0.0.1:SLUICE_KAFKA_PORT (default 9092) and stops it on exit. With no clients
yet, it provisions and prints a bootstrap admin credential for the tenant "local".`;

export const start: Command = {
  summary: 'run ingress + dispatcher in one process (local Kafka included when KAFKA_BROKERS is unset)',
  async run(argv) {
    parse(argv, {}, USAGE);
    const config = loadConfig();
    if (config.masterKeyIsDefault) say('warning: SLUICE_MASTER_KEY is not set; using the development key (never do this in production)');
    const { brokers, local } = await kafkaFor(config, { embedded: true });
    try {
      const node = await startNode(config, { brokers, ingress: true, dispatcher: true });
      const base = `http://127.0.0.1:${node.ingress!.port}`;
      say(`Sluice is up: ${base}  (admin: http://127.0.0.1:${node.ingress!.adminPort}/healthz, Kafka: ${brokers.join(',')})`);
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
      const signal = await untilSignal();
      say(`${signal}: shutting down`);
      await node.close();
    } finally {
      if (local) {
        say('stopping the embedded Kafka');
        await local.stop();
      }
    }
    return 0;
  },
};
