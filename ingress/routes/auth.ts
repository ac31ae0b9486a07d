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
  const failures = new RateLimiter(ctx.config.authFailureRate, ctx.config.authFailureBurst);
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
    const client = ctx.clients.authenticate(creds.clientId, creds.clientSecret, ctx.clock.now());
    if (!client || ctx.revocations.get(client.client_id)) {
      // Failures beyond a budget per client id and per address answer 429: a guesser is slowed
      // down, while the right secret always works (a lockout would let anyone who knows a
      // client id lock its owner out; 256-bit secrets need no lockout to resist guessing).
      const waits = [failures.take(`id:${creds.clientId}`), failures.take(`ip:${req.remoteAddress}`)].filter(
        (w): w is number => w !== null,
      );
      if (waits.length > 0) throw rateLimited(Math.max(...waits), 'too many failed client authentications');
      throw new OAuthError('invalid_client', 'client authentication failed');
    }
    const issued = ctx.tokens.issue(client, scope);
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
