/**
 * The webhook receiver of the dispatch bench, its own process (forked with IPC by
 * bench/dispatch.ts): one node:http server per endpoint, so every endpoint is its own origin.
 *   ok   — 204 at once (200 to the registration ping)
 *   503  — 503 with Retry-After: 1 to events, 200 to the ping
 *   hang — 200 to the ping, never answers an event (the socket stays open)
 * Counts first receipts per (port, event id), repeats, and publish→receipt latency from the
 * `data.sent_at` the load generator put into each event.
 */
import type { Server } from 'node:http';
import { serve } from '../harness/ipc.ts';
import { closeAll, listenLocal, portOf, readJson } from '../harness/receiver-http.ts';
import { percentile } from '../harness/stats.ts';
import type { PortMode, PortStats, ReceiverRequest, ReceiverStats } from './ipc.ts';

interface PortState extends PortStats {
  seen: Set<string>;
}

let servers: Server[] = [];
let states: PortState[] = [];
let latencies: number[] = [];
let first: number | null = null;
let last: number | null = null;

function record(st: PortState, body: { id?: unknown; data?: { sent_at?: unknown } }, now: number): void {
  const id = String(body.id);
  st.received++;
  if (st.seen.has(id)) {
    st.duplicates++;
    return;
  }
  st.seen.add(id);
  st.unique++;
  if (st.mode !== 'ok') return;
  const sentAt = body.data?.sent_at;
  if (typeof sentAt === 'number') latencies.push(now - sentAt);
  first ??= now;
  last = now;
}

async function open(st: PortState): Promise<Server> {
  const server = await listenLocal(async (req, res) => {
    const body = await readJson(req);
    const now = Date.now();
    if (body === null) return void res.writeHead(400).end();
    if (body.type === 'ping') return void res.writeHead(200).end();
    record(st, body, now);
    if (st.mode === 'ok') res.writeHead(204).end();
    else if (st.mode === '503') res.writeHead(503, { 'retry-after': '1' }).end();
    // hang: no answer; the dispatcher's own timeout ends the attempt.
  });
  st.port = portOf(server);
  return server;
}

async function listen(modes: PortMode[]): Promise<number[]> {
  closeAll(servers);
  states = modes.map((mode) => ({ port: 0, mode, received: 0, unique: 0, duplicates: 0, seen: new Set<string>() }));
  latencies = [];
  first = last = null;
  servers = await Promise.all(states.map(open));
  return states.map((s) => s.port);
}

function stats(withLatency: boolean): ReceiverStats {
  const ok = states.filter((s) => s.mode === 'ok');
  const sorted = withLatency ? Float64Array.from(latencies).sort() : null;
  const arr = sorted ? Array.from(sorted) : [];
  return {
    ports: states.map(({ port, mode, received, unique, duplicates }) => ({ port, mode, received, unique, duplicates })),
    unique: ok.reduce((n, s) => n + s.unique, 0),
    duplicates: ok.reduce((n, s) => n + s.duplicates, 0),
    p50: sorted ? percentile(arr, 50) : null,
    p99: sorted ? percentile(arr, 99) : null,
    first,
    last,
  };
}

serve<ReceiverRequest>(async (m) => {
  if (m.op === 'listen') return { ports: await listen(m.modes) };
  return { stats: stats(m.latency) };
});
