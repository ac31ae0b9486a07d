/**
 * The receivers of the noisy-neighbour bench, its own process (forked with IPC by
 * bench/noisy-neighbour.ts): `slow` node:http servers that answer the ping at once and hold every
 * other request for `holdMs` before a 200 (tenant A's endpoints), and `fast` servers that answer
 * 204 at once, each recording publish-to-receipt latency from `data.sent_at` and whether events of
 * one ordering key arrived in publish order (`data.seq`; tenant B's endpoints).
 */
import type { Server } from 'node:http';
import { serve } from '../harness/ipc.ts';
import { closeAll, listenLocal, portOf, readJson } from '../harness/receiver-http.ts';
import { percentile } from '../harness/stats.ts';
import type { FastPortStats, NoisyReceiverRequest, NoisyReceiverStats } from './ipc.ts';

let servers: Server[] = [];

/** What one fast port saw in the current window. */
class FastPort {
  latencies: number[] = [];
  seen = new Set<string>();
  duplicates = 0;
  inversions = 0;
  /** Per ordering key, the highest `seq` first received. */
  lastSeq = new Map<string, number>();

  /** The probe repeats its ordering key in `data.key`. */
  note(body: { id?: unknown; data?: any }, now: number): void {
    const id = String(body.id);
    if (this.seen.has(id)) {
      this.duplicates++;
      return;
    }
    this.seen.add(id);
    if (typeof body.data?.sent_at === 'number') this.latencies.push(now - body.data.sent_at);
    const { seq, key } = body.data ?? {};
    if (typeof key === 'string' && typeof seq === 'number') {
      if ((this.lastSeq.get(key) ?? -1) > seq) this.inversions++;
      else this.lastSeq.set(key, seq);
    }
  }

  stats(): FastPortStats {
    const sorted = Array.from(Float64Array.from(this.latencies).sort());
    return {
      unique: this.seen.size,
      duplicates: this.duplicates,
      p50: percentile(sorted, 50),
      p99: percentile(sorted, 99),
      max: sorted.length ? sorted[sorted.length - 1] : null,
      inversions: this.inversions,
    };
  }
}
let fastPorts: FastPort[] = [];
let slowReceived = 0;
let held = 0;
let heldMax = 0;

async function listen(slow: number, holdMs: number, fast: number): Promise<number[]> {
  closeAll(servers);
  const slowServers = await Promise.all(
    Array.from({ length: slow }, () =>
      listenLocal(async (req, res) => {
        const body = (await readJson(req)) ?? {};
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
  fastPorts = Array.from({ length: fast }, () => new FastPort());
  const fastServers = await Promise.all(
    fastPorts.map((_, i) =>
      listenLocal(async (req, res) => {
        const body = (await readJson(req)) ?? {};
        const now = Date.now();
        if (body.type !== 'ping') fastPorts[i].note(body, now);
        res.writeHead(body.type === 'ping' ? 200 : 204).end();
      }),
    ),
  );
  servers = [...slowServers, ...fastServers];
  return servers.map(portOf);
}

function stats(): NoisyReceiverStats {
  return {
    fast: fastPorts.map((p) => p.stats()),
    slowReceived,
    slowHeldMax: heldMax,
    slowHeldNow: held,
  };
}

serve<NoisyReceiverRequest>(async (m) => {
  if (m.op === 'listen') return { ports: await listen(m.slow, m.holdMs, m.fast) };
  if (m.op === 'window') {
    fastPorts = fastPorts.map(() => new FastPort());
    heldMax = held;
    return {};
  }
  return { stats: stats() };
});
