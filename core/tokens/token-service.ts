/**
 * Issues and verifies access tokens (RFC 9068 profile). Verified tokens are cached until they
 * expire, so a hot token costs a map lookup and a revocation check, never a signature check.
 */
import { randomUUID } from 'node:crypto';
import { SluiceError, OAuthError, unavailable } from '../errors.ts';
import type { Clock } from '../clock.ts';
import type { ClientRecord } from '../clients/client-registry.ts';
import type { RevocationList } from '../clients/revocation-list.ts';
import type { KeyRing } from './key-ring.ts';
import { decodeJws, signJws, verifyJwsSignature, TOKEN_ALG, TOKEN_TYP } from './jws.ts';
import { parseScopeString } from '../scopes.ts';
import { constantTimeEqual } from '../secrets.ts';
import { thumbprintOfX5t, x5tS256 } from '../clients/certificate-auth.ts';

export interface AccessClaims {
  iss: string;
  sub: string;
  client_id: string;
  aud: string;
  iat: number;
  exp: number;
  nbf: number;
  jti: string;
  scope: string;
  tenant_id: string;
  region: string;
  /**
   * `created_at` (ms) of the client secret the token was obtained with. Only a token of the
   * client's current secret reads secrets (ingress/routes/clients.ts): absent, or naming a secret
   * since rotated out, it reads none.
   */
  secret_created_at?: number;
  /**
   * RFC 8705 §3.1: the token is bound to the client certificate it was issued over (base64url
   * SHA-256 of its DER). It works only over that certificate.
   */
  cnf?: { 'x5t#S256': string };
}

export interface VerifiedToken {
  claims: AccessClaims;
  scopes: ReadonlySet<string>;
  /** A bound token's certificate thumbprint as lower-case hex (the form the proxy header has); unbound: absent. */
  certSha256?: string;
}

export interface TokenServiceOptions {
  issuer: string;
  audience: string;
  ttlSeconds: number;
  clockSkewSeconds: number;
  cacheSize: number;
}

export interface IssuedToken {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
}

const bearerError = (description: string) => ({ challenge: { error: 'invalid_token', description } as const });

export class TokenService {
  private readonly cache = new Map<string, VerifiedToken>();

  constructor(
    private readonly keys: KeyRing,
    private readonly revocations: RevocationList,
    private readonly clock: Clock,
    private readonly opts: TokenServiceOptions,
  ) {}

  /**
   * Mints a token for an authenticated client; `requested` must be a subset of its scopes.
   * `secretCreatedAt` names the secret it authenticated with (see `AccessClaims.secret_created_at`);
   * `certSha256` (hex), the client certificate it was requested over, binds the token to it (`cnf`).
   */
  issue(
    client: ClientRecord,
    requested: string | undefined,
    secretCreatedAt?: number,
    certSha256?: string | null,
  ): IssuedToken {
    let scopes = client.scopes;
    if (requested !== undefined) {
      const asked = parseScopeString(requested);
      const unknown = asked.filter((s) => !client.scopes.includes(s));
      if (asked.length === 0) throw new OAuthError('invalid_scope', 'scope must name at least one scope');
      if (unknown.length > 0)
        throw new OAuthError('invalid_scope', `scope not granted to this client: ${unknown.join(' ')}`);
      scopes = asked;
    }
    const now = this.clock.now();
    const signer = this.keys.signingKey(now);
    if (!signer) throw unavailable('no signing key is available yet');
    const iat = Math.floor(now / 1000);
    const scope = scopes.join(' ');
    const claims: AccessClaims = {
      iss: this.opts.issuer,
      sub: client.client_id,
      client_id: client.client_id,
      aud: this.opts.audience,
      iat,
      nbf: iat,
      exp: iat + this.opts.ttlSeconds,
      jti: randomUUID(),
      scope,
      tenant_id: client.tenant_id,
      region: client.region,
      ...(secretCreatedAt === undefined ? {} : { secret_created_at: secretCreatedAt }),
      ...(certSha256 ? { cnf: { 'x5t#S256': x5tS256(certSha256) } } : {}),
    };
    return {
      access_token: signJws(claims as unknown as Record<string, unknown>, signer.kid, signer.key),
      token_type: 'Bearer',
      expires_in: this.opts.ttlSeconds,
      scope,
    };
  }

  /** Whether `token` was verified before and is still held: such a string is a well-formed token. */
  isCached(token: string): boolean {
    return this.cache.has(token);
  }

