/**
 * Messages between the dispatch bench's orchestrator (bench/dispatch.ts) and its child processes,
 * and a tiny request/reply layer over Node's IPC channel (each request carries an id; the child
 * answers with the same id, or with `error`).
 */
import type { ChildProcess } from 'node:child_process';

export type PortMode = 'ok' | '503' | 'hang';

/** Receiver (bench/dispatch/receiver.ts): long-lived, one node:http server per endpoint port. */
export type ReceiverRequest =
  /** Closes the previous servers (and their held sockets), resets the counts, opens one port per mode. */
  | { op: 'listen'; modes: PortMode[] }
  /** `latency` sorts the latencies for p50/p99 (skip it while polling progress). */
  | { op: 'stats'; latency: boolean };

export interface PortStats {
  port: number;
  mode: PortMode;
  /** Every non-ping delivery, repeats included. */
  received: number;
  unique: number;
  duplicates: number;
}

export interface ReceiverStats {
  ports: PortStats[];
  /** Over the `ok` ports only: the healthy deliveries. */
  unique: number;
  duplicates: number;
  p50: number | null;
  p99: number | null;
  /** Epoch ms of the first and the last first-receipt on an `ok` port. */
  first: number | null;
  last: number | null;
}

/** Load generator (bench/dispatch/load.ts): long-lived, one run per request. */
export interface LoadSpec {
  base: string;
  clientId: string;
  clientSecret: string;
  publish: 'single' | 'batch';
  batchSize: number;
  /** closed: `connections` requests in flight back to back; open: `rate` events/s on a fixed schedule. */
  model: 'closed' | 'open';
  connections: number;
  rate: number;
  events: number;
  padBytes: number;
}

export interface LoadResult {
  /** Events in the requests sent. */
  sent: number;
  /** Events Sluice accepted: 202 (single), or items with an id and no error in a 200/202 (batch). */
  accepted: number;
  /** Responses (requests, not events) by status; network failures as `error:<code>`. */
  statuses: Record<string, number>;
  /** Batch items refused inside an accepted response, by their error code. */
  itemErrors: Record<string, number>;
  /** `matched_endpoints` of accepted events (by count): how many endpoints the ingress saw. */
  matched: Record<string, number>;
  /** Epoch ms of the first request sent and of the last answer. */
  firstSentAt: number;
  lastAnsweredAt: number;
  acceptedPerSec: number;
  batchUnavailable: boolean;
}

export type LoadRequest = { op: 'run'; spec: LoadSpec };

/** One-shot hop processes get their spec as argv[2] (JSON) and send one result back. */
export interface HopPostSpec {
  ports: number[];
  connections: number;
  posts: number;
  padBytes: number;
}
export interface HopPostResult {
  startedAt: number;
  endedAt: number;
  ok: number;
  failed: number;
}

export interface HopKafkaSpec {
  brokers: string[];
  topic: string;
  records: number;
  recordBytes: number;
  batch: number;
  producers: number;
  partitions: number;
}
export interface HopKafkaResult {
  produced: number;
  producePerSec: number;
  consumed: number;
  /** From consumer.run() (group join included) to the last record. */
  consumePerSec: number;
  /** From consumer.run() to the first batch: group join and first fetch. */
  consumerJoinMs: number;
}

type Reply = { id: number; error?: string; [k: string]: unknown };

/** Parent side: `call(msg)` resolves with the child's reply to that message. */
export function rpc<Req extends object, Rep>(child: ChildProcess): (msg: Req) => Promise<Rep> {
  let next = 0;
  const pending = new Map<number, { resolve: (r: Rep) => void; reject: (e: Error) => void }>();
  child.on('message', (m: Reply) => {
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if (m.error) p.reject(new Error(m.error));
    else p.resolve(m as unknown as Rep);
  });
  child.once('exit', (code, signal) => {
    for (const p of pending.values()) p.reject(new Error(`child exited (${signal ?? code}) before answering`));
    pending.clear();
  });
  return (msg) =>
    new Promise<Rep>((resolve, reject) => {
      const id = ++next;
      if (!child.connected) return reject(new Error('child process is gone'));
      pending.set(id, { resolve, reject });
      child.send({ ...msg, id }, (err) => {
        if (err && pending.delete(id)) reject(err);
      });
    });
}

/** Child side: answers every request with `handle`'s result; exits when the parent goes away. */
export function serve<Req>(handle: (msg: Req) => Promise<object>): void {
  process.on('disconnect', () => process.exit(0));
  process.on('message', (m: Req & { id: number }) => {
    handle(m).then(
      (out) => process.send!({ ...out, id: m.id }),
      (err: Error) => process.send!({ id: m.id, error: err.stack ?? String(err) }),
    );
  });
}

export function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** The middle of the finite values; of an even count, the mean of the two middle ones (NaN: none). */
export function median(xs: number[]): number {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}
