/**
 * The state bench's dead-letter burst writer, its own process (as the dispatcher is), so that building
 * and encoding a burst does not share an event loop with the latency probe. argv[2]: JSON
 * { brokers, prefix }; then IPC requests (BurstRequest). A burst goes the dispatcher's own write path:
 * dispatcher/dlq.ts `deadLetterEntry` makes each entry, and all are handed at once to
 * dispatcher/record.ts `OutcomeRecorder.record` (what as many concurrent failing deliveries do).
 */
import { randomUUID } from 'node:crypto';
import { systemClock } from '../../core/clock.ts';
import { createKafka } from '../../core/kafka/client.ts';
import { DurableProducer } from '../../core/kafka/producers.ts';
import { createLogger } from '../../core/log.ts';
import { Metrics } from '../../core/metrics.ts';
import { topicNames } from '../../core/topics.ts';
import type { DeliveryRecord } from '../../core/webhooks/records.ts';
import { deadLetterEntry } from '../../dispatcher/dlq.ts';
import type { Outcome } from '../../dispatcher/ladder.ts';
import { OutcomeRecorder } from '../../dispatcher/record.ts';
import { serve } from '../../harness/ipc.ts';

export type BurstRequest =
  /** Builds `count` dead letters of one endpoint, each with `padBytes` of event data (not timed). */
  | { op: 'prepare'; count: number; padBytes: number; tenant: string; endpointId: string }
  /** Records the prepared outcomes at once; answers { writtenMs }: until Kafka acknowledged them all. */
  | { op: 'go' };

const spec = JSON.parse(process.argv[2]) as { brokers: string[]; prefix: string };
const producer = new DurableProducer(createKafka(spec.brokers, 'sluice-bench-state-burst'));
await producer.connect();
// No dispatcher runs here: the recorder's context is the bench's producer and topic names.
const log = createLogger('error', 'bench-state');
const ctx = { producer, topics: topicNames(spec.prefix), clock: systemClock, log };
let prepared: Outcome[] = [];

serve<BurstRequest>(async (m) => {
  if (m.op === 'prepare') {
    const [now, pad, tenant] = [Date.now(), 'x'.repeat(m.padBytes), m.tenant];
    prepared = Array.from({ length: m.count }, (_, i) => {
      const rec: DeliveryRecord = {
        delivery_id: `dlv_${randomUUID().replaceAll('-', '')}`,
        endpoint_id: m.endpointId,
        tenant_id: tenant,
        event: {
          id: `evt_burst_${i}_${randomUUID().slice(0, 8)}`,
          tenant_id: tenant,
          type: 'inference.failed',
          data: { pad },
          created_at: now - 72 * 3600_000,
        },
        attempt: 17,
        first_attempt_at: now - 72 * 3600_000,
        due_at: now,
        last_status: 503,
        last_error: 'HTTP 503 from the endpoint',
        last_attempt_at: now,
      };
      return { kind: 'dead-letter', rec, entry: deadLetterEntry(rec, 17, now, 1) };
    });
    return {};
  }
  const recorder = new OutcomeRecorder(ctx, new Metrics());
  const t = Date.now();
  await Promise.all(prepared.map((o) => recorder.record(o)));
  prepared = [];
  return { writtenMs: Date.now() - t };
});
process.send!({ id: 0, ready: true });
