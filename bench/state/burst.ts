/**
 * Dead-letter bursts through the dispatcher's own write path: N deliveries that ran out of
 * attempts become DLQ entries by dispatcher/dlq.ts `deadLetterEntry`, and all N are handed at once
 * to dispatcher/record.ts `OutcomeRecorder.record` (what N concurrent failing deliveries do), which
 * gathers them into one `DurableProducer.send` per topic. Only the recorder's context is minimal
 * (the bench's producer and topic names) since no dispatcher runs in this process.
 */
import { randomUUID } from 'node:crypto';
import { systemClock } from '../../core/clock.ts';
import type { DurableProducer } from '../../core/kafka/producers.ts';
import { createLogger } from '../../core/log.ts';
import { Metrics } from '../../core/metrics.ts';
import type { TopicNames } from '../../core/topics.ts';
import type { DeliveryRecord } from '../../core/webhooks/records.ts';
import { deadLetterEntry } from '../../dispatcher/dlq.ts';
import type { Outcome } from '../../dispatcher/ladder.ts';
import { OutcomeRecorder } from '../../dispatcher/record.ts';

/** `count` dead letters of one endpoint, each with `padBytes` of event data. */
export function deadLetters(
  count: number,
  tenant: string,
  endpointId: string,
  padBytes: number,
  nowMs = Date.now(),
): Outcome[] {
  const pad = 'x'.repeat(padBytes);
  return Array.from({ length: count }, (_, i) => {
    const rec: DeliveryRecord = {
      delivery_id: `dlv_${randomUUID().replaceAll('-', '')}`,
      endpoint_id: endpointId,
      tenant_id: tenant,
      event: {
        id: `evt_burst_${i}_${randomUUID().slice(0, 8)}`,
        tenant_id: tenant,
        type: 'inference.failed',
        data: { pad },
        created_at: nowMs - 72 * 3600_000,
      },
      attempt: 17,
      first_attempt_at: nowMs - 72 * 3600_000,
      due_at: nowMs,
      last_status: 503,
      last_error: 'HTTP 503 from the endpoint',
      last_attempt_at: nowMs,
    };
    return { kind: 'dead-letter', rec, entry: deadLetterEntry(rec, 17, nowMs, 1) };
  });
}

/** Records every outcome at once; resolves with the ms until Kafka acknowledged them all. */
export async function recordAll(producer: DurableProducer, topics: TopicNames, outcomes: Outcome[]): Promise<number> {
  const ctx = { producer, topics, clock: systemClock, log: createLogger('error', 'bench-state') };
  const recorder = new OutcomeRecorder(ctx, new Metrics());
  const t = Date.now();
  await Promise.all(outcomes.map((o) => recorder.record(o)));
  return Date.now() - t;
}

/** Requests of the burst writer process (bench/state/burst-writer.ts). */
export type BurstRequest =
  /** Builds the outcomes (not timed). */
  | { op: 'prepare'; count: number; padBytes: number; tenant: string; endpointId: string }
  /** Records the prepared outcomes at once; answers { writtenMs }. */
  | { op: 'go' };
