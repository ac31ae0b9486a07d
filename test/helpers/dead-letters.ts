/**
 * DLQ entries as the dispatcher writes them after 17 failures, written straight onto a node's DLQ
 * topic with a plain kafkajs producer: how tests get thousands of dead letters without waiting
 * out a retry ladder.
 *
 *   const list = deadLetters('acme', ep.id, 2000, 'cli', { firstAt: Date.now() - 3600_000 });
 *   await writeDeadLetters(node.ctx.topics.dlq, list);
 */
import { Kafka, logLevel } from 'kafkajs';
import type { DlqEntry } from '../../core/webhooks/records.ts';
import { brokers } from './sluice.ts';

const HOUR = 3600_000;

/** `n` entries of one endpoint, the first last attempted (and dead-lettered) at `firstAt`, `spacingMs` apart. */
export function deadLetters(
  tenant: string,
  endpointId: string,
  n: number,
  tag: string,
  { firstAt, spacingMs = 1 }: { firstAt: number; spacingMs?: number },
): DlqEntry[] {
  return Array.from({ length: n }, (_, i) => {
    const last = firstAt + i * spacingMs;
    const eventId = `evt_${tag}_${String(i).padStart(5, '0')}`;
    return {
      id: `dlq_${tag}_${String(i).padStart(5, '0')}`,
      event_id: eventId,
      endpoint_id: endpointId,
      tenant_id: tenant,
      event_type: 'pipeline.failed',
      attempts: 17,
      last_status: 503,
      last_error: null,
      first_attempt_at: new Date(last - 72 * HOUR).toISOString(),
      last_attempt_at: new Date(last).toISOString(),
      dead_lettered_at: new Date(last).toISOString(),
      expires_at: new Date(last + 7 * 24 * HOUR).toISOString(),
      payload: {
        id: eventId,
        tenant_id: tenant,
        type: 'pipeline.failed',
        data: { n: i, tag },
        created_at: last - 72 * HOUR,
      },
    };
  });
}

/** Writes the entries onto `topic` (keyed by tenant, 250 a request), as the dispatcher would. */
export async function writeDeadLetters(topic: string, list: DlqEntry[]): Promise<void> {
  const producer = new Kafka({ clientId: 'dead-letters', brokers: brokers(), logLevel: logLevel.NOTHING }).producer();
  await producer.connect();
  try {
    for (let i = 0; i < list.length; i += 250)
      await producer.send({
        topic,
        messages: list.slice(i, i + 250).map((e) => ({ key: e.tenant_id, value: JSON.stringify(e) })),
      });
  } finally {
    await producer.disconnect();
  }
}
