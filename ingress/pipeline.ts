/**
 * The request lifecycle every route goes through, in this order:
 * canonical path → match route → authenticate (bearer, over its certificate when bound; fail closed while
 * Kafka is stale) → region → scope →
 * per-client rate limit → path and query (the contract) → content type and size → read and parse body →
 * body (the contract) → handle → reply. Everything up to the body is synchronous: a refused request costs
 * no await.
 */
import type { Context } from '../core/context.ts';
import { SluiceError, OAuthError, invalidRequest, unavailable } from '../core/errors.ts';
import { errorHeaders, faultError, rateLimited, tooLarge } from './problem.ts';
import { parseJsonBody } from '../core/json.ts';
import { throttled } from '../core/log.ts';
import type { Metrics } from '../core/metrics.ts';
import type { RateLimiter } from '../core/rate-limit.ts';
import {
  endSpan,
  extractContext,
  SpanKind,
  startSpan,
  withContext,
  type Span,
  type TraceContext,
} from '../core/tracing.ts';
import { confirmCertificate, type VerifiedToken } from '../core/tokens/token-service.ts';
import type { CidrSet } from '../core/net/cidr.ts';
import { clientCertThumbprint } from './client-cert.ts';
import { canonicalPath } from './canonical-path.ts';
import type { Router } from './router.ts';
import type { AppRequest, IncomingRequest, Reply, RequestCheck, RequestFault, Route } from './types.ts';

export interface PipelineDeps {
  /** What the pipeline reads of the process's context. */
  ctx: Pick<Context, 'config' | 'log' | 'tokens'>;
  router: Router;
  metrics: Metrics;
  /** Returns a reason when the node must refuse tokens (fail closed), else null. */
  unavailableReason: () => string | null;
  /** Per-client request budget at the edge. */
  clientLimiter: RateLimiter;
  /** Each route's request checks, compiled from the contract at start-up (absent: the route checks its own input). */
  checks: ReadonlyMap<Route, RequestCheck>;
  /** SLUICE_TRUSTED_PROXIES: whose client-certificate headers count (a bound token's check). */
  trustedProxies: CidrSet;
}

/** RFC 6750 §2.1: the b64token of an Authorization: Bearer header. */
const BEARER = /^Bearer ([A-Za-z0-9._~+/-]+=*)$/i;

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export type BodyReader = () => Promise<Buffer>;

/** A request past the synchronous front half: its route, and what the front half learnt. */
export interface Admitted {
  route: Route;
  params: Record<string, string>;
  auth: VerifiedToken | null;
  queryValues: Record<string, unknown>;
  /** The route's contract check, if it has one, and the largest body it takes (0: it reads none). */
  check: RequestCheck | undefined;
  maxBody: number;
}

export function isPromise<T>(v: T | Promise<T>): v is Promise<T> {
  return typeof (v as { then?: unknown } | null)?.then === 'function';
}

/**
 * The handler's request, built field by field: a spread of the incoming one (its shape changed by
 * the front half) was the largest single cost of a hot-token request.
 */
function appRequest(req: IncomingRequest, admitted: Admitted, rawBody: Buffer, body: unknown): AppRequest {
  return {
    method: req.method,
    path: req.path,
    query: req.query,
    headers: req.headers,
    remoteAddress: req.remoteAddress,
    route: req.route,
    tenant: req.tenant,
    params: admitted.params,
    auth: admitted.auth,
    rawBody,
    body,
    queryValues: admitted.queryValues,
  };
}

/** The raw body of a request without one (zero bytes: nothing a handler could change in it). */
const EMPTY_BODY = Buffer.alloc(0);

const NO_VALUES: Record<string, unknown> = Object.freeze({}) as Record<string, unknown>;

/** "METHOD /pattern" of each route, made once. */
const routeNames = new WeakMap<Route, string>();
function routeName(route: Route): string {
  let n = routeNames.get(route);
  if (n === undefined) {
    n = `${route.method} ${route.pattern}`;
    routeNames.set(route, n);
  }
  return n;
}

export class Pipeline {
  private readonly logUnhandled: ReturnType<typeof throttled>;

  constructor(private readonly deps: PipelineDeps) {
    this.logUnhandled = throttled((msg, fields) => deps.ctx.log.error(msg, fields));
  }

