/**
 * OAuth 2.0 client-credentials token endpoint (RFC 6749 §4.4), JWKS and RFC 8414 metadata. Clients
 * authenticate with a secret, or with their TLS certificate (RFC 8705 §2) as a trusted front door
 * names it (ingress/client-cert.ts); a token issued over such a certificate is bound to it (§3).
 */
import type { Context } from '../../core/context.ts';
import { OAuthError, unavailable } from '../../core/errors.ts';
import { ALL_SCOPES } from '../../core/scopes.ts';
import type { Metrics } from '../../core/metrics.ts';
import { RateLimiter } from '../../core/rate-limit.ts';
import { rateLimited } from '../problem.ts';
import { presentedCertificate } from '../client-cert.ts';
import { certificateMatches, type PresentedCertificate } from '../../core/clients/certificate-auth.ts';
import { usesCertificate, type ClientRecord } from '../../core/clients/client-registry.ts';
import type { CidrSet } from '../../core/net/cidr.ts';
import { json, type AppRequest, type Route } from '../types.ts';

const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };

interface Credentials {
  clientId: string;
  /** Absent: the client means to authenticate with its TLS certificate. */
  clientSecret: string | undefined;
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

/** What the token endpoint, JWKS and metadata read of the process's context. */
export type AuthRouteDeps = Pick<Context, 'clients' | 'clock' | 'config' | 'keys' | 'revocations' | 'state' | 'tokens'>;

export function authRoutes(ctx: AuthRouteDeps, metrics: Metrics, trustedProxies: CidrSet): Route[] {
  const issuer = ctx.config.issuer;
  const mtls = trustedProxies.size > 0;
  const now = () => ctx.clock.now();
  const failures = new RateLimiter(ctx.config.authFailureRate, ctx.config.authFailureBurst, 100_000, now);
  // Token requests per known client id, granted or refused alike: one client cannot mint
  // thousands of tokens a second, and a guesser's attempts on a client id count here too. Made-up
  // ids get no bucket of their own (the failure budget, per id and per address, limits them).
  const issuance = new RateLimiter(ctx.config.tokenRatePerMinute / 60, ctx.config.tokenRateBurst, 100_000, now);
  const overIssuance = (clientId: string) => (ctx.clients.get(clientId) === undefined ? null : issuance.take(clientId));
  /**
   * The client the credentials authenticate, or why not when it is worth saying (a secret sent by a
   * certificate client, a secret missing, a certificate missing or another one). Unknown ids and
   * wrong secrets get the one message that never says which was wrong.
   */
  const authenticate = (
    creds: Credentials,
    cert: PresentedCertificate | null,
  ): { authenticated: { client: ClientRecord; secretCreatedAt?: number } | null; refusal?: string } => {
    const known = ctx.clients.get(creds.clientId);
    if (known !== undefined && usesCertificate(known)) {
      const method = known.token_endpoint_auth_method;
      if (creds.clientSecret !== undefined)
        return {
          authenticated: null,
          refusal: `this client authenticates with its TLS certificate (${method}), never with a client_secret`,
        };
      if (cert === null)
        return {
          authenticated: null,
          refusal: `this client authenticates with its TLS certificate (${method}): none came with the request`,
        };
      if (method === 'tls_client_auth' && cert.subjectDn === null)
        return {
          authenticated: null,
          refusal: 'this client authenticates with tls_client_auth: the front door sent no verified subject DN',
        };
      if (known.status !== 'active') return { authenticated: null };
      if (!certificateMatches(known, cert))
        return {
          authenticated: null,
          refusal: `the client certificate is not the one registered for this client (${method})`,
        };
      return { authenticated: { client: known } };
    }
    if (creds.clientSecret === undefined)
      return {
        authenticated: null,
        refusal:
          'client_secret is required: only a client registered for mTLS (tls_client_auth, ' +
          'self_signed_tls_client_auth) authenticates without one',
      };
    return { authenticated: ctx.clients.authenticateSecret(creds.clientId, creds.clientSecret, ctx.clock.now()) };
  };
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
    // Without a secret, only a client registered for mTLS (RFC 8705 §2) authenticates: by the
    // certificate the trusted front door says this request came with.
    const creds: Credentials | null =
      basic ?? (bodyId !== undefined ? { clientId: bodyId, clientSecret: bodySecret } : null);
    if (!creds)
      throw new OAuthError(
        'invalid_client',
        'client authentication is required: client_id and client_secret (client_id alone for a client that ' +
          'authenticates with its TLS certificate)',
      );
    if (basic && bodyId !== undefined && bodyId !== basic.clientId)
      throw new OAuthError('invalid_request', 'client_id in the body differs from the Basic credentials');
    const scope = param(b, 'scope');
    // A node with a stale revocation list must not mint tokens for a client revoked meanwhile.
    const staleMs = Date.now() - ctx.state.lastContactAt;
    if (staleMs > ctx.config.kafkaStaleMs) {
      throw unavailable(`this node has not heard from Kafka for ${staleMs} ms and issues no tokens (fail closed)`);
    }
    const cert = presentedCertificate(req, trustedProxies);
    const { authenticated, refusal } = authenticate(creds, cert);
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
      throw new OAuthError('invalid_client', refusal ?? 'client authentication failed');
    }
    const { client, secretCreatedAt } = authenticated;
    const wait = overIssuance(client.client_id);
    if (wait !== null) throw rateLimited(wait, 'this client is over its token rate at this node');
    // Over a certificate Sluice knows, the token is bound to it (RFC 8705 §3), whatever authenticated the client.
    const issued = ctx.tokens.issue(client, scope, secretCreatedAt, cert?.sha256);
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
      // Shared: a verifier that sends its own token along still gets (and may cache) the public keys.
      handler: () => ({
        ...json(200, ctx.keys.jwks(ctx.clock.now()), { 'cache-control': 'public, max-age=60' }),
        shared: true,
      }),
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
          token_endpoint_auth_methods_supported: [
            'client_secret_post',
            'client_secret_basic',
            ...(mtls ? ['tls_client_auth', 'self_signed_tls_client_auth'] : []),
          ],
          // RFC 8705 §3.3: a token issued over a client certificate a trusted front door named is
          // bound to it. Without a trusted front door no request has a certificate Sluice knows.
          tls_client_certificate_bound_access_tokens: mtls,
          scopes_supported: [...new Set([...ALL_SCOPES, ...Object.values(ctx.config.roles).flat()])],
          response_types_supported: ['token'],
          revocation_endpoint: `${issuer}/v1/auth/revocations`,
        }),
    },
  ];
}
