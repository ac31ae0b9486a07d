/**
 * The benches' webhook receiver, its own process (forked with IPC): one node:http server per port
 * spec (harness/ipc.ts), so each endpoint is its own origin. Every port answers the ping 200
 * at once and each delivery as its spec says (204, held, hung, 429 with Retry-After every n-th,
 * failing at random, a random delay); ports of one name share one tally. A tally records what the
 * benches check: requests (the most in any 1 s window, the most open at once), first receipts and
 * repeats, the time from a 429 to the next request, publish-to-first-2xx latency (`data.sent_at`),
 * and for an ordered port each key's order (`data.key`, `data.seq`).
 */
import { createServer, type IncomingMessage, type RequestListener, type Server } from 'node:http';
import { serve } from './ipc.ts';
import { type Latency, latency } from './stats.ts';

/** How one receiver port answers a delivery (a `ping` is always answered 200 at once). */
export interface PortSpec {
  /** Ports of one name share one tally (a tenant's hundred slow endpoints). */
  name: string;
  /** Never answers a delivery: the socket stays open. */
  hang?: boolean;
  /** Holds every delivery this long before its 204 (ms). */
  holdMs?: number;
  /** Every `tooManyEvery`-th request is answered 429 with `Retry-After: retryAfterS` (sent on failRate too). */
  tooManyEvery?: number;
  retryAfterS?: number;
  /** This share of requests (0..1), drawn at random, is answered `failStatus` (500) at once. */
  failRate?: number;
  failStatus?: number;
  /** The others are answered after a random 0..delayMaxMs. */
  delayMaxMs?: number;
  /** Deliveries carry `data: {key, seq, sent_at}`: per-key order is checked. */
  ordered?: boolean;
}

export type ReceiverRequest =
  /** Opens one server per spec (closing the previous ones); answers their ports in the same order. */
  | { op: 'listen'; ports: PortSpec[] }
  /** Forgets what the named tallies (every one when absent) recorded: a new measuring window. */
  | { op: 'reset'; names?: string[] }
  /** Per name: event ids answered 2xx at least once (cheap, for polling). */
  | { op: 'progress' }
  /** `splitAt` (epoch ms, a kill): an ordered port's latencies before and after it. */
  | { op: 'stats'; splitAt?: number }
  /** The event ids a name answered 2xx at least once. */
  | { op: 'ids'; name: string };

export type PortStats = ReturnType<typeof stats>;
export interface ReceiverReply {
  ports?: number[];
  progress?: Record<string, number>;
  stats?: PortStats[];
  /** Publish to first 2xx over every port. */
  latency?: Latency;
  ids?: string[];
}

interface OrderedEvent {
  key: string;
  seq: number;
  sentAt: number | null;
  okAt: number | null;
}

/** What the ports of one name recorded since their last reset (a window). */
class Tally {
  requests = 0;
  readonly seen = new Set<string>();
  /** Event id → epoch ms of its first 2xx. */
  readonly okAt = new Map<string, number>();
  duplicates = 0;
  failed = 0;
  /** performance.now() of every request's arrival, in order. */
  readonly arrivals: number[] = [];
  open = 0;
  maxOpen = 0;
  tooMany = 0;
  /** performance.now() of the last 429 answered, until the next request arrives. */
  pending429: number | null = null;
  minGapAfter429: number | null = null;
  readonly latencies: number[] = [];
  // Ordered ports only.
  readonly events = new Map<string, OrderedEvent>();
  readonly maxFirstSeq = new Map<string, number>();
  readonly maxOkSeq = new Map<string, number>();
  /** Epoch ms of every failure answered, by key. */
  readonly failures = new Map<string, number[]>();
  inversions = 0;
  okInversions = 0;
  readonly examples: string[] = [];
}

let servers: Server[] = [];
let specs: PortSpec[] = [];
const tallies = new Map<string, Tally>();

