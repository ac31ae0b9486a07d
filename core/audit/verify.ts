/**
 * Proves the whole chain: reads `sluice.audit` from the first offset to the end (read_committed,
 * as every view does) with a fresh audit view, which checks every link as it applies it.
 */
import type { Kafka } from 'kafkajs';
import { StateConsumer } from '../kafka/state-consumer.ts';
import { AuditView, type BrokenLink } from './audit-view.ts';

export interface VerifyResult {
  entries: number;
  head: { seq: number; hash: string } | null;
  broken: BrokenLink | null;
}

export async function verifyAuditLog(kafka: Kafka, topic: string, groupPrefix: string): Promise<VerifyResult> {
  const view = new AuditView(topic);
  const state = new StateConsumer(kafka, [view], {
    groupPrefix: `${groupPrefix}-audit-verify`,
    readyTimeoutMs: 120_000,
  });
  try {
    await state.start();
  } finally {
    await state.stop().catch(() => {});
  }
  const tail = view.tail();
  return { entries: view.count, head: tail ? { seq: tail.seq, hash: tail.hash } : null, broken: view.firstBroken };
}
