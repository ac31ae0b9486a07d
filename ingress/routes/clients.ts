/** `GET /v1/auth/clients/{id}/secret`: the secret the service rotated in, for its own tenant. */
import type { Context } from '../../core/context.ts';
import { SluiceError } from '../../core/errors.ts';
import { openRotatedSecret } from '../../core/rotation/secret-rotation.ts';
import { json, type Route } from '../types.ts';

const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };

export function clientRoutes(ctx: Context): Route[] {
  return [
    {
      method: 'GET',
      pattern: '/v1/auth/clients/:id/secret',
      scope: 'credentials:read',
      body: 'none',
      handler(req) {
        const c = ctx.clients.get(req.params.id);
        if (!c || c.tenant_id !== req.auth!.claims.tenant_id) throw new SluiceError('NOT_FOUND', `no client "${req.params.id}" in this tenant`);
        const rotated = openRotatedSecret(ctx.config.masterKey, c);
        if (!rotated) throw new SluiceError('NOT_FOUND', `client "${c.client_id}" has not been rotated yet: its secret is the one shown at creation`);
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
