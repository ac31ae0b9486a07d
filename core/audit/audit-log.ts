/**
 * The compliance log's one write operation, for every capability that must leave a trace
 * (revocations, re-enables, client creation, endpoints, DLQ replays, rotations):
 *
 *   const { id } = await appendAudit(ctx, {
 *     tenant_id, actor: auth.clientId, action: 'credential.revoked', subject: clientId, reason,
 *   });
 *
 * Resolves once Kafka committed the entry and this node's audit view shows it. The writer and the
 * view are the context's (ctx.audit, ctx.auditView), built by openContext for view sets that keep the audit view.
 */
import type { Context } from '../context.ts';
import type { AuditInput, AppendedEntry, AlongWithAudit } from './audit-writer.ts';

export type { AuditInput, AppendedEntry, AlongWithAudit };

/** What an audit append reads of the process's context: its audit writer. */
export type AuditDeps = Pick<Context, 'audit'>;

export async function appendAudit(ctx: AuditDeps, e: AuditInput): Promise<AppendedEntry> {
  return ctx.audit.append(e);
}

/**
 * Resolves once Kafka committed the entry, with the records `along` builds from it in the same
 * transaction (a write that must never land without its audit entry: a revocation); `visible`
 * resolves once this node's audit view shows the entry.
 *
 *   const { entry, visible } = await appendAuditCommitted(ctx, {...}, (e) => [{ topic, key, value }]);
 *   await Promise.all([visible, untilTheRecordIsSeen()]);
 */
export function appendAuditCommitted(
  ctx: AuditDeps,
  e: AuditInput,
  along?: (entry: AppendedEntry) => AlongWithAudit[],
): Promise<{ entry: AppendedEntry; visible: Promise<void> }> {
  return ctx.audit.appendCommitted(e, along);
}
