/**
 * The data plane behind the edge (inference, pipelines, telemetry): after the scope check the
 * request is proxied to the configured upstream with the caller's tenant, region and client in
 * headers. The client's Authorization header never leaves the edge.
 */
import type { Config } from '../../core/config.ts';
import { SluiceError, invalidRequest } from '../../core/errors.ts';
import { lazyModule } from '../../core/lazy-module.ts';
import { segmentKey } from '../canonical-path.ts';
import type { AppRequest, IncomingRequest, Reply, Route } from '../types.ts';

/**
 * undici (110 modules, ~0.15 CPU-s to load) is loaded by the first proxied request, not by every
 * process that builds the routes: most never proxy one.
 */
const undici = lazyModule<typeof import('undici')>('undici');

/** Never forwarded: hop-by-hop (RFC 9110 §7.6.1; `expect` was answered at the edge), or the client's own. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
  'host',
  'authorization',
  'content-length',
  'cookie',
]);
/**
 * Headers a client could use to lie to the upstream about who it is or which path it asked for.
 * The edge sets `x-forwarded-for` itself; the rest never pass (the front door's client-certificate
 * headers included: ingress/client-cert.ts).
 */
const CLIENT_CLAIMS = new Set([
  'forwarded',
  'x-client-cert-sha256',
  'x-client-cert-subject',
  'x-real-ip',
  'x-client-ip',
  'true-client-ip',
  'cf-connecting-ip',
  'x-cluster-client-ip',
  'x-original-url',
  'x-rewrite-url',
  'x-original-uri',
  'x-http-method-override',
  'x-http-method',
  'x-method-override',
]);
const isClientClaim = (name: string) =>
  CLIENT_CLAIMS.has(name) || name.startsWith('x-forwarded-') || name.startsWith('x-sluice-');

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** RFC 9110 field-value octets (what undici sends): tab, space, visible ASCII, obs-text. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * The client's headers as the upstream gets them: without hop-by-hop ones (those named in
 * `Connection` too) and client claims, each value as the bytes the client sent (uWS decodes them
 * as UTF-8). A header that cannot be forwarded is the client's fault, a 400 naming it, never a
 * 502 that blames the upstream.
 */
export function forwardedHeaders(incoming: Record<string, string>): Record<string, string> {
  const listed = new Set((incoming.connection ?? '').split(',').map((n) => n.trim().toLowerCase()));
  const out: Record<string, string> = Object.create(null);
  for (const [k, v] of Object.entries(incoming)) {
    if (HOP_BY_HOP.has(k) || listed.has(k) || isClientClaim(k)) continue;
    const bytes = Buffer.from(v, 'utf8').toString('latin1');
    if (!TOKEN.test(k) || !FIELD_VALUE.test(bytes))
      throw invalidRequest([
        { path: `headers.${k}`, message: 'holds characters that cannot be forwarded (control characters)' },
      ]);
    out[k] = bytes;
  }
  return out;
}

interface Family {
  prefix: string;
  resource: string;
  upstream: keyof Config['upstreams'];
  /** Sub-resources (the segment after the prefix) that need a scope of their own, whatever the method. */
  scoped?: Record<string, string>;
}

const FAMILIES: Family[] = [
  { prefix: '/v1/inference', resource: 'inference', upstream: 'inference' },
  { prefix: '/v1/pipelines', resource: 'pipeline', upstream: 'pipelines' },
  { prefix: '/v1/telemetry', resource: 'telemetry', upstream: 'telemetry', scoped: { export: 'telemetry:export' } },
];

/**
 * GET/HEAD read, other methods write; a scoped sub-resource (`/v1/telemetry/export` and below)
 * needs its own scope. `req.path` is canonical (see canonical-path.ts) and is what the upstream
 * gets; the sub-resource is compared on `segmentKey`, a form at least as broad as any upstream's
 * (`/EXPORT`, `/Export`, `/export.csv` all need `telemetry:export`).
 */
export function dataPlaneScope(family: Family, req: IncomingRequest): string {
  if (family.scoped) {
    const depth = family.prefix.split('/').length;
    const segment = req.path.split('/')[depth];
    if (segment !== undefined) {
      const key = segmentKey(segment);
      if (Object.hasOwn(family.scoped, key)) return family.scoped[key];
    }
  }
  return req.method === 'GET' || req.method === 'HEAD' ? `${family.resource}:read` : `${family.resource}:write`;
}

/** The upstream URL for a canonical path; refuses (as a 400) any URL that leaves the family's prefix. */
export function upstreamUrl(base: string, prefix: string, path: string, query: URLSearchParams): URL {
  const qs = query.toString();
  const url = new URL(`${base}${path}${qs ? `?${qs}` : ''}`);
  const root = new URL(base).pathname.replace(/\/$/, '') + prefix;
  if (url.pathname !== root && !url.pathname.startsWith(`${root}/`)) {
    throw invalidRequest([{ path: 'path', message: `the request path leaves ${prefix}` }]);
  }
  return url;
}

export function dataPlaneRoutes(config: Readonly<Config>, timeoutMs = 30_000): Route[] {
  const routes: Route[] = [];
  for (const family of FAMILIES) {
    const handler = async (req: AppRequest): Promise<Reply> => {
      const base = config.upstreams[family.upstream];
      if (!base)
        throw new SluiceError(
          'UPSTREAM_UNAVAILABLE',
          `no upstream is configured for ${family.prefix} (set SLUICE_UPSTREAM_${family.upstream.toUpperCase()})`,
        );
      const headers = forwardedHeaders(req.headers);
      const claims = req.auth!.claims;
      headers['x-sluice-tenant'] = claims.tenant_id;
      headers['x-sluice-region'] = claims.region;
      headers['x-sluice-client-id'] = claims.client_id;
      headers['x-forwarded-for'] = req.remoteAddress;
      const target = upstreamUrl(base, family.prefix, req.path, req.query);
      try {
        const up = await undici().request(target, {
          method: req.method as 'GET',
          headers,
          body: req.rawBody.length > 0 ? req.rawBody : undefined,
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
          maxRedirections: 0,
        } as Parameters<typeof import('undici').request>[1]);
        const body = Buffer.from(await up.body.arrayBuffer());
        const out: Record<string, string> = Object.create(null);
        for (const [k, v] of Object.entries(up.headers))
          if (!HOP_BY_HOP.has(k) && v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : v;
        return { status: up.statusCode, headers: out, body };
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT')
          throw new SluiceError('UPSTREAM_TIMEOUT', `the ${family.resource} upstream did not answer in time`);
        // Refused before anything was sent: the request, not the upstream, is at fault.
        if (code === 'UND_ERR_INVALID_ARG' || code === 'UND_ERR_NOT_SUPPORTED')
          throw invalidRequest([{ path: 'request', message: `cannot be forwarded: ${(err as Error).message}` }]);
        throw new SluiceError('UPSTREAM_UNAVAILABLE', `the ${family.resource} upstream is unreachable`);
      }
    };
    for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE']) {
      for (const pattern of [family.prefix, `${family.prefix}/*`]) {
        routes.push({ method, pattern, scope: (req) => dataPlaneScope(family, req), body: 'raw', handler });
      }
    }
  }
  return routes;
}
