import { loadConfig } from '../../core/config.ts';
import { parse } from '../args.ts';
import { kafkaFor, say, untilSignal } from '../runtime.ts';
import { startNode } from '../assemble.ts';
import type { Command } from '../command.ts';
import { adminUrl } from '../../ingress/admin-server.ts';

const USAGE = `usage: sluice dispatcher      (needs KAFKA_BROKERS)

Runs one webhook dispatcher: a member of the delivery consumer group that signs and delivers
events, runs the retry ladder and dead-letters exhausted deliveries. Scale out by running more
(up to the number of partitions of sluice.deliveries). Its admin port (SLUICE_ADMIN_PORT:
/healthz, /readyz, /metrics) listens on SLUICE_ADMIN_HOST, 127.0.0.1 unless set.

SIGTERM or SIGINT stops it cleanly: nothing new is attempted, attempts in flight finish (10 s at
most) and their outcomes are recorded, and deliveries it had only queued stay uncommitted for the
next member of the group; then it exits 0. A second signal, or a stop that takes longer than
15 s, exits 1 at once.`;

export const dispatcher: Command = {
  async run(argv) {
    parse(argv, {}, USAGE);
    const config = loadConfig();
    const { brokers } = await kafkaFor(config, { embedded: false });
    const node = await startNode(config, { brokers, ingress: false, dispatcher: true });
    say(`dispatcher running (admin: ${adminUrl(config.adminHost, node.adminPort, '/metrics')})`);
    const signal = await untilSignal();
    say(`${signal}: stopping (attempts in flight finish; queued deliveries are left to the group)`);
    await node.close();
    say('dispatcher stopped');
    return 0;
  },
};
