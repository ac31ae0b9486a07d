/**
 * Signing-key rotation, one step: write what the key ring's plan asks for (the successor before it
 * signs), retire keys whose last token has expired, audit both. Idempotent: a step with nothing due
 * writes nothing.
 */
import type { Context } from '../context.ts';
import { DAY_MS, writeState, type WriteStateDeps } from '../context.ts';
import { appendAudit, type AuditDeps } from '../audit/audit-log.ts';
import { SYSTEM_TENANT } from '../audit/entry.ts';

export const ROTATION_ACTOR = 'sluice:rotation';

/** What a signing-key rotation step reads of the process's context. */
export type KeyRotationDeps = Pick<Context, 'clock' | 'config' | 'keys' | 'topics'> & AuditDeps & WriteStateDeps;

export async function rotateKeys(ctx: KeyRotationDeps): Promise<{ created: string[]; retired: string[] }> {
  const now = ctx.clock.now();
  const plan = {
    rotationMs: ctx.config.keyRotationDays * DAY_MS,
    tokenLifetimeMs: (ctx.config.tokenTtlSeconds + ctx.config.clockSkewSeconds) * 1000,
  };
  const created: string[] = [];
  for (const k of ctx.keys.plan(now, plan)) {
    await appendAudit(ctx, {
      tenant_id: SYSTEM_TENANT,
      actor: ROTATION_ACTOR,
      action: 'signing_key.created',
      subject: k.kid,
      reason:
        `signs from ${new Date(k.signs_from).toISOString()} until ${new Date(k.signs_until).toISOString()}, ` +
        `published until ${new Date(k.published_until).toISOString()}`,
    });
    await writeState(
      ctx,
      ctx.topics.keys,
      k.kid,
      k,
      () => ctx.keys.records().some((r) => r.kid === k.kid),
      'signing key',
    );
    created.push(k.kid);
  }
  const retired: string[] = [];
  for (const kid of ctx.keys.expired(now)) {
    await appendAudit(ctx, {
      tenant_id: SYSTEM_TENANT,
      actor: ROTATION_ACTOR,
      action: 'signing_key.retired',
      subject: kid,
      reason: 'its last token has expired',
    });
    await writeState(
      ctx,
      ctx.topics.keys,
      kid,
      null,
      () => !ctx.keys.records().some((r) => r.kid === kid),
      'signing key tombstone',
    );
    retired.push(kid);
  }
  return { created, retired };
}
