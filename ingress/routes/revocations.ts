/** `POST /v1/auth/revocations`: emergency revocation of a client of the caller's tenant. */
import type { Context } from '../../core/context.ts';
import { Fields } from '../../core/validate.ts';
import { revokeClient } from '../../core/clients/revocation.ts';
import type { RevocationRecord } from '../../core/clients/revocation-list.ts';
import { json, type Route } from '../types.ts';

export function revocationBody(r: RevocationRecord): Record<string, unknown> {
  return { revocation_id: r.revocation_id, client_id: r.client_id, revoked_at: new Date(r.revoked_at).toISOString(), audit_entry_id: r.audit_entry_id, reason: r.reason };
}

export function revocationRoutes(ctx: Context): Route[] {
  return [
    {
      method: 'POST',
      pattern: '/v1/auth/revocations',
      scope: 'credentials:revoke',
      body: 'json',
      async handler(req) {
        const f = Fields.object(req.body).only(['client_id', 'reason']);
        const clientId = f.string('client_id', { required: true, min: 1, max: 128 });
        const reason = f.string('reason', { required: true, min: 1, max: 1000 });
        f.done();
        const claims = req.auth!.claims;
        const { record, created } = await revokeClient(ctx, { clientId: clientId!, reason: reason!, actor: claims.client_id, tenant: claims.tenant_id });
        // 201 for the call that revoked, 200 with the same record for every repeat.
        return json(created ? 201 : 200, revocationBody(record));
      },
    },
  ];
}
