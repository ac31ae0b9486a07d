/**
 * Dead-lettering: the DLQ entry (DlqEntry in core/webhooks/records.ts), built from the delivery that
 * ran out of attempts (or was refused one: endpoint DISABLED, or PENDING for the whole retry
 * span). Its id derives from the delivery id, so a dead-letter repeated after a crash is the same
 * entry (the DLQ view keeps one), while a replayed delivery (a new delivery id) gets a new one.
 */
import { createHash } from 'node:crypto';
import { retryLadder } from '../core/webhooks/retry-policy.ts';
import type { DeliveryRecord, DlqEntry } from '../core/webhooks/records.ts';

const iso = (ms: number) => new Date(ms).toISOString();

export function deadLetterEntry(rec: DeliveryRecord, attempts: number, nowMs: number, timeScale: number): DlqEntry {
  return {
    id: `dlq_${createHash('sha256').update(rec.delivery_id).digest('hex').slice(0, 24)}`,
    event_id: rec.event.id,
    endpoint_id: rec.endpoint_id,
    tenant_id: rec.tenant_id,
    event_type: rec.event.type,
    attempts,
    last_status: rec.last_status,
    last_error: rec.last_error,
    first_attempt_at: iso(rec.first_attempt_at ?? nowMs),
    last_attempt_at: iso(rec.last_attempt_at ?? nowMs),
    dead_lettered_at: iso(nowMs),
    expires_at: iso(nowMs + retryLadder.dlqRetentionMs / timeScale),
    payload: rec.event,
  };
}