function readJson(req: IncomingMessage): Promise<any> {
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

function handler(spec: PortSpec): RequestListener {
  return async (req, res) => {
    const arrived = performance.now();
    const body = (await readJson(req)) ?? {};
    if (body.type === 'ping') return void res.writeHead(200).end();
    const r = tallies.get(spec.name)!; // the tally of the window this request arrived in
    r.requests++;
    r.arrivals.push(arrived);
    if (r.pending429 !== null) {
      const gap = arrived - r.pending429;
      r.minGapAfter429 = r.minGapAfter429 === null ? gap : Math.min(r.minGapAfter429, gap);
      r.pending429 = null;
    }
    r.open++;
    r.maxOpen = Math.max(r.maxOpen, r.open);
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      r.open--;
    };
    res.once('close', close);
    res.once('finish', close);

    const id = String(body.id);
    if (r.okAt.has(id)) r.duplicates++;
    const firstSight = !r.seen.has(id);
    r.seen.add(id);
    const data = body.data ?? {};
    const sentAt = typeof data.sent_at === 'number' ? data.sent_at : null;
    let ev: OrderedEvent | undefined;
    if (spec.ordered) {
      ev = r.events.get(id);
      if (!ev) {
        ev = { key: String(data.key), seq: Number(data.seq), sentAt, okAt: null };
        r.events.set(id, ev);
      }
      if (firstSight) {
        const top = r.maxFirstSeq.get(ev.key);
        if (top !== undefined && ev.seq < top) {
          r.inversions++;
          if (r.examples.length < 5) r.examples.push(`key ${ev.key}: seq ${ev.seq} first seen after seq ${top}`);
        }
        r.maxFirstSeq.set(ev.key, Math.max(top ?? -1, ev.seq));
      }
    }

    const fail = (status: number, headers: Record<string, string> = {}) => {
      r.failed++;
      if (ev) {
        const list = r.failures.get(ev.key) ?? [];
        if (list.length === 0) r.failures.set(ev.key, list);
        list.push(Date.now());
      }
      res.writeHead(status, headers).end();
    };
    const succeed = () => {
      const now = Date.now();
      if (!r.okAt.has(id)) {
        r.okAt.set(id, now);
        if (sentAt !== null) r.latencies.push(now - sentAt);
        if (ev) {
          ev.okAt = now;
          const top = r.maxOkSeq.get(ev.key);
          if (top !== undefined && ev.seq < top) {
            r.okInversions++;
            if (r.examples.length < 5) r.examples.push(`key ${ev.key}: seq ${ev.seq} answered 2xx after seq ${top}`);
          }
          r.maxOkSeq.set(ev.key, Math.max(top ?? -1, ev.seq));
        }
      }
      if (!res.destroyed) res.writeHead(204).end();
    };

    if (spec.hang) return; // the dispatcher's own timeout ends the attempt
    if (spec.tooManyEvery && r.requests % spec.tooManyEvery === 0) {
      r.tooMany++;
      fail(429, { 'retry-after': String(spec.retryAfterS ?? 1) });
      r.pending429 = performance.now();
      return;
    }
    if (spec.failRate && Math.random() < spec.failRate)
      return fail(spec.failStatus ?? 500, spec.retryAfterS ? { 'retry-after': String(spec.retryAfterS) } : {});
    const wait = (spec.holdMs ?? 0) + (spec.delayMaxMs ? Math.random() * spec.delayMaxMs : 0);
    if (wait > 0) setTimeout(succeed, wait).unref();
    else succeed();
  };
}

