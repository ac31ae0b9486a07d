/**
 * `GET /v1/webhooks/endpoints/:id/jwks` (public, like the token JWKS): an endpoint's ed25519 public
 * keys, so a receiver verifies `v1a` signatures without holding a secret (core/webhooks/endpoint-jwks.ts).
 * The id is the only input. An unknown id and an endpoint that does not sign with ed25519 get the
 * same 404, which names nothing, so the route tells no one which ids exist.
 */
import type { Context } from '../../core/context.ts';
import { SluiceError } from '../../core/errors.ts';
import { endpointJwks } from '../../core/webhooks/endpoint-jwks.ts';
import { json, type Reply, type Route } from '../types.ts';

/** Short: a rotation's new key reaches a receiver that caches by it within a minute. */
export const ENDPOINT_JWKS_MAX_AGE_SECONDS = 60;

/** What the endpoint JWKS route reads of the process's context. */
export type EndpointJwksRouteDeps = Pick<Context, 'clock' | 'endpoints'>;

export function webhookEndpointJwksRoutes(ctx: EndpointJwksRouteDeps): Route[] {
  const handler = (req: { params: Record<string, string> }): Reply => {
    const jwks = endpointJwks(ctx.endpoints.get(req.params.id), ctx.clock.now());
    if (!jwks) throw new SluiceError('NOT_FOUND', 'not found');
    const cacheControl = `public, max-age=${ENDPOINT_JWKS_MAX_AGE_SECONDS}`;
    // Shared: a verifier that sends a token along still gets (and may cache) the public keys.
    return { ...json(200, jwks, { 'cache-control': cacheControl }), shared: true };
  };
  return [{ method: 'GET', pattern: '/v1/webhooks/endpoints/:id/jwks', scope: null, body: 'none', handler }];
}
