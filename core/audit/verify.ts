/**
 * Proves every tenant's chain: reads `sluice.audit` from the first offset to the end
 * (read_committed, as every view does) with a fresh audit view, which checks every link as it
 * applies it.
 */
import type { Kafka } from '../kafka/client.ts';
import { StateConsumer } from '../kafka/state-consumer.ts';
import { AuditView, type BrokenLink } from './audit-view.ts';
import type { ChainLink } from './entry.ts';

export interface VerifyResult {
  /** Records read. */
  entries: number;
  /** The log's last entry. */
  head: { tenant_id: string; seq: number; hash: string } | null;
  /** Each tenant's last entry: its seq counts the tenant's entries, its hash is where the tenant's own check ends. */
  heads: Record<string, ChainLink>;
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
  return {
    entries: view.count,
    head: tail ? { tenant_id: tail.tenant_id, seq: tail.seq, hash: tail.hash } : null,
    heads: view.heads(),
    broken: view.firstBroken,
  };
}
