/**
 * Emergency revocation and its undoing, each returning once this node's view shows it. A revocation
 * commits its audit entry and the compacted `sluice.revocations` record in one Kafka transaction
 * (both or neither). A re-enable writes its audit entry first, then the record's tombstone.
 *
 *   const { record, created } = await revokeClient(ctx, { clientId, reason, actor, tenant: auth.tenantId });
 */
import type { Context } from '../context.ts';
import { DAY_MS, waitFor, writeState, type WriteStateDeps } from '../context.ts';
import { withDeadline } from '../deadline.ts';
import { SluiceError, unavailable } from '../errors.ts';
import { hashSecret, newId, newSecret } from '../secrets.ts';
import { nextSecretCreatedAt, usesCertificate } from './client-registry.ts';
import { writeClient, type WriteClientDeps } from './provisioning.ts';
import { appendAudit, appendAuditCommitted, type AuditDeps } from '../audit/audit-log.ts';
import type { RevocationRecord } from './revocation-list.ts';
import { pushRevocation, type PushDeps } from './revocation-push.ts';

export interface RevokeInput {
  clientId: string;
  reason: string;
  /** client_id of the caller, or "operator:<name>". */
  actor: string;
  /** The caller's tenant; null for an operator, who may revoke any tenant's client. */
  tenant: string | null;
}

/** What a revocation reads of the process's context. */
export type RevokeDeps = Pick<
  Context,
  'changes' | 'clients' | 'clock' | 'config' | 'log' | 'revocations' | 'revoking' | 'topics'
> &
  PushDeps &
  AuditDeps;

/**
 * `created` is false when the client was already revoked: the existing record comes back unchanged.
 * A revocation not through (committed and in this node's view) within `answerWithinMs` (default
 * `config.revocationAnswerMs`; a Kafka transaction coordinator not answering, a region cut) throws
 * 503 UNAVAILABLE and goes on in the background; a repeat that reaches this process joins it (200
 * once through). One on another process or node starts its own (a second audit entry if both
 * commit). The CLI, which closes its context when this returns, passes Infinity.
 */
export async function revokeClient(
  ctx: RevokeDeps,
  input: RevokeInput,
  answerWithinMs = ctx.config.revocationAnswerMs,
): Promise<{ record: RevocationRecord; created: boolean }> {
  const client = ctx.clients.get(input.clientId);
  // Another tenant's client is indistinguishable from an unknown one.
  if (!client || (input.tenant !== null && client.tenant_id !== input.tenant))
    throw new SluiceError('NOT_FOUND', `no client "${input.clientId}" in this tenant`);
  const existing = ctx.revocations.get(client.client_id);
  if (existing) return { record: existing, created: false };
  const running = ctx.revoking.current(client.client_id);
  if (running) return { record: await withinBound(ctx, client.client_id, running, answerWithinMs), created: false };
  const flight = ctx.revoking.run(client.client_id, () => revokeNow(ctx, client, input));
  return { record: await withinBound(ctx, client.client_id, flight, answerWithinMs), created: true };
}

/** Revocations under way whose failure is logged (one answered 503 already). */
const watched = new WeakSet<Promise<RevocationRecord>>();

/** The revocation under way, or 503 once `ms` pass: it goes on, and a failure after that is logged. */
async function withinBound(
  ctx: RevokeDeps,
  clientId: string,
  flight: Promise<RevocationRecord>,
  ms: number,
): Promise<RevocationRecord> {
  if (!Number.isFinite(ms)) return flight;
  return withDeadline(flight, ms, () => {
    // Nobody waits for it any more: a failure is the operator's to see (the client is not revoked),
    // logged once however many calls it answered 503.
    const under = ctx.revoking.current(clientId) ?? flight;
    if (!watched.has(under)) {
      watched.add(under);
      under.catch((err: Error) =>
        ctx.log.error('a revocation answered 503 failed in the background; it must be sent again', {
          client_id: clientId,
          error: err.message,
        }),
      );
    }
    return unavailable(
      `the revocation is not through after ${ms} ms (Kafka has not committed it, or this node has ` +
        'not read it back); it goes on in the background: send it again until it answers 200',
    );
  });
}

