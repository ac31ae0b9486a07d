/** OAuth 2.0 client-credentials token endpoint (RFC 6749 §4.4), JWKS and RFC 8414 metadata. */
import type { Context } from '../../core/context.ts';
import { OAuthError, unavailable } from '../../core/errors.ts';
import { ALL_SCOPES } from '../../core/scopes.ts';
import type { Metrics } from '../../core/metrics.ts';
import { RateLimiter } from '../../core/rate-limit.ts';
import { rateLimited } from '../pipeline.ts';
import { json, type AppRequest, type Route } from '../types.ts';

const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };

interface Credentials {
  clientId: string;
  clientSecret: string;
}

function basicCredentials(header: string | undefined): Credentials | null {
  if (!header || !/^Basic /i.test(header)) return null;
  const decoded = Buffer.from(header.slice(6).trim(), 'base64').toString('utf8');
  const i = decoded.indexOf(':');
  if (i < 0) throw new OAuthError('invalid_client', 'malformed Basic credentials');
  try {
    return {
      clientId: decodeURIComponent(decoded.slice(0, i).replace(/\+/g, ' ')),
      clientSecret: decodeURIComponent(decoded.slice(i + 1).replace(/\+/g, ' ')),
    };
  } catch {
    throw new OAuthError('invalid_client', 'malformed Basic credentials');
  }
}

function param(body: Record<string, unknown>, name: string): string | undefined {
  // Own members only: nothing inherited (or smuggled in through `__proto__`) is a parameter.
  const v = Object.hasOwn(body, name) ? body[name] : undefined;
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new OAuthError('invalid_request', `${name} must be a string`);
  return v;
}

export function authRoutes(ctx: Context, metrics: Metrics): Route[] {
  const issuer = ctx.config.issuer;
  const now = () => ctx.clock.now();
  const failures = new RateLimiter(ctx.config.authFailureRate, ctx.config.authFailureBurst, 100_000, now);
  // Token requests per known client id, granted or refused alike: one client cannot mint
  // thousands of tokens a second, and a guesser's attempts on a client id count here too. Made-up
  // ids get no bucket of their own (the failure budget, per id and per address, limits them).
  const issuance = new RateLimiter(ctx.config.tokenRatePerMinute / 60, ctx.config.tokenRateBurst, 100_000, now);
  const overIssuance = (clientId: string) => (ctx.clients.get(clientId) === undefined ? null : issuance.take(clientId));
  const token = (req: AppRequest) => {
    const body = req.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      throw new OAuthError(
        'invalid_request',
        'the request body must be a JSON object or a form with grant_type, client_id and client_secret',
      );
    const b = body as Record<string, unknown>;
    const grantType = param(b, 'grant_type');
    if (grantType === undefined) throw new OAuthError('invalid_request', 'grant_type is required');
    if (grantType !== 'client_credentials')
      throw new OAuthError(
        'unsupported_grant_type',
        `grant_type "${grantType}" is not supported; use client_credentials`,
      );
    const basic = basicCredentials(req.headers.authorization);
    const bodyId = param(b, 'client_id');
    const bodySecret = param(b, 'client_secret');
    if (basic && bodySecret !== undefined)
      throw new OAuthError('invalid_request', 'use one client authentication method, not both');
    const creds: Credentials | null =
      basic ??
      (bodyId !== undefined && bodySecret !== undefined ? { clientId: bodyId, clientSecret: bodySecret } : null);
    if (!creds)
      throw new OAuthError('invalid_client', 'client authentication is required: client_id and client_secret');
    if (basic && bodyId !== undefined && bodyId !== basic.clientId)
      throw new OAuthError('invalid_request', 'client_id in the body differs from the Basic credentials');
    const scope = param(b, 'scope');
    // A node with a stale revocation list must not mint tokens for a client revoked meanwhile.
    const staleMs = Date.now() - ctx.state.lastContactAt;
    if (staleMs > ctx.config.kafkaStaleMs) {
      throw unavailable(`this node has not heard from Kafka for ${staleMs} ms and issues no tokens (fail closed)`);
    }
    const authenticated = ctx.clients.authenticateSecret(creds.clientId, creds.clientSecret, ctx.clock.now());
    if (!authenticated || ctx.revocations.get(authenticated.client.client_id)) {
      // Failures beyond a budget per client id and per address answer 429: a guesser is slowed
      // down. A failure the budget lets through also counts against the client id's token rate,
      // so guessing is bounded by that rate even with the failure budget off; one it refuses does
      // not, so a guesser takes at most the failure rate from the owner's token rate, and the
      // right secret keeps working (a lockout would let anyone who knows a client id lock its
      // owner out; 256-bit secrets need no lockout to resist guessing).
      const waits = [failures.take(`id:${creds.clientId}`), failures.take(`ip:${req.remoteAddress}`)].filter(
        (w): w is number => w !== null,
      );
      if (waits.length > 0) throw rateLimited(Math.max(...waits), 'too many failed client authentications');
      const wait = overIssuance(creds.clientId);
      if (wait !== null) throw rateLimited(wait, 'too many token requests for this client');
      throw new OAuthError('invalid_client', 'client authentication failed');
    }
    const { client, secretCreatedAt } = authenticated;
    const wait = overIssuance(client.client_id);
    if (wait !== null) throw rateLimited(wait, 'this client is over its token rate at this node');
    const issued = ctx.tokens.issue(client, scope, secretCreatedAt);
    metrics.tokensIssued.inc();
    return json(200, issued, NO_STORE);
  };
  return [
    { method: 'POST', pattern: '/v1/auth/token', scope: null, body: 'json-or-form', oauthErrors: true, handler: token },
    {
      method: 'GET',
      pattern: '/v1/auth/jwks',
      scope: null,
      body: 'none',
      handler: () => json(200, ctx.keys.jwks(ctx.clock.now()), { 'cache-control': 'public, max-age=60' }),
    },
    {
      method: 'GET',
      pattern: '/.well-known/oauth-authorization-server',
      scope: null,
      body: 'none',
      handler: () =>
        json(200, {
          issuer,
          token_endpoint: `${issuer}/v1/auth/token`,
          jwks_uri: `${issuer}/v1/auth/jwks`,
          grant_types_supported: ['client_credentials'],
          token_endpoint_auth_methods_supported: ['client_secret_post', 'client_secret_basic'],
          scopes_supported: [...new Set([...ALL_SCOPES, ...Object.values(ctx.config.roles).flat()])],
          response_types_supported: ['token'],
          revocation_endpoint: `${issuer}/v1/auth/revocations`,
        }),
    },
  ];
}
