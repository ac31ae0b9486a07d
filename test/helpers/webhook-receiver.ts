/**
 * A real HTTP webhook receiver on 127.0.0.1 (node:http) that records every request with its raw
 * body and answers as the test says: a status code, or 'hang' (never answers).
 */
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';

export interface Received {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  rawBody: string;
}

export type Behaviour = number | 'hang';

export interface Receiver {
  url: string;
  received: Received[];
  /** What the next requests get; default 200. */
  behaviour: Behaviour;
  /** Resolves with the nth request (1-based) once it arrived. */
  nth(n: number, timeoutMs?: number): Promise<Received>;
  close(): Promise<void>;
}

export async function startReceiver(behaviour: Behaviour = 200, path = '/hook'): Promise<Receiver> {
  const received: Received[] = [];
  const waiting: (() => void)[] = [];
  const hanging = new Set<ServerResponse>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        rawBody: Buffer.concat(chunks).toString('utf8'),
      });
      for (const w of waiting.splice(0)) w();
      if (r.behaviour === 'hang') {
        hanging.add(res);
        return;
      }
      res.writeHead(r.behaviour, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const r: Receiver = {
    url: `http://127.0.0.1:${port}${path}`,
    received,
    behaviour,
    async nth(n, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (received.length < n) {
        if (Date.now() > deadline)
          throw new Error(`request ${n} did not arrive within ${timeoutMs} ms (got ${received.length})`);
        await new Promise<void>((resolve) => {
          waiting.push(resolve);
          setTimeout(resolve, 50);
        });
      }
      return received[n - 1];
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return r;
}
