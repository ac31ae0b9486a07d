/**
 * DLQ replay: each entry goes back into delivery as a fresh DeliveryRecord (new delivery id,
 * attempt 1) on `sluice.deliveries`, then a DlqReplayMarker on `sluice.dlq` takes it out of the
 * list on every node. Deliveries are written before markers, so a crash in between leaves the
 * entry listed (a second replay may deliver twice) but never loses it. Audited once per request.
 *
 *   const n = await replayDlq(ctx, 'acme', ctx.dlq.stream('acme', filter, now), ctx.dlq.count('acme', filter, now), {
 *     actor: clientId,
 *   });
 */
import { producing } from '../tracing.ts';
import type { Context } from '../context.ts';
import { waitForWhileMoving } from '../context.ts';
import { appendAudit, type AuditDeps } from '../audit/audit-log.ts';
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

/** What a replay reads of the process's context. */
export type ReplayDeps = Pick<Context, 'changes' | 'clock' | 'dlq' | 'state' | 'topics'> & AuditDeps & ResendDeps;

/**
 * `entries` may be a lazy iterable (a filter over a DLQ of millions is read a chunk at a time,
 * never held whole); `total` is how many it will give, for the audit entry and the progress.
 */
export async function replayDlq(
  ctx: ReplayDeps,
  tenantId: string,
  entries: Iterable<DlqEntry>,
  total: number,
  opts: ReplayOptions,
): Promise<number> {
  if (total === 0) return 0;
  await appendAudit(ctx, {
    tenant_id: tenantId,
    actor: opts.actor,
    action: 'dlq.replayed',
    subject: opts.subject ?? `${total} DLQ entr${total === 1 ? 'y' : 'ies'}`,
    reason: opts.reason ?? `${total} entr${total === 1 ? 'y' : 'ies'} put back into delivery`,
  });
  let done = 0;
  let last: DlqEntry | null = null;
  for (const chunk of chunks(entries, tenantId)) {
    last = chunk[chunk.length - 1];
    await resendEntries(ctx, tenantId, chunk);
    done += chunk.length;
    opts.onProgress?.(done, Math.max(done, total));
  }
  // This node's own list no longer shows them when the answer goes out. Thousands of markers take
  // their time to apply on a busy node: the wait lasts while the view moves on.
  const replayed = () => ctx.dlq.get(tenantId, last!.id, ctx.clock.now()) === undefined;
  const applied = () => ctx.state.applied(ctx.topics.dlq);
  if (last) await waitForWhileMoving(ctx.changes, replayed, applied, 10_000, 'DLQ replay marker');
  return done;
}

/** What re-sending DLQ entries reads of the process's context. */
export type ResendDeps = Pick<Context, 'clock' | 'producer' | 'topics'>;

/**
 * Writes each entry (all of `tenantId`) back to `sluice.deliveries` as a fresh delivery (new id,
 * attempt 1, tagged with `recovery` when a recovery job sends it), then its replay marker. Not audited:
 * the caller audits the request. Used by replayDlq and by recovery jobs (core/webhooks/recovery.ts).
 */
export async function resendEntries(
  ctx: ResendDeps,
  tenantId: string,
  chunk: DlqEntry[],
  recovery?: string,
): Promise<void> {
  const now = ctx.clock.now();
  // Traced: the replayed deliveries continue the replay request's trace.
  await producing(ctx.topics.deliveries, (headers) =>
    ctx.producer.send(
      ctx.topics.deliveries,
      chunk.map((e) => {
        const d = newDelivery(e.payload, e.endpoint_id, now, true);
        if (recovery !== undefined) d.recovery = recovery;
        return { key: d.delivery_id, value: JSON.stringify(d), headers };
      }),
    ),
  );
  const replayedAt = new Date(now).toISOString();
  await ctx.producer.send(
    ctx.topics.dlq,
    chunk.map((e) => ({
      key: tenantId,
      value: JSON.stringify({
        kind: 'replayed',
        id: e.id,
        tenant_id: tenantId,
        replayed_at: replayedAt,
      } satisfies DlqReplayMarker),
    })),
  );
}

function* chunks(entries: Iterable<DlqEntry>, tenantId: string): Generator<DlqEntry[]> {
  let chunk: DlqEntry[] = [];
  for (const e of entries) {
    if (e.tenant_id !== tenantId) continue;
    chunk.push(e);
    if (chunk.length === CHUNK) {
      yield chunk;
      chunk = [];
    }
  }
  if (chunk.length > 0) yield chunk;
}
