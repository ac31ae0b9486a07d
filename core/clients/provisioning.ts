/** Creating service principals: validated, written to `sluice.clients`, secret returned once. */
import type { Context } from '../context.ts';
import type { Config } from '../config.ts';
import { DAY_MS, writeState, type WriteStateDeps } from '../context.ts';
import { SluiceError } from '../errors.ts';
import { newCertificateClient, newClient, TENANT_PATTERN, type ClientRecord } from './client-registry.ts';
import {
  CERTIFICATE_AUTH_METHODS,
  normalizeSubjectDn,
  parseThumbprint,
  type CertificateAuth,
  type CertificateAuthMethod,
} from './certificate-auth.ts';
import { appendAudit, type AuditDeps } from '../audit/audit-log.ts';

export interface CreatedClient {
  client_id: string;
  client_secret: string;
  tenant_id: string;
  role: string;
  scopes: string[];
  region: string;
}

type ProvisionInput = { tenant: string; role: string; region?: string; actor?: string };

/** The tenant, scopes and region of a new client, checked. */
function clientFields(config: Readonly<Config>, input: ProvisionInput) {
  if (!TENANT_PATTERN.test(input.tenant))
    throw new SluiceError(
      'INVALID_REQUEST',
      `tenant "${input.tenant}" must be 1-63 lowercase letters, digits, "-" or "_"`,
    );
  const scopes = config.roles[input.role];
  if (!scopes)
    throw new SluiceError(
      'INVALID_REQUEST',
      `unknown role "${input.role}"; known roles: ${Object.keys(config.roles).join(', ')}`,
    );
  const region = input.region ?? config.region;
  if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(region))
    throw new SluiceError('INVALID_REQUEST', `region "${region}" must be lowercase letters, digits and dashes`);
  return { tenant_id: input.tenant, role: input.role, scopes: [...scopes], region };
}

/** What creating a client reads of the process's context. */
export type CreateClientDeps = Pick<Context, 'clock' | 'config'> & AuditDeps & WriteClientDeps;

export async function createClient(ctx: CreateClientDeps, input: ProvisionInput): Promise<CreatedClient> {
  const { record, secret } = newClient(
    ctx.config.masterKey,
    clientFields(ctx.config, input),
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

const given = (v: string | undefined) => (v === undefined ? 'none' : `"${v}"`);

export interface CreatedCertificateClient {
  client_id: string;
  tenant_id: string;
  role: string;
  scopes: string[];
  region: string;
  token_endpoint_auth_method: CertificateAuthMethod;
  tls_client_auth_subject_dn?: string;
  tls_client_auth_sha256?: string;
}

/**
 * Provisions a client that authenticates with its TLS certificate (RFC 8705 §2), through the
 * trusted front door: `tls_client_auth` with the subject DN of a certificate the front door's
 * client CA issued, or `self_signed_tls_client_auth` with the certificate's SHA-256 thumbprint.
 * It has no secret (one sent is refused) and nothing to rotate.
 */
export async function createCertificateClient(
  ctx: CreateClientDeps,
  input: ProvisionInput & { method: CertificateAuthMethod; subjectDn?: string; thumbprint?: string },
): Promise<CreatedCertificateClient> {
  const fields = clientFields(ctx.config, input);
  let auth: CertificateAuth & { token_endpoint_auth_method: CertificateAuthMethod };
  if (input.method === 'tls_client_auth') {
    if (input.thumbprint !== undefined)
      throw new SluiceError('INVALID_REQUEST', 'tls_client_auth takes the subject DN, not a thumbprint');
    const dn = input.subjectDn === undefined ? null : normalizeSubjectDn(input.subjectDn);
    if (dn === null)
      throw new SluiceError(
        'INVALID_REQUEST',
        'tls_client_auth needs the subject DN of the client certificate in RFC 4514 form, most specific ' +
          `first (e.g. "CN=billing,O=Acme,C=FR"), got ${given(input.subjectDn)}`,
      );
    auth = { token_endpoint_auth_method: 'tls_client_auth', tls_client_auth_subject_dn: dn };
  } else if (input.method === 'self_signed_tls_client_auth') {
    if (input.subjectDn !== undefined)
      throw new SluiceError('INVALID_REQUEST', 'self_signed_tls_client_auth takes the thumbprint, not a subject DN');
    const sha256 = input.thumbprint === undefined ? null : parseThumbprint(input.thumbprint);
    if (sha256 === null)
      throw new SluiceError(
        'INVALID_REQUEST',
        'self_signed_tls_client_auth needs the SHA-256 thumbprint of the client certificate (64 hex digits, ' +
          `\`openssl x509 -in cert.pem -noout -fingerprint -sha256\`), got ${given(input.thumbprint)}`,
      );
    auth = { token_endpoint_auth_method: 'self_signed_tls_client_auth', tls_client_auth_sha256: sha256 };
  } else
    throw new SluiceError(
      'INVALID_REQUEST',
      `unknown auth method "${String(input.method)}"; known: ${CERTIFICATE_AUTH_METHODS.join(', ')}`,
    );
  const record = newCertificateClient(fields, auth, ctx.clock.now());
  await appendAudit(ctx, {
    tenant_id: record.tenant_id,
    actor: input.actor ?? 'operator',
    action: 'client.created',
    subject: record.client_id,
    reason:
      `role ${record.role}, region ${record.region}, ${input.method} ` +
      (auth.tls_client_auth_subject_dn !== undefined
        ? `subject ${auth.tls_client_auth_subject_dn}`
        : `sha256 ${auth.tls_client_auth_sha256}`),
  });
  await writeClient(ctx, record);
  return {
    client_id: record.client_id,
    tenant_id: record.tenant_id,
    role: record.role,
    scopes: record.scopes,
    region: record.region,
    ...auth,
  };
}

/** What writing a client record reads of the process's context. */
export type WriteClientDeps = Pick<Context, 'clients' | 'topics'> & WriteStateDeps;

/** Writes a client record and waits until this node's own view shows it. */
export async function writeClient(ctx: WriteClientDeps, record: ClientRecord): Promise<void> {
  await writeState(
    ctx,
    ctx.topics.clients,
    record.client_id,
    record,
    () => ctx.clients.get(record.client_id)?.updated_at === record.updated_at,
    'client record',
  );
}
