/** `POST /v1/auth/revocations`: emergency revocation of a client of the caller's tenant. */
import { revokeClient, type RevokeDeps } from '../../core/clients/revocation.ts';
import type { RevocationRecord } from '../../core/clients/revocation-list.ts';
import { json, type Route } from '../types.ts';

export function revocationBody(r: RevocationRecord): Record<string, unknown> {
  return {
    revocation_id: r.revocation_id,
    client_id: r.client_id,
    revoked_at: new Date(r.revoked_at).toISOString(),
    audit_entry_id: r.audit_entry_id,
    reason: r.reason,
  };
}

export function revocationRoutes(ctx: RevokeDeps): Route[] {
  return [
    {
      method: 'POST',
      pattern: '/v1/auth/revocations',
      scope: 'credentials:revoke',
      body: 'json',
      async handler(req) {
        // The body is the contract's RevocationRequest (checked by the pipeline).
        const { client_id: clientId, reason } = req.body as { client_id: string; reason: string };
        const claims = req.auth!.claims;
        const revocation = { clientId, reason, actor: claims.client_id, tenant: claims.tenant_id };
        const { record, created } = await revokeClient(ctx, revocation);
        // 201 for the call that revoked, 200 with the same record for every repeat.
        return json(created ? 201 : 200, revocationBody(record));
      },
    },
  ];
}
