/**
 * The receivers of the noisy-neighbour bench, its own process (forked with IPC by
 * bench/noisy-neighbour.ts): `slow` node:http servers that answer the ping at once and hold every
 * other request for `holdMs` before a 200 (tenant A's endpoints), and one fast server that answers
 * 204 at once and records publish-to-receipt latency from `data.sent_at` (tenant B's endpoint).
 */
import { createServer, type Server } from 'node:http';
import { percentile, serve } from '../dispatch/ipc.ts';
import type { NoisyReceiverRequest, NoisyReceiverStats } from './ipc.ts';

let servers: Server[] = [];
let latencies: number[] = [];
let seen = new Set<string>();
let fastDuplicates = 0;
let slowReceived = 0;
let held = 0;
let heldMax = 0;

function readJson(req: import('node:http').IncomingMessage): Promise<{ id?: unknown; type?: unknown; data?: any }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch {
        resolve({});
      }
    });
  });
}

function open(handler: Parameters<typeof createServer>[1]): Promise<Server> {
  const server = createServer(handler!);
  server.keepAliveTimeout = 65_000;
  server.requestTimeout = 0;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

async function listen(slow: number, holdMs: number): Promise<number[]> {
  for (const s of servers) {
    s.closeAllConnections();
    s.close();
  }
  const slowServers = await Promise.all(
    Array.from({ length: slow }, () =>
      open(async (req, res) => {
        const body = await readJson(req);
        if (body.type === 'ping') return void res.writeHead(200).end();
        slowReceived++;
        held++;
        heldMax = Math.max(heldMax, held);
        let done = false;
        const release = () => {
          if (done) return;
          done = true;
          held--;
        };
        res.once('close', release);
        setTimeout(() => {
          release();
          if (!res.destroyed) res.writeHead(200).end();
        }, holdMs).unref();
      }),
    ),
  );
  const fast = await open(async (req, res) => {
    const body = await readJson(req);
    const now = Date.now();
    if (body.type !== 'ping') {
      const id = String(body.id);
      if (seen.has(id)) fastDuplicates++;
      else {
        seen.add(id);
        if (typeof body.data?.sent_at === 'number') latencies.push(now - body.data.sent_at);
      }
    }
    res.writeHead(body.type === 'ping' ? 200 : 204).end();
  });
  servers = [...slowServers, fast];
  return servers.map((s) => (s.address() as { port: number }).port);
}

function stats(): NoisyReceiverStats {
  const sorted = Array.from(Float64Array.from(latencies).sort());
  return {
    fastUnique: seen.size,
    fastDuplicates,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1] : null,
    slowReceived,
    slowHeldMax: heldMax,
    slowHeldNow: held,
  };
}

serve<NoisyReceiverRequest>(async (m) => {
  if (m.op === 'listen') return { ports: await listen(m.slow, m.holdMs) };
  if (m.op === 'window') {
    latencies = [];
    seen = new Set();
    fastDuplicates = 0;
    heldMax = held;
    return {};
  }
  return { stats: stats() };
});
