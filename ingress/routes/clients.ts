/**
 * `GET /v1/auth/clients/{id}/secret`: the secret the service rotated in. A client reads its own
 * with `credentials:read`. Reading another client's needs `credentials:read-any` as well, is
 * refused when that client holds a scope the caller's token does not (no one mints a token
 * stronger than their own this way), and is written to the audit log before it is answered.
 *
 * Either way the caller's token must have been obtained with the caller's *current* secret: a
 * secret rotated out (still valid for its overlap) or a token minted with it never reads a
 * secret, so whoever stole it does not outlive the rotation by fetching the successor. The new
 * secret reaches its client through another client of the tenant with `credentials:read-any`
 * or the operator (`sluice admin client-secret`), see docs/operations.md.
 */
import { appendAudit, type AuditDeps } from '../../core/audit/audit-log.ts';
import type { Context } from '../../core/context.ts';
import { currentSecret, usesCertificate, type ClientRecord } from '../../core/clients/client-registry.ts';
import { SluiceError } from '../../core/errors.ts';
import { openRotatedSecret } from '../../core/rotation/secret-rotation.ts';
import type { VerifiedToken } from '../../core/tokens/token-service.ts';
import { json, type Route } from '../types.ts';

const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };
export const READ_ANY_SECRET = 'credentials:read-any';

function refuse(auth: VerifiedToken, missing: string, detail: string): SluiceError {
  return new SluiceError(
    'SCOPE_VIOLATION',
    detail,
    { missing_scope: missing, granted_scopes: [...auth.scopes] },
    {
      challenge: { error: 'insufficient_scope', scope: missing },
    },
  );
}

/** A token that reads no secret: obtained with a secret since rotated out (or naming none). */
function superseded(): SluiceError {
  return new SluiceError(
    'TOKEN_INVALID',
    "this token was not obtained with its client's current secret (the secret was rotated or replaced " +
      'since): only a token of the current secret reads secrets. A rotated secret reaches its client ' +
      'through a client of the tenant with credentials:read-any, or the operator',
    {},
    { challenge: { error: 'invalid_token', description: 'superseded secret' } },
  );
}

/**
 * Whether the token was obtained with the caller's current credential: its current secret, or, for
 * a client that authenticates with its TLS certificate (it has no secret, nothing rotates), its
 * registered certificate (its tokens are bound to it, and the edge checked the binding).
 */
function ofCurrentCredential(caller: ClientRecord, auth: VerifiedToken): boolean {
  if (usesCertificate(caller))
    return (
      auth.certSha256 !== undefined &&
      (caller.tls_client_auth_sha256 === undefined || caller.tls_client_auth_sha256 === auth.certSha256)
    );
  const current = currentSecret(caller);
  return current !== null && auth.claims.secret_created_at === current.created_at;
}

/** What the client routes read of the process's context. */
export type ClientRouteDeps = Pick<Context, 'clients' | 'config'> & AuditDeps;

export function clientRoutes(ctx: ClientRouteDeps): Route[] {
  return [
    {
      method: 'GET',
      pattern: '/v1/auth/clients/:id/secret',
      scope: 'credentials:read',
      body: 'none',
      async handler(req) {
        const auth = req.auth!;
        const caller = ctx.clients.get(auth.claims.client_id);
        if (!caller || !ofCurrentCredential(caller, auth)) throw superseded();
        const c = ctx.clients.get(req.params.id);
        if (!c || c.tenant_id !== auth.claims.tenant_id)
          throw new SluiceError('NOT_FOUND', `no client "${req.params.id}" in this tenant`);
        const own = c.client_id === auth.claims.client_id;
        if (!own) {
          if (!auth.scopes.has(READ_ANY_SECRET))
            throw refuse(
              auth,
              READ_ANY_SECRET,
              `reading another client's secret needs the scope "${READ_ANY_SECRET}"; ` +
                'a client reads its own with "credentials:read"',
            );
          const stronger = c.scopes.find((s) => !auth.scopes.has(s));
          if (stronger)
            throw refuse(
              auth,
              stronger,
              `client "${c.client_id}" holds the scope "${stronger}", which this token does not: ` +
                'its secret would grant more than the caller has',
            );
        }
        const rotated = openRotatedSecret(ctx.config.masterKey, c);
        if (!rotated)
          throw new SluiceError(
            'NOT_FOUND',
            `client "${c.client_id}" has no secret to hand out: its secret is the one shown when it was ` +
              'created or re-enabled, until the service rotates it',
          );
        if (!own)
          await appendAudit(ctx, {
            tenant_id: c.tenant_id,
            actor: auth.claims.client_id,
            action: 'client_secret.read',
            subject: c.client_id,
          });
        return json(
          200,
          {
            client_id: c.client_id,
            client_secret: rotated.client_secret,
            rotated_at: new Date(rotated.rotated_at).toISOString(),
            previous_secret_expires_at: new Date(rotated.previous_secret_expires_at).toISOString(),
            next_rotation_at: c.rotate_at === null ? null : new Date(c.rotate_at).toISOString(),
          },
          NO_STORE,
        );
      },
    },
  ];
}
