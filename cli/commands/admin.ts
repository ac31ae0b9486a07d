import { userInfo } from 'node:os';
import { createCertificateClient, createClient } from '../../core/clients/provisioning.ts';
import { CERTIFICATE_AUTH_METHODS, type CertificateAuthMethod } from '../../core/clients/certificate-auth.ts';
import { revokeClient, reenableClient } from '../../core/clients/revocation.ts';
import { appendAudit } from '../../core/audit/audit-log.ts';
import { SluiceError } from '../../core/errors.ts';
import { openRotatedSecret } from '../../core/rotation/secret-rotation.ts';
import { parse, required, UsageError } from '../args.ts';
import { say, withContext } from '../runtime.ts';
import { actionCommand, type Command } from '../command.ts';

const USAGE = `usage: sluice admin <action> [options]      (needs KAFKA_BROKERS)

actions:
  create-client --tenant T --role R [--region REG] [--json]
      provisions a service principal and prints client_id and client_secret once
  create-client --tenant T --role R --auth-method tls_client_auth --tls-subject-dn DN [--region REG] [--json]
  create-client --tenant T --role R --auth-method self_signed_tls_client_auth --tls-thumbprint HEX
                [--region REG] [--json]
      a principal that authenticates with its TLS certificate through the trusted front door (RFC 8705),
      no secret: by the subject DN of a certificate of the front door's client CA (RFC 4514, most
      specific first: "CN=billing,O=Acme"), or by the SHA-256 thumbprint of its certificate
  list-clients [--tenant T] [--json]
      lists service principals (never their secrets)
  roles
      lists the configured roles and their scopes
  revoke --client-id ID --reason TEXT [--actor NAME] [--json]
      emergency revocation of any tenant's client (audited; idempotent)
  reenable --client-id ID --reason TEXT [--actor NAME] [--force] [--json]
      lifts a revocation (audited) with a new client_secret, printed once (every earlier secret stops
      working); refused while pre-revocation tokens could still verify, unless --force
  client-secret --client-id ID [--actor NAME] [--json]
      prints the secret the service rotated in for a client (audited client_secret.read), to hand it
      to the client: a token of the secret it replaced cannot fetch it`;