  /** Verifies a bearer token or throws a 401 SluiceError with the precise code. */
  verify(token: string): VerifiedToken {
    const nowS = this.clock.now() / 1000;
    const cached = this.cache.get(token);
    if (cached) {
      if (nowS >= cached.claims.exp + this.opts.clockSkewSeconds) {
        this.cache.delete(token);
        throw new SluiceError('TOKEN_EXPIRED', 'the access token has expired', {}, bearerError('expired'));
      }
      this.checkRevoked(cached.claims);
      return cached;
    }
    const verified = this.verifyCold(token, nowS);
    this.checkRevoked(verified.claims);
    if (this.opts.cacheSize > 0) {
      if (this.cache.size >= this.opts.cacheSize) {
        // Drop the oldest entry (Map keeps insertion order).
        const first = this.cache.keys().next();
        if (!first.done) this.cache.delete(first.value);
      }
      this.cache.set(token, verified);
    }
    return verified;
  }

  private checkRevoked(claims: AccessClaims): void {
    if (this.revocations.refuses(claims.client_id, claims.iat)) {
      throw new SluiceError(
        'TOKEN_REVOKED',
        'the credential behind this token has been revoked',
        {},
        bearerError('revoked'),
      );
    }
  }

  /** Tokens verified the expensive way (a signature check), not from the cache: what the cache saves. */
  coldVerifications = 0;

  private verifyCold(token: string, nowS: number): VerifiedToken {
    this.coldVerifications++;
    const invalid = (why: string) =>
      new SluiceError('TOKEN_INVALID', `the access token is invalid: ${why}`, {}, bearerError('invalid'));
    const decoded = decodeJws(token);
    if (!decoded) throw invalid('not a compact JWS');
    const { header, payload } = decoded;
    if (header.alg !== TOKEN_ALG) throw invalid(`algorithm ${String(header.alg)} is not accepted`);
    if (header.typ !== TOKEN_TYP) throw invalid('typ must be at+jwt');
    if (typeof header.kid !== 'string') throw invalid('kid missing');
    const key = this.keys.verificationKey(header.kid, this.clock.now());
    if (!key) throw invalid('unknown signing key');
    if (!verifyJwsSignature(decoded, key)) throw invalid('bad signature');
    const c = payload as Partial<AccessClaims>;
    if (c.iss !== this.opts.issuer) throw invalid('wrong issuer');
    if (c.aud !== this.opts.audience) throw invalid('wrong audience');
    for (const name of ['iat', 'exp'] as const) if (typeof c[name] !== 'number') throw invalid(`${name} missing`);
    for (const name of ['sub', 'client_id', 'scope', 'tenant_id', 'region', 'jti'] as const)
      if (typeof c[name] !== 'string') throw invalid(`${name} missing`);
    const skew = this.opts.clockSkewSeconds;
    if (typeof c.nbf === 'number' && nowS + skew < c.nbf) throw invalid('not valid yet');
    if (c.iat! > nowS + skew) throw invalid('issued in the future');
    if (nowS >= c.exp! + skew)
      throw new SluiceError('TOKEN_EXPIRED', 'the access token has expired', {}, bearerError('expired'));
    const claims = c as AccessClaims;
    const scopes = new Set(parseScopeString(claims.scope));
    if (claims.cnf === undefined) return { claims, scopes };
    // A confirmation this edge cannot check is refused, never ignored (RFC 7800 §3.1).
    const cnf = claims.cnf as unknown;
    if (typeof cnf !== 'object' || cnf === null || Object.keys(cnf).join() !== 'x5t#S256')
      throw invalid('cnf must hold exactly x5t#S256');
    const certSha256 = thumbprintOfX5t(claims.cnf['x5t#S256']);
    if (certSha256 === null) throw invalid('cnf x5t#S256 must be the base64url of a SHA-256');
    return { claims, scopes, certSha256 };
  }

  /** Forgets cached tokens of a client (after a revocation). */
  forgetClient(clientId: string): void {
    for (const [token, v] of this.cache) if (v.claims.client_id === clientId) this.cache.delete(token);
  }

  get cacheSize(): number {
    return this.cache.size;
  }
}

/**
 * RFC 8705 §3: a bound token (`certSha256` set) is accepted only over its certificate, the
 * request's (`presented`, lower-case hex; null: none known). Throws 401 TOKEN_CERT_REQUIRED or
 * TOKEN_CERT_MISMATCH; one constant-time string compare.
 */
export function confirmCertificate(token: VerifiedToken, presented: string | null): void {
  const bound = token.certSha256;
  if (bound === undefined) return;
  if (presented === null)
    throw new SluiceError(
      'TOKEN_CERT_REQUIRED',
      'this access token is bound to a client certificate (cnf x5t#S256) and this request came without ' +
        'one: present it over mTLS with the certificate it was issued to',
      {},
      bearerError('certificate required'),
    );
  if (!constantTimeEqual(bound, presented))
    throw new SluiceError(
      'TOKEN_CERT_MISMATCH',
      'this access token is bound to another client certificate than the one this request came with',
      {},
      bearerError('certificate mismatch'),
    );
}
