/**
 * Client-secret rotation, one step: every active client whose `rotate_at` has come gets a new
 * secret; the old ones keep working until the overlap (SLUICE_SECRET_GRACE_DAYS, 1 day by default)
 * ends. The new secret is kept sealed on the record for `GET /v1/auth/clients/{id}/secret`, and a
 * `credential.rotated` event (without the secret) tells the tenant's webhooks to fetch it. Only a
 * token of a current secret reads it there (never one of the secret it replaces, whose thief would
 * otherwise survive the rotation): another client of the tenant with `credentials:read-any`, or
 * the operator (`sluice admin client-secret`), fetches it and hands it to the client.
 */
import type { Context } from '../context.ts';
import { DAY_MS } from '../context.ts';
import { appendAudit, type AuditDeps } from '../audit/audit-log.ts';
import { writeClient, type WriteClientDeps } from '../clients/provisioning.ts';
import { nextSecretCreatedAt, type ClientRecord } from '../clients/client-registry.ts';
import { hashSecret, newId, newSecret, seal, unseal } from '../secrets.ts';
import type { EventRecord } from '../webhooks/records.ts';
import { ROTATION_ACTOR } from './key-rotation.ts';

export const CREDENTIAL_ROTATED = 'credential.rotated';

/** What the sealed `pending_secret_sealed` holds. */
export interface RotatedSecret {
  client_secret: string;
  rotated_at: number;
  previous_secret_expires_at: number;
}

export function openRotatedSecret(masterKey: Buffer, rec: ClientRecord): RotatedSecret | null {
  if (!rec.pending_secret_sealed) return null;
  return JSON.parse(unseal(masterKey, rec.pending_secret_sealed)) as RotatedSecret;
}

/** What a client-secret rotation step reads of the process's context. */
export type SecretRotationDeps = Pick<Context, 'clients' | 'clock' | 'revocations'> & RotateSecretDeps;

export async function rotateSecrets(ctx: SecretRotationDeps): Promise<string[]> {
  const now = ctx.clock.now();
  const due = ctx.clients
    .all()
    .filter(
      (c) => c.status === 'active' && c.rotate_at !== null && c.rotate_at <= now && !ctx.revocations.get(c.client_id),
    );
  const rotated: string[] = [];
  for (const c of due) {
    await rotateSecret(ctx, c, now);
    rotated.push(c.client_id);
  }
  return rotated;
}

/** What rotating one client's secret reads of the process's context. */
export type RotateSecretDeps = Pick<Context, 'config' | 'producer' | 'topics'> & AuditDeps & WriteClientDeps;

export async function rotateSecret(ctx: RotateSecretDeps, c: ClientRecord, now: number): Promise<void> {
  const graceEnds = now + ctx.config.secretGraceDays * DAY_MS;
  const secret = newSecret('sk');
  const kept = c.secrets
    .filter((s) => s.expires_at === null || now < s.expires_at)
    .map((s) => ({ ...s, expires_at: s.expires_at === null ? graceEnds : Math.min(s.expires_at, graceEnds) }));
  const pending: RotatedSecret = { client_secret: secret, rotated_at: now, previous_secret_expires_at: graceEnds };
  const record: ClientRecord = {
    ...c,
    secrets: [
      ...kept,
      { hash: hashSecret(ctx.config.masterKey, secret), created_at: nextSecretCreatedAt(c, now), expires_at: null },
    ],
    updated_at: Math.max(now, c.updated_at + 1),
    rotate_at: now + ctx.config.secretRotationDays * DAY_MS,
    pending_secret_sealed: seal(ctx.config.masterKey, JSON.stringify(pending)),
  };
  await appendAudit(ctx, {
    tenant_id: c.tenant_id,
    actor: ROTATION_ACTOR,
    action: 'client_secret.rotated',
    subject: c.client_id,
    reason: `previous secret valid until ${new Date(graceEnds).toISOString()}`,
  });
  await writeClient(ctx, record);
  const event: EventRecord = {
    id: newId('evt'),
    tenant_id: c.tenant_id,
    type: CREDENTIAL_ROTATED,
    created_at: now,
    data: {
      client_id: c.client_id,
      rotated_at: new Date(now).toISOString(),
      previous_secret_expires_at: new Date(graceEnds).toISOString(),
      next_rotation_at: new Date(record.rotate_at!).toISOString(),
      secret_url: `${ctx.config.issuer}/v1/auth/clients/${c.client_id}/secret`,
    },
  };
  await ctx.producer.sendJson(ctx.topics.events, c.tenant_id, event);
}
