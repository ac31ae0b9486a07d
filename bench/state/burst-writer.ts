/**
 * The dead-letter burst writer of the state bench, its own process (as the dispatcher is), so
 * that building and encoding the burst does not share an event loop with the latency probe in the
 * orchestrator. Spec (argv[2], JSON): { brokers, prefix }; then IPC requests (BurstRequest).
 */
import { createKafka } from '../../core/kafka/client.ts';
import { DurableProducer } from '../../core/kafka/producers.ts';
import { topicNames } from '../../core/topics.ts';
import type { Outcome } from '../../dispatcher/ladder.ts';
import { serve } from '../../harness/ipc.ts';
import { deadLetters, recordAll, type BurstRequest } from './burst.ts';

const spec = JSON.parse(process.argv[2]) as { brokers: string[]; prefix: string };
const producer = new DurableProducer(createKafka(spec.brokers, 'sluice-bench-state-burst'));
await producer.connect();
let prepared: Outcome[] = [];

serve<BurstRequest>(async (m) => {
  if (m.op === 'prepare') {
    prepared = deadLetters(m.count, m.tenant, m.endpointId, m.padBytes);
    return {};
  }
  const writtenMs = await recordAll(producer, topicNames(spec.prefix), prepared);
  prepared = [];
  return { writtenMs };
});
process.send!({ id: 0, ready: true });
