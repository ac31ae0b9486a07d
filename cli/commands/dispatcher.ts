import { loadConfig } from '../../core/config.ts';
import { parse } from '../args.ts';
import { kafkaFor, say, untilSignal } from '../runtime.ts';
import { startNode } from '../assemble.ts';
import type { Command } from '../command.ts';

const USAGE = `usage: sluice dispatcher      (needs KAFKA_BROKERS)

Runs one webhook dispatcher: a member of the delivery consumer group that signs and delivers
events, runs the retry ladder and dead-letters exhausted deliveries. Scale out by running more
(up to the number of partitions of sluice.deliveries).`;

export const dispatcher: Command = {
  summary: 'run a webhook dispatcher group member (needs KAFKA_BROKERS)',
  async run(argv) {
    parse(argv, {}, USAGE);
    const config = loadConfig();
    const { brokers } = await kafkaFor(config, { embedded: false });
    const node = await startNode(config, { brokers, ingress: false, dispatcher: true });
    say(`dispatcher running (admin: http://${config.host}:${node.adminPort}/metrics)`);
    await untilSignal();
    await node.close();
    return 0;
  },
};
