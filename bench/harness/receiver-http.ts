/** The node:http side of the benches' webhook receivers: one local server per endpoint, so each is its own origin. */
import { createServer, type IncomingMessage, type RequestListener, type Server } from 'node:http';

/** What a receiver reads of a delivery (a registration `ping` included). */
export interface Delivery {
  id?: unknown;
  type?: unknown;
  data?: any;
}

/** The request's JSON body, or null when it is not JSON. */
export function readJson(req: IncomingMessage): Promise<Delivery | null> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch {
        resolve(null);
      }
    });
  });
}

/** A server on 127.0.0.1 at a free port. */
export function listenLocal(handler: RequestListener): Promise<Server> {
  const server = createServer(handler);
  // Longer than the dispatcher's 30 s keep-alive, so the client always closes an idle socket first
  // (a server-side close racing a new request would show up as a spurious failed attempt).
  server.keepAliveTimeout = 65_000;
  server.requestTimeout = 0;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

export const portOf = (server: Server): number => (server.address() as { port: number }).port;

/** Closes the servers and drops their open (held) sockets. */
export function closeAll(servers: Server[]): void {
  for (const s of servers) {
    s.closeAllConnections();
    s.close();
  }
}