  /** Synchronous front half: a Reply when the request is refused before its body is needed. */
  front(req: IncomingRequest): { reply: Reply } | Admitted {
    let matched: Route | undefined;
    try {
      // Every decision below, and the proxied URL, uses this one form of the path.
      req.path = canonicalPath(req.path);
      const m = this.deps.router.match(req.method, req.path);
      if (m.kind === 'not-found') throw new SluiceError('NOT_FOUND', `no route for ${req.path}`);
      if (m.kind === 'method') {
        const detail = `${req.method} is not allowed on ${req.path}; allowed: ${m.allow.join(', ')}`;
        throw new SluiceError('METHOD_NOT_ALLOWED', detail, { allow: m.allow }, { allow: m.allow });
      }
      const { route, params } = m;
      matched = route;
      req.route = routeName(route);
      const auth = route.scope === null ? null : this.authorize(req, route);
      // The path parameters are bounded by the contract (1 to 128 characters), so no handler hands
      // an unbounded one to a store as a key (a 2,000-character DLQ id once reached it: a 500).
      const check = this.deps.checks.get(route);
      let queryValues = NO_VALUES;
      if (check) {
        refuseFaults(check.path(params));
        const query = check.query(req.query);
        refuseFaults(query.faults);
        queryValues = query.values;
      }
      let maxBody = 0;
      if (route.body !== 'none' && BODY_METHODS.has(req.method)) {
        maxBody = bodyLimit(check, this.deps.ctx.config.maxBodyBytes);
        if (Number(req.headers['content-length'] ?? '0') > maxBody) throw tooLarge(maxBody);
        checkContentType(route, req);
      }
      return { route, params, auth, queryValues, check, maxBody };
    } catch (err) {
      return { reply: this.errorReply(err, req, matched) };
    }
  }

  /**
   * The back half: read and check the body, then run the handler. A request without a body whose
   * handler answers at once (an in-memory list) is answered synchronously, inside the server's
   * callback: no promise, no later turn of the event loop.
   */
  back(req: IncomingRequest, admitted: Admitted, readBody: BodyReader): Reply | Promise<Reply> {
    const { route } = admitted;
    if (route.body !== 'none' && BODY_METHODS.has(req.method)) return this.backWithBody(req, admitted, readBody);
    try {
      const reply = route.handler(appRequest(req, admitted, EMPTY_BODY, undefined));
      return isPromise(reply) ? reply.catch((err: unknown) => this.errorReply(err, req, route)) : reply;
    } catch (err) {
      return this.errorReply(err, req, route);
    }
  }

  private async backWithBody(req: IncomingRequest, admitted: Admitted, readBody: BodyReader): Promise<Reply> {
    const { route, check, maxBody } = admitted;
    try {
      const rawBody = await readBody();
      if (rawBody.length > maxBody) throw tooLarge(maxBody);
      const body = route.body === 'raw' ? undefined : parseBody(rawBody, req.headers['content-type'] ?? '');
      if (check) refuseFaults(check.body(body));
      return await route.handler(appRequest(req, admitted, rawBody, body));
    } catch (err) {
      return this.errorReply(err, req, route);
    }
  }

  /**
   * A SERVER span for a request (only when tracing is on: callers check `tracing.on`), continuing
   * the caller's trace when it sent a `traceparent`.
   */
  startSpan(req: IncomingRequest): { span: Span; ctx: TraceContext } {
    return startSpan(req.method, SpanKind.SERVER, extractContext(req.headers), {
      'http.request.method': req.method,
      'url.path': req.path,
    });
  }

  /** Counts the answered request, and ends its span. `startedAt`: performance.now() at arrival. */
  finished(
    req: IncomingRequest,
    status: number,
    startedAt: number,
    traced: { span: Span; ctx: TraceContext } | undefined,
  ): void {
    const route = req.route ?? 'unmatched';
    const seconds = (performance.now() - startedAt) / 1000;
    this.deps.metrics.request(route, status, req.tenant, seconds);
    const { log } = this.deps.ctx;
    if (log.level === 'debug') {
      const line = () =>
        log.debug('request', {
          method: req.method,
          route,
          path: req.path,
          status,
          tenant: req.tenant,
          ms: Math.round(seconds * 1e4) / 10,
        });
      if (traced) withContext(traced.ctx, line);
      else line();
    }
    if (traced) {
      const { span } = traced;
      span.updateName(route === 'unmatched' ? req.method : route);
      endSpan(span, status >= 500 ? `HTTP ${status}` : null, {
        'http.route': route,
        'http.response.status_code': status,
        ...(req.tenant ? { 'sluice.tenant': req.tenant } : {}),
      });
    }
  }