export const ACTIONS: Record<string, (argv: string[]) => Promise<number>> = {
  async 'create-client'(argv) {
    const usage =
      'usage: sluice admin create-client --tenant T --role R [--region REG] [--json]\n' +
      '       [--auth-method client_secret|tls_client_auth|self_signed_tls_client_auth]\n' +
      '       [--tls-subject-dn DN (tls_client_auth)] [--tls-thumbprint HEX (self_signed_tls_client_auth)]';
    const { values } = parse(
      argv,
      {
        tenant: { type: 'string' },
        role: { type: 'string' },
        region: { type: 'string' },
        json: { type: 'boolean' },
        'auth-method': { type: 'string' },
        'tls-subject-dn': { type: 'string' },
        'tls-thumbprint': { type: 'string' },
      },
      usage,
    );
    const tenant = required(values, 'tenant', usage);
    const role = required(values, 'role', usage);
    const method = values['auth-method'] ?? 'client_secret';
    if (method !== 'client_secret' && !(CERTIFICATE_AUTH_METHODS as readonly string[]).includes(method))
      throw new UsageError(
        `--auth-method must be client_secret, ${CERTIFICATE_AUTH_METHODS.join(' or ')}, got "${method}"\n\n${usage}`,
      );
    if (method === 'client_secret' && (values['tls-subject-dn'] ?? values['tls-thumbprint']) !== undefined)
      throw new UsageError(`--tls-subject-dn and --tls-thumbprint go with a certificate --auth-method\n\n${usage}`);
    return withContext(
      'admin',
      async (ctx) => {
        if (method !== 'client_secret') {
          const m = await createCertificateClient(ctx, {
            tenant,
            role,
            region: values.region,
            actor: operator(),
            method: method as CertificateAuthMethod,
            subjectDn: values['tls-subject-dn'],
            thumbprint: values['tls-thumbprint'],
          });
          if (values.json) say(JSON.stringify(m));
          else {
            say(`client_id:     ${m.client_id}`);
            say(`auth method:   ${m.token_endpoint_auth_method}`);
            if (m.tls_client_auth_subject_dn) say(`subject DN:    ${m.tls_client_auth_subject_dn}`);
            if (m.tls_client_auth_sha256) say(`thumbprint:    ${m.tls_client_auth_sha256}`);
            say(`tenant ${m.tenant_id}, role ${m.role}, region ${m.region}, scopes: ${m.scopes.join(' ')}`);
            say('No secret: it gets tokens with client_id alone, over mTLS with that certificate, through a proxy');
            say('in SLUICE_TRUSTED_PROXIES; its tokens are bound to the certificate.');
          }
          return 0;
        }
        const c = await createClient(ctx, { tenant, role, region: values.region, actor: operator() });
        if (values.json) say(JSON.stringify(c));
        else {
          say(`client_id:     ${c.client_id}`);
          say(`client_secret: ${c.client_secret}`);
          say(`tenant ${c.tenant_id}, role ${c.role}, region ${c.region}, scopes: ${c.scopes.join(' ')}`);
          say('The secret is shown only this once; Sluice stores only a keyed hash of it.');
        }
        return 0;
      },
      { views: 'admin' },
    );
  },
  async 'list-clients'(argv) {
    const usage = 'usage: sluice admin list-clients [--tenant T] [--json]';
    const { values } = parse(argv, { tenant: { type: 'string' }, json: { type: 'boolean' } }, usage);
    return withContext(
      'admin',
      async (ctx) => {
        const rows = ctx.clients
          .all()
          .filter((c) => !values.tenant || c.tenant_id === values.tenant)
          .map((c) => ({
            client_id: c.client_id,
            tenant_id: c.tenant_id,
            role: c.role,
            region: c.region,
            auth_method: c.token_endpoint_auth_method ?? 'client_secret',
            status: ctx.revocations.get(c.client_id) ? 'revoked' : c.status,
            created_at: new Date(c.created_at).toISOString(),
          }));
        if (values.json) say(JSON.stringify(rows));
        else
          for (const r of rows)
            say(
              `${r.client_id}  ${r.tenant_id}  ${r.role}  ${r.region}  ${r.auth_method}  ${r.status}  ${r.created_at}`,
            );
        return 0;
      },
      { views: 'admin' },
    );
  },
  async revoke(argv) {
    const usage = 'usage: sluice admin revoke --client-id ID --reason TEXT [--actor NAME] [--json]';
    const { values } = parse(
      argv,
      {
        'client-id': { type: 'string' },
        reason: { type: 'string' },
        actor: { type: 'string' },
        json: { type: 'boolean' },
      },
      usage,
    );
    const clientId = required(values, 'client-id', usage);
    const reason = required(values, 'reason', usage);
    return withContext(
      'admin',
      async (ctx) => {
        // No bound: this process closes when the revocation returns, so it waits for it to be through.
        const { record, created } = await revokeClient(
          ctx,
          { clientId, reason, actor: operator(values.actor), tenant: null },
          Number.POSITIVE_INFINITY,
        );
        const out = {
          revocation_id: record.revocation_id,
          client_id: record.client_id,
          tenant_id: record.tenant_id,
          revoked_at: new Date(record.revoked_at).toISOString(),
          audit_entry_id: record.audit_entry_id,
          created,
        };
        if (values.json) say(JSON.stringify(out));
        else
          say(
            `${created ? 'revoked' : 'already revoked'}: ${out.client_id} (tenant ${out.tenant_id}) ` +
              `at ${out.revoked_at}, revocation ${out.revocation_id}, audit entry ${out.audit_entry_id}`,
          );
        return 0;
      },
      { views: 'admin' },
    );
  },
  async reenable(argv) {
    const usage = 'usage: sluice admin reenable --client-id ID --reason TEXT [--actor NAME] [--force] [--json]';
    const { values } = parse(
      argv,
      {
        'client-id': { type: 'string' },
        reason: { type: 'string' },
        actor: { type: 'string' },
        force: { type: 'boolean' },
        json: { type: 'boolean' },
      },
      usage,
    );
    const clientId = required(values, 'client-id', usage);
    const reason = required(values, 'reason', usage);
    return withContext(
      'admin',
      async (ctx) => {
        const r = await reenableClient(ctx, {
          clientId,
          reason,
          actor: operator(values.actor),
          force: values.force === true,
        });
        if (values.json)
          say(
            JSON.stringify({
              client_id: clientId,
              reenabled: true,
              client_secret: r.client_secret,
              audit_entry_id: r.audit_entry_id,
            }),
          );
        else {
          say(`re-enabled: ${clientId}, audit entry ${r.audit_entry_id}`);
          if (r.client_secret === null)
            say('It authenticates with its registered TLS certificate, which works again (it has no secret).');
          else {
            say(`client_secret: ${r.client_secret}`);
            say('Every earlier secret of this client no longer works; the new one is shown only this once.');
          }
        }
        return 0;
      },
      { views: 'admin' },
    );
  },
  async 'client-secret'(argv) {
    const usage = 'usage: sluice admin client-secret --client-id ID [--actor NAME] [--json]';
    const { values } = parse(
      argv,
      { 'client-id': { type: 'string' }, actor: { type: 'string' }, json: { type: 'boolean' } },
      usage,
    );
    const clientId = required(values, 'client-id', usage);
    return withContext(
      'admin',
      async (ctx) => {
        const c = ctx.clients.get(clientId);
        if (!c) throw new SluiceError('NOT_FOUND', `no client "${clientId}"`);
        const rotated = openRotatedSecret(ctx.config.masterKey, c);
        if (!rotated)
          throw new SluiceError(
            'NOT_FOUND',
            `client "${clientId}" has no rotated secret to hand out: its secret is the one shown when it was ` +
              'created or re-enabled',
          );
        await appendAudit(ctx, {
          tenant_id: c.tenant_id,
          actor: operator(values.actor),
          action: 'client_secret.read',
          subject: c.client_id,
        });
        const out = {
          client_id: c.client_id,
          client_secret: rotated.client_secret,
          rotated_at: new Date(rotated.rotated_at).toISOString(),
          previous_secret_expires_at: new Date(rotated.previous_secret_expires_at).toISOString(),
        };
        if (values.json) say(JSON.stringify(out));
        else {
          say(`client_secret: ${out.client_secret}`);
          say(`rotated at ${out.rotated_at}; the previous secret works until ${out.previous_secret_expires_at}`);
        }
        return 0;
      },
      { views: 'admin' },
    );
  },
  async roles(argv) {
    parse(argv, {}, 'usage: sluice admin roles');
    const { loadConfig } = await import('../../core/config.ts');
    for (const [role, scopes] of Object.entries(loadConfig().roles)) say(`${role.padEnd(20)} ${scopes.join(' ')}`);
    return 0;
  },
};

function operator(name?: string): string {
  return `operator:${name ?? process.env.SLUICE_OPERATOR ?? userInfo().username}`;
}

export const admin: Command = actionCommand('admin', USAGE, ACTIONS);
