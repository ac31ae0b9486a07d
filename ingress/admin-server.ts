/**
 * Health, readiness and metrics on the admin port (plain node:http: not on the hot path). It
 * listens on SLUICE_ADMIN_HOST (loopback by default), never on the public SLUICE_HOST: /metrics
 * names every tenant with its traffic.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import { isIPv6 } from 'node:net';
import type { Metrics } from '../core/metrics.ts';
import { SluiceBaseError } from '../core/errors.ts';

export interface Health {
  ready: () => boolean;
  /** null when healthy, otherwise why the node refuses traffic. */
  problem: () => string | null;
  details: () => Record<string, unknown>;
}

export function startAdminServer(
  host: string,
  port: number,
  metrics: Metrics,
  health: Health,
): Promise<{ port: number; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz' || path === '/readyz') {
      const problem = health.problem();
      const ok = path === '/healthz' ? true : health.ready() && problem === null;
      res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ status: ok ? 'ok' : 'unavailable', ready: health.ready(), problem, ...health.details() }),
      );
    } else if (path === '/metrics') {
      metrics.render().then(
        (text) => {
          res.writeHead(200, { 'content-type': metrics.contentType });
          res.end(text);
        },
        (err: Error) =>
          sendProblem(res, 500, 'Internal error', 'INTERNAL', `metrics could not be collected: ${err.message}`),
      );
    } else sendProblem(res, 404, 'Not found', 'NOT_FOUND', 'admin routes: /healthz, /readyz, /metrics');
  });
  return new Promise((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      const why = err.code === 'EADDRNOTAVAIL' ? `${host} is not an address of this machine` : err.message;
      reject(new SluiceBaseError('LISTEN_FAILED', `cannot serve the admin port on ${host}:${port}: ${why}`));
    });
    server.listen(port, host, () => {
      const addr = server.address();
      resolve({
        port: typeof addr === 'object' && addr ? addr.port : port,
        close: () => new Promise((r) => server.close(() => r())),
      });
    });
  });
}

/** Answers a request of the admin port with an RFC 9457 problem document. */
export function sendProblem(res: ServerResponse, status: number, title: string, code: string, detail: string): void {
  res.writeHead(status, { 'content-type': 'application/problem+json' });
  res.end(JSON.stringify({ type: 'about:blank', title, status, code, detail }));
}

/** How to reach the admin port on `host` from this machine (a wildcard address is reached on loopback). */
export function adminUrl(host: string, port: number, path = ''): string {
  const reach = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  return `http://${isIPv6(reach) ? `[${reach}]` : reach}:${port}${path}`;
}