async function revokeNow(
  ctx: RevokeDeps,
  client: { client_id: string; tenant_id: string },
  input: RevokeInput,
): Promise<RevocationRecord> {
  // Other regions refuse the client at once (provisionally) instead of after the Kafka path below.
  void pushRevocation(ctx, { client_id: client.client_id, revoked_at: ctx.clock.now() });
  // The record goes in the audit entry's transaction: no revocation without its entry, and one
  // commit for both instead of a second write after the first (what other nodes wait for).
  // Set by the callback of the attempt that committed (one that found its entry already
  // committed is a repeat of an attempt that set it), so set once the append resolves.
  let record!: RevocationRecord;
  const { visible } = await appendAuditCommitted(
    ctx,
    {
      tenant_id: client.tenant_id,
      actor: input.actor,
      action: 'credential.revoked',
      subject: client.client_id,
      reason: input.reason,
    },
    (audit) => {
      record = {
        revocation_id: newId('rev'),
        client_id: client.client_id,
        tenant_id: client.tenant_id,
        reason: input.reason,
        actor: input.actor,
        revoked_at: ctx.clock.now(),
        audit_entry_id: audit.id,
      };
      return [{ topic: ctx.topics.revocations, key: client.client_id, value: JSON.stringify(record) }];
    },
  );
  const { revocation_id } = record;
  const seen = () => ctx.revocations.get(client.client_id)?.revocation_id === revocation_id;
  await Promise.all([visible, waitFor(ctx.changes, seen, 10_000, 'revocation record')]);
  return record;
}

/** What lifting a revocation reads of the process's context. */
export type ReenableDeps = Pick<Context, 'clients' | 'clock' | 'config' | 'revocations'> &
  AuditDeps &
  WriteClientDeps &
  LiftDeps;

/**
 * Lifts a revocation (operator only). A client is revoked because its secret may have leaked, so
 * it comes back with a new secret, returned here once: the record holding only the new secret is
 * written before the revocation's tombstone, so no earlier secret (the current one, one still in
 * its overlap, or a rotated one waiting to be fetched) ever works again. A client that
 * authenticates with its TLS certificate has no secret: it comes back with its registered
 * certificate (`client_secret` null). Tokens issued before the revocation would verify again once
 * the record is gone, so this waits out their lifetime unless `force` says the operator accepts that.
 */
export async function reenableClient(
  ctx: ReenableDeps,
  input: { clientId: string; reason: string; actor: string; force?: boolean },
): Promise<{ audit_entry_id: string; revocation: RevocationRecord; client_secret: string | null }> {
  const rec = ctx.revocations.get(input.clientId);
  if (!rec) throw new SluiceError('NOT_FOUND', `client "${input.clientId}" is not revoked`);
  const client = ctx.clients.get(rec.client_id);
  if (!client) throw new SluiceError('NOT_FOUND', `client "${input.clientId}" no longer exists`);
  const safeAt = rec.revoked_at + (ctx.config.tokenTtlSeconds + ctx.config.clockSkewSeconds) * 1000 + 1000;
  if (!input.force && ctx.clock.now() < safeAt) {
    throw new SluiceError(
      'CONFLICT',
      `tokens issued before the revocation stay valid until ${new Date(safeAt).toISOString()}; ` +
        're-enabling earlier would make them verify again (use --force to accept that)',
      { safe_at: new Date(safeAt).toISOString() },
    );
  }
  const certificate = usesCertificate(client);
  const audit = await appendAudit(ctx, {
    tenant_id: rec.tenant_id,
    actor: input.actor,
    action: 'credential.reenabled',
    subject: rec.client_id,
    reason: certificate
      ? `${input.reason} (${client.token_endpoint_auth_method}: its registered certificate works again)`
      : `${input.reason} (new secret issued; every earlier secret invalidated)`,
  });
  if (certificate) {
    await liftRevocation(ctx, rec);
    return { audit_entry_id: audit.id, revocation: rec, client_secret: null };
  }
  const now = ctx.clock.now();
  const secret = newSecret('sk');
  await writeClient(ctx, {
    ...client,
    secrets: [
      {
        hash: hashSecret(ctx.config.masterKey, secret),
        created_at: nextSecretCreatedAt(client, now),
        expires_at: null,
      },
    ],
    pending_secret_sealed: null,
    updated_at: Math.max(now, client.updated_at + 1),
    rotate_at: now + ctx.config.secretRotationDays * DAY_MS,
  });
  await liftRevocation(ctx, rec);
  return { audit_entry_id: audit.id, revocation: rec, client_secret: secret };
}

type LiftDeps = Pick<Context, 'revocations' | 'topics'> & WriteStateDeps;

/** Writes the revocation's tombstone and waits until this node's view no longer has it. */
function liftRevocation(ctx: LiftDeps, rec: RevocationRecord): Promise<void> {
  return writeState(
    ctx,
    ctx.topics.revocations,
    rec.client_id,
    null,
    () => !ctx.revocations.get(rec.client_id),
    'revocation tombstone',
  );
}
