/**
 * The compliance log's one write operation, for every capability that must leave a trace
 * (revocations, re-enables, client creation, endpoints, DLQ replays, rotations):
 *
 *   const { id } = await appendAudit(ctx, { tenant_id, actor: auth.clientId, action: 'credential.revoked', subject: clientId, reason });
 *
 * Resolves once Kafka committed the entry and this node's audit view shows it. Needs the audit view
 * among the context's views (cli/assemble.ts buildViews adds it on every node).
 */
import type { Context } from '../context.ts';
import { findAuditView, type AuditView } from './audit-view.ts';
import { AuditWriter, type AuditInput, type AppendedEntry } from './audit-writer.ts';

export type { AuditInput, AppendedEntry };

const writers = new WeakMap<Context, AuditWriter>();

export function auditViewOf(ctx: Context): AuditView {
  const view = findAuditView(ctx.state.viewsOf(ctx.topics.audit));
  if (!view) throw new Error('this context has no audit view: open it with views including new AuditView(topics.audit)');
  return view;
}

export async function appendAudit(ctx: Context, e: AuditInput): Promise<AppendedEntry> {
  return writerOf(ctx).append(e);
}

/**
 * Resolves once Kafka committed the entry; `visible` resolves once this node's audit view shows it.
 * For a write that must come after its audit entry (a revocation) and may overlap the view's wait:
 *
 *   const { entry, visible } = await appendAuditCommitted(ctx, {...});
 *   await Promise.all([visible, writeTheRecord(entry.id)]);
 */
export function appendAuditCommitted(ctx: Context, e: AuditInput): Promise<{ entry: AppendedEntry; visible: Promise<void> }> {
  return writerOf(ctx).appendCommitted(e);
}

function writerOf(ctx: Context): AuditWriter {
  let writer = writers.get(ctx);
  if (!writer) {
    const w = new AuditWriter({ kafka: ctx.kafka, topic: ctx.topics.audit, transactionalId: `${ctx.config.topicPrefix}.audit-writer`, view: auditViewOf(ctx), state: ctx.state, clock: ctx.clock, log: ctx.log });
    writers.set(ctx, w);
    ctx.closers.push(() => w.close());
    writer = w;
  }
  return writer;
}