function listen(spec: PortSpec): Promise<Server> {
  const server = createServer(handler(spec));
  // Longer than the dispatcher's 30 s keep-alive, so the client always closes an idle socket first
  // (a server-side close racing a new request would show up as a spurious failed attempt).
  server.keepAliveTimeout = 65_000;
  server.requestTimeout = 0;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

/** The most values of an ascending list inside any window [t, t + width). */
function maxInWindow(sorted: number[], width: number): number {
  let best = 0;
  for (let lo = 0, hi = 0; hi < sorted.length; hi++) {
    while (sorted[hi] - sorted[lo] >= width) lo++;
    best = Math.max(best, hi - lo + 1);
  }
  return best;
}

/**
 * Inversions: first sightings (and first 2xx) of an event id whose seq is below an earlier one of its
 * key. Latencies of the events answered 2xx before `splitAt`, split by whether a failure of their key
 * came between their publish and their first 2xx, and after it; the longest gap between first 2xx.
 */
function orderedStats(r: Tally, splitAt: number) {
  const clear: number[] = [];
  const behind: number[] = [];
  const after: number[] = [];
  for (const ev of r.events.values()) {
    if (ev.okAt === null || ev.sentAt === null) continue;
    if (ev.okAt >= splitAt) {
      after.push(ev.okAt - ev.sentAt);
      continue;
    }
    const fails = r.failures.get(ev.key) ?? [];
    // The first failure of the key at or after the publish: did it come before the first 2xx?
    let lo = 0;
    for (let hi = fails.length; lo < hi; ) {
      const mid = (lo + hi) >> 1;
      if (fails[mid] < ev.sentAt) lo = mid + 1;
      else hi = mid;
    }
    (lo < fails.length && fails[lo] <= ev.okAt ? behind : clear).push(ev.okAt - ev.sentAt);
  }
  const oks = Array.from(Float64Array.from(r.okAt.values()).sort());
  let longestGapMs: number | null = null;
  let gapEnd = 0;
  for (let i = 1; i < oks.length; i++) {
    const gap = oks[i] - oks[i - 1];
    if (longestGapMs === null || gap > longestGapMs) {
      longestGapMs = gap;
      gapEnd = i;
    }
  }
  return {
    keys: r.maxFirstSeq.size,
    inversions: r.inversions,
    okInversions: r.okInversions,
    examples: r.examples,
    clear: latency(clear),
    behind: latency(behind),
    beforeSplit: latency([...clear, ...behind]),
    afterSplit: latency(after),
    longestGapMs,
    longestGapEnd: longestGapMs === null ? null : oks[gapEnd],
    okSinceGap: longestGapMs === null ? 0 : oks.length - gapEnd,
  };
}

/** maxInWindow: most requests in any 1 s; duplicates: requests for an id answered 2xx already. */
function stats(name: string, r: Tally, splitAt: number) {
  let firstOkAt: number | null = null;
  let lastOkAt: number | null = null;
  for (const t of r.okAt.values()) {
    if (firstOkAt === null || t < firstOkAt) firstOkAt = t;
    if (lastOkAt === null || t > lastOkAt) lastOkAt = t;
  }
  return {
    name,
    requests: r.requests,
    seen: r.seen.size,
    ok: r.okAt.size,
    duplicates: r.duplicates,
    failed: r.failed,
    maxInWindow: maxInWindow(r.arrivals, 1000),
    maxOpen: r.maxOpen,
    openNow: r.open,
    firstOkAt,
    lastOkAt,
    tooMany: r.tooMany,
    minGapAfter429: r.minGapAfter429,
    latency: latency(r.latencies),
    ordered: specs.some((s) => s.name === name && s.ordered) ? orderedStats(r, splitAt) : null,
  };
}

serve<ReceiverRequest>(async (m) => {
  if (m.op === 'listen') {
    for (const s of servers) {
      s.closeAllConnections();
      s.close();
    }
    specs = m.ports;
    tallies.clear();
    for (const s of specs) tallies.set(s.name, new Tally());
    servers = await Promise.all(specs.map(listen));
    return { ports: servers.map((s) => (s.address() as { port: number }).port) };
  }
  if (m.op === 'reset') {
    for (const name of tallies.keys()) if (!m.names || m.names.includes(name)) tallies.set(name, new Tally());
    return {};
  }
  if (m.op === 'progress') return { progress: Object.fromEntries([...tallies].map(([k, r]) => [k, r.okAt.size])) };
  if (m.op === 'ids') {
    const r = tallies.get(m.name);
    if (!r) throw new Error(`no port named ${m.name}`);
    return { ids: [...r.okAt.keys()] };
  }
  const splitAt = m.splitAt ?? Number.POSITIVE_INFINITY;
  return {
    stats: [...tallies].map(([name, r]) => stats(name, r, splitAt)),
    // Over every port: the dispatch bench's latency of all healthy deliveries.
    latency: latency([...tallies.values()].flatMap((r) => r.latencies)),
  };
});
