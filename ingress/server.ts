/** Starts an ingress node: the public uWS listener and the admin listener over a shared Context. */
import type { Context } from '../core/context.ts';
import type { Metrics } from '../core/metrics.ts';
import { RateLimiter } from '../core/rate-limit.ts';
import { CidrSet, parseCidr } from '../core/net/cidr.ts';
import { Router } from './router.ts';
import { Pipeline } from './pipeline.ts';
import { bodyReads, listen } from './uws-adapter.ts';
import { startAdminServer } from './admin-server.ts';
import { type RouteDeps, routeTable, type RouteInputs } from './routes/index.ts';
import type { RequestCheck, Route } from './types.ts';

export interface IngressOptions {
  port?: number;
  adminPort?: number;
  host?: string;
  /** What the route table (routes/index.ts) needs beyond the context; `checks` are the contract's request checks. */
  routes: RouteInputs;
}

export interface Ingress {
  port: number;
  adminPort: number;
  metrics: Metrics;
  close(): Promise<void>;
}

/** What an ingress node reads of the process's context: its routes', and the front door's. */
export type IngressDeps = RouteDeps & Pick<Context, 'clients' | 'config' | 'log' | 'metrics' | 'state' | 'tokens'>;

export async function startIngress(ctx: IngressDeps, opts: IngressOptions): Promise<Ingress> {
  const metrics = ctx.metrics;
  const trustedProxies = new CidrSet(ctx.config.trustedProxies.map(parseCidr));
  const routes = routeTable(ctx, trustedProxies, opts.routes);
  const router = new Router();
  router.add(routes);
  const checks = new Map<Route, RequestCheck>();
  for (const route of routes) {
    // The token endpoint keeps its own checks: RFC 6749 picks the error code by the rule broken
    // (unsupported_grant_type, invalid_client...) and ignores unknown parameters.
    if (route.oauthErrors) continue;
    const check = opts.routes.checks(route.method, route.pattern);
    if (check) checks.set(route, check);
  }
  const staleness = () => Date.now() - ctx.state.lastContactAt;
  const unavailableReason = () => {
    const ms = staleness();
    return ms > ctx.config.kafkaStaleMs
      ? `this node has not heard from Kafka for ${ms} ms and refuses tokens until it has caught up (fail closed)`
      : null;
  };
  const clientLimiter = new RateLimiter(ctx.config.clientRateLimit, ctx.config.clientRateBurst);
  const pipeline = new Pipeline({ ctx, router, metrics, unavailableReason, clientLimiter, checks, trustedProxies });
  const host = opts.host ?? ctx.config.host;
  const http = await listen(pipeline, host, opts.port ?? ctx.config.port, ctx.config.maxBodyBytes, ctx.config.tls);
  metrics.gauge('sluice_token_cache_entries', 'Verified tokens cached.', () => ctx.tokens.cacheSize);
  metrics.gauge('sluice_kafka_staleness_ms', 'Milliseconds since the state consumer last heard from Kafka.', staleness);
  metrics.gauge('sluice_request_bodies_reading', 'Request bodies being read right now.', () => bodyReads.pending);
  // The admin port has a host of its own (SLUICE_ADMIN_HOST, loopback by default), never the public one.
  const admin = await startAdminServer(ctx.config.adminHost, opts.adminPort ?? ctx.config.adminPort, metrics, {
    ready: () => ctx.state.ready,
    problem: unavailableReason,
    details: () => ({ region: ctx.config.region, kafka_staleness_ms: staleness(), clients: ctx.clients.size }),
  }).catch((err) => {
    http.close(); // a start that fails leaves no port open behind it
    throw err;
  });
  ctx.log.info('ingress listening', { port: http.port, admin_port: admin.port, region: ctx.config.region });
  return {
    port: http.port,
    adminPort: admin.port,
    metrics,
    async close() {
      http.close();
      await admin.close();
    },
  };
}
