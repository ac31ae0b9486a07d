/** Creating service principals: validated, written to `sluice.clients`, secret returned once. */
import type { Context } from '../context.ts';
import { DAY_MS, writeState } from '../context.ts';
import { SluiceError } from '../errors.ts';
import { newClient, TENANT_PATTERN, type ClientRecord } from './client-registry.ts';
import { appendAudit } from '../audit/audit-log.ts';

export interface CreatedClient {
  client_id: string;
  client_secret: string;
  tenant_id: string;
  role: string;
  scopes: string[];
  region: string;
}

export async function createClient(
  ctx: Context,
  input: { tenant: string; role: string; region?: string; actor?: string },
): Promise<CreatedClient> {
  if (!TENANT_PATTERN.test(input.tenant))
    throw new SluiceError(
      'INVALID_REQUEST',
      `tenant "${input.tenant}" must be 1-63 lowercase letters, digits, "-" or "_"`,
    );
  const scopes = ctx.config.roles[input.role];
  if (!scopes)
    throw new SluiceError(
      'INVALID_REQUEST',
      `unknown role "${input.role}"; known roles: ${Object.keys(ctx.config.roles).join(', ')}`,
    );
  const region = input.region ?? ctx.config.region;
  if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(region))
    throw new SluiceError('INVALID_REQUEST', `region "${region}" must be lowercase letters, digits and dashes`);
  const { record, secret } = newClient(
    ctx.config.masterKey,
    { tenant_id: input.tenant, role: input.role, scopes: [...scopes], region },
    ctx.clock.now(),
    ctx.config.secretRotationDays * DAY_MS,
  );
  await appendAudit(ctx, {
    tenant_id: record.tenant_id,
    actor: input.actor ?? 'operator',
    action: 'client.created',
    subject: record.client_id,
    reason: `role ${record.role}, region ${record.region}`,
  });
  await writeClient(ctx, record);
  return {
    client_id: record.client_id,
    client_secret: secret,
    tenant_id: record.tenant_id,
    role: record.role,
    scopes: record.scopes,
    region: record.region,
  };
}

/** Writes a client record and waits until this node's own view shows it. */
export async function writeClient(ctx: Context, record: ClientRecord): Promise<void> {
  await writeState(
    ctx,
    ctx.topics.clients,
    record.client_id,
    record,
    () => ctx.clients.get(record.client_id)?.updated_at === record.updated_at,
    'client record',
  );
}