  private authorize(req: IncomingRequest, route: Route): VerifiedToken {
    const header = req.headers.authorization;
    if (!header) {
      const detail = 'this route needs an Authorization: Bearer <access token> header';
      throw new SluiceError('TOKEN_MISSING', detail, {}, { challenge: { realm: 'sluice' } });
    }
    const { tokens } = this.deps.ctx;
    // A token verified before passed the pattern below as "Bearer <token>" exactly: a header that is
    // just that again needs no pattern (a hot token's header is read many times, and is long).
    let token = header.startsWith('Bearer ') ? header.slice(7) : '';
    if (!tokens.isCached(token)) {
      const m = BEARER.exec(header.trim());
      if (!m) {
        const detail = 'the Authorization header must be "Bearer <access token>"';
        throw new SluiceError('TOKEN_INVALID', detail, {}, { challenge: { error: 'invalid_request' } });
      }
      token = m[1];
    }
    const down = this.deps.unavailableReason();
    if (down) throw unavailable(down);
    const auth = tokens.verify(token);
    // RFC 8705 §3: a bound token only over its certificate; an unbound one pays nothing here.
    if (auth.certSha256 !== undefined) confirmCertificate(auth, clientCertThumbprint(req, this.deps.trustedProxies));
    req.tenant = auth.claims.tenant_id;
    const region = this.deps.ctx.config.region;
    if (auth.claims.region !== region) {
      throw new SluiceError(
        'MISDIRECTED_REQUEST',
        `this token belongs to region "${auth.claims.region}"; this node serves region "${region}"`,
        { token_region: auth.claims.region, node_region: region },
      );
    }
    const needed = typeof route.scope === 'function' ? route.scope(req) : route.scope!;
    if (!auth.scopes.has(needed)) {
      this.deps.metrics.scopeViolation(needed);
      const granted = [...auth.scopes];
      throw new SluiceError(
        'SCOPE_VIOLATION',
        `this route needs the scope "${needed}", which the token does not carry`,
        { missing_scope: needed, granted_scopes: granted },
        {
          challenge: { error: 'insufficient_scope', scope: needed },
        },
      );
    }
    const wait = this.deps.clientLimiter.take(auth.claims.client_id);
    if (wait !== null) throw rateLimited(wait, 'this client is over its request rate at this node');
    return auth;
  }

  errorReply(err: unknown, req: IncomingRequest, route: Route | undefined): Reply {
    const { metrics } = this.deps;
    if (err instanceof OAuthError) {
      metrics.tokensRefused.inc({ reason: err.code });
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        'cache-control': 'no-store',
        pragma: 'no-cache',
      };
      if (err.status === 401) headers['WWW-Authenticate'] = 'Basic realm="sluice"';
      const body = JSON.stringify({ error: err.code, error_description: err.message });
      return { status: err.status, headers, body };
    }
    let e: SluiceError;
    if (err instanceof SluiceError) e = err;
    else {
      this.logUnhandled('unhandled error', {
        path: req.path,
        method: req.method,
        error: (err as Error)?.stack ?? String(err),
      });
      e = new SluiceError('INTERNAL', 'an internal error occurred; it has been logged');
    }
    metrics.errors.inc({ code: e.code });
    if (route?.oauthErrors) {
      metrics.tokensRefused.inc({ reason: e.code.toLowerCase() });
      const error =
        e.code === 'RATE_LIMITED' || e.code === 'UNAVAILABLE' ? 'temporarily_unavailable' : 'invalid_request';
      const headers = { 'content-type': 'application/json', 'cache-control': 'no-store', ...errorHeaders(e) };
      return { status: e.status, headers, body: JSON.stringify({ error, error_description: e.message }) };
    }
    const headers = { 'content-type': 'application/problem+json', ...errorHeaders(e) };
    return { status: e.status, headers, body: JSON.stringify(e.toProblem(req.path)) };
  }
}

function refuseFaults(faults: RequestFault[]): void {
  const err = faultError(faults);
  if (err) throw err;
}

/** The body limit of a route: the node's, or the operation's own when the contract sets a lower one. */
function bodyLimit(check: RequestCheck | undefined, nodeMax: number): number {
  return check?.maxBodyBytes !== undefined && check.maxBodyBytes < nodeMax ? check.maxBodyBytes : nodeMax;
}

function mediaType(contentType: string): string {
  return contentType.split(';')[0].trim().toLowerCase();
}

function checkContentType(route: Route, req: IncomingRequest): void {
  if (route.body === 'raw') return;
  const type = mediaType(req.headers['content-type'] ?? '');
  const allowed =
    route.body === 'json-or-form' ? ['application/json', 'application/x-www-form-urlencoded'] : ['application/json'];
  // A body-less DELETE or POST without a body needs no content type.
  if (
    type === '' &&
    (req.headers['content-length'] === undefined || req.headers['content-length'] === '0') &&
    req.headers['transfer-encoding'] === undefined
  )
    return;
  if (!allowed.includes(type)) {
    throw new SluiceError(
      'UNSUPPORTED_MEDIA_TYPE',
      `Content-Type must be ${allowed.join(' or ')}, got "${type || '(none)'}"`,
      { accepted: allowed },
    );
  }
}

function parseBody(raw: Buffer, contentType: string): unknown {
  const type = mediaType(contentType);
  if (raw.length === 0) return undefined;
  if (type === 'application/x-www-form-urlencoded') {
    // No prototype: every parameter name, `__proto__` and `constructor` included, is a plain
    // member, and only a name really given twice is a repeat.
    const out: Record<string, string> = Object.create(null);
    const params = new URLSearchParams(raw.toString('utf8'));
    for (const [k, v] of params) {
      if (Object.hasOwn(out, k)) throw invalidRequest([{ path: `$.${k}`, message: 'must not be repeated' }]);
      out[k] = v;
    }
    return out;
  }
  return parseJsonBody(raw.toString('utf8'));
}
