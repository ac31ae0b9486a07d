/**
 * DLQ replay: each entry goes back into delivery as a fresh DeliveryRecord (new delivery id,
 * attempt 1) on `sluice.deliveries`, then a DlqReplayMarker on `sluice.dlq` takes it out of the
 * list on every node. Deliveries are written before markers, so a crash in between leaves the
 * entry listed (a second replay may deliver twice) but never loses it. Audited once per request.
 *
 *   const n = await replayDlq(ctx, 'acme', entries, { actor: clientId, onProgress: (done, total) => ... });
 */
import type { Context } from '../context.ts';
import { waitFor } from '../context.ts';
import { appendAudit } from '../audit/audit-log.ts';
import { newDelivery } from './deliveries.ts';
import type { DlqEntry, DlqReplayMarker } from './records.ts';

const CHUNK = 500;

export interface ReplayOptions {
  actor: string;
  reason?: string | null;
  /** What was asked for, for the audit entry ("by filter {...}", "by ids"). */
  subject?: string;
  onProgress?: (done: number, total: number) => void;
}

export async function replayDlq(ctx: Context, tenantId: string, entries: DlqEntry[], opts: ReplayOptions): Promise<number> {
  const mine = entries.filter((e) => e.tenant_id === tenantId);
  if (mine.length === 0) return 0;
  await appendAudit(ctx, {
    tenant_id: tenantId,
    actor: opts.actor,
    action: 'dlq.replayed',
    subject: opts.subject ?? (mine.length === 1 ? mine[0].id : `${mine.length} DLQ entries`),
    reason: opts.reason ?? `${mine.length} entr${mine.length === 1 ? 'y' : 'ies'} put back into delivery`,
  });
  let done = 0;
  for (let i = 0; i < mine.length; i += CHUNK) {
    const chunk = mine.slice(i, i + CHUNK);
    const now = ctx.clock.now();
    await ctx.producer.send(
      ctx.topics.deliveries,
      chunk.map((e) => {
        const d = newDelivery(e.payload, e.endpoint_id, now, true);
        return { key: d.delivery_id, value: JSON.stringify(d) };
      }),
    );
    const replayedAt = new Date(now).toISOString();
    await ctx.producer.send(
      ctx.topics.dlq,
      chunk.map((e) => ({ key: tenantId, value: JSON.stringify({ kind: 'replayed', id: e.id, tenant_id: tenantId, replayed_at: replayedAt } satisfies DlqReplayMarker) })),
    );
    done += chunk.length;
    opts.onProgress?.(done, mine.length);
  }
  // This node's own list no longer shows them when the answer goes out.
  const last = mine[mine.length - 1];
  await waitFor(() => ctx.dlq.get(tenantId, last.id, ctx.clock.now()) === undefined, 10_000, 'DLQ replay marker');
  return done;
}
