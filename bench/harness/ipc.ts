/**
 * A tiny request/reply layer over Node's IPC channel between a bench and its helper processes (each
 * request carries an id; the child answers with the same id, or with `error`), and the messages of
 * the shared helpers: the receiver (bench/harness/receiver.ts) and the load generator (load.ts).
 */
import type { ChildProcess } from 'node:child_process';
import type { Latency } from './stats.ts';

export type { Latency };
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

// ---------------------------------------------------------------- the receiver

/** How one receiver port answers a delivery (a `ping` is always answered 200 at once). */
export interface PortSpec {
  /** Ports of one name share one tally (a tenant's hundred slow endpoints). */
  name: string;
  /** Never answers a delivery: the socket stays open. */
  hang?: boolean;
  /** Holds every delivery this long before its 204 (ms). */
  holdMs?: number;
  /** Every `tooManyEvery`-th request is answered 429 with `Retry-After: retryAfterS`. */
  tooManyEvery?: number;
  /** Also sent with a `failRate` answer when set. */
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

export interface ReceiverReply {
  ports?: number[];
  progress?: Record<string, number>;
  stats?: PortStats[];
  /** Publish to first 2xx over every port. */
  latency?: Latency;
  ids?: string[];
}

export interface OrderedStats {
  keys: number;
  /** First sightings of an event id whose seq is below an earlier first-seen seq of its key. */
  inversions: number;
  /** First 2xx of an event id whose seq is below an earlier first-2xx seq of its key. */
  okInversions: number;
  examples: string[];
  /** Answered 2xx before `splitAt` with no failure of their key between publish and first 2xx. */
  clear: Latency;
  /** Answered 2xx before `splitAt` behind a failure of their key. */
  behind: Latency;
  beforeSplit: Latency;
  afterSplit: Latency;
  /** The longest time between two consecutive first-2xx answers, when it ended, and the first-2xx answers since. */
  longestGapMs: number | null;
  longestGapEnd: number | null;
  okSinceGap: number;
}

export interface PortStats {
  name: string;
  /** Every delivery request (pings left out). */
  requests: number;
  /** Event ids seen at all, and answered 2xx at least once. */
  seen: number;
  ok: number;
  /** Requests for an event id that had been answered 2xx already. */
  duplicates: number;
  /** Requests answered 5xx or 429. */
  failed: number;
  /** Most requests that arrived in any sliding 1 s window. */
  maxInWindow: number;
  /** Most requests open at once (arrived, not answered yet), and now. */
  maxOpen: number;
  openNow: number;
  /** Epoch ms of the first and the last first-2xx. */
  firstOkAt: number | null;
  lastOkAt: number | null;
  /** 429s sent, and the least time from a 429 to the next request that arrived (ms). */
  tooMany: number;
  minGapAfter429: number | null;
  /** Publish (data.sent_at) to first 2xx (ms). */
  latency: Latency;
  ordered: OrderedStats | null;
}

// ---------------------------------------------------------------- the load generator

export interface Credentials {
  client_id: string;
  client_secret: string;
}

/** `publish`: `events` events, one per request or `batchSize` per batch request. */
export interface PublishSpec {
  base: string;
  client: Credentials;
  publish: 'single' | 'batch';
  batchSize: number;
  /** closed: `connections` requests in flight back to back; open: `rate` events/s on a fixed schedule. */
  model: 'closed' | 'open';
  connections: number;
  rate: number;
  events: number;
  padBytes: number;
  /** Each event carries its own publish id (the idempotent path). */
  ids?: boolean;
}

export interface PublishResult {
  sent: number;
  /** 202 (single), or items with an id and no error in a 200/202 (batch). */
  accepted: number;
  /** Responses by status; network failures as `error:<code>`. */
  statuses: Record<string, number>;
  /** Batch items refused inside an accepted response, by their error code. */
  itemErrors: Record<string, number>;
  /** `matched_endpoints` of accepted events (by count). */
  matched: Record<string, number>;
  firstSentAt: number;
  lastAnsweredAt: number;
  acceptedPerSec: number;
  batchUnavailable: boolean;
}

/** `probe`: the noisy-neighbour bench's two tenants at once. */
export interface ProbeSpec {
  base: string;
  /** The quiet tenant: one event per request on a fixed schedule, keyed `k<seq % keys>`. */
  probe: { client: Credentials; rate: number; seconds: number; keys: number };
  /** The noisy tenant: a batch of `batch` events every `everyMs` (null: none). */
  flood: { client: Credentials; batch: number; everyMs: number; keys: number } | null;
}

export interface ProbeResult {
  probeAccepted: number;
  /** Request sent to 202 read, p50 and p99 ms. */
  probeAnswerP50: number | null;
  probeAnswerP99: number | null;
  probeStatuses: Record<string, number>;
  floodAccepted: number;
  floodStatuses: Record<string, number>;
  /** matched_endpoints of the flood's events, summed. */
  floodDeliveries: number;
}

/** `flood`: event types at once, each `events` events in batches of `batch`, `connections` at once. */
export interface FloodSpec {
  base: string;
  client: Credentials;
  streams: { type: string; events: number; batch: number; connections: number }[];
}

export interface StreamResult {
  type: string;
  sent: number;
  accepted: number;
  /** Responses by status; network failures as `error:<code>`; refused items as `item:<code>`. */
  statuses: Record<string, number>;
  firstSentAt: number;
  lastAnsweredAt: number;
  /** The ids accepted (`ordered` only). */
  ids: string[];
}

/**
 * `ordered`: `keys` × `perKey` events, data `{key, seq, sent_at}`, seq-major, from one sequential
 * stream of batches (`batchMax` at most), paced at `rate` events/s (0: as fast as accepted).
 */
export interface OrderedSpec {
  base: string;
  client: Credentials;
  type: string;
  keys: number;
  perKey: number;
  rate: number;
  batchMax: number;
}

/** `tokens`: closed model, POST /v1/auth/token round-robin over `clients`; a warm-up not counted. */
export interface TokenSpec {
  base: string;
  clients: Credentials[];
  connections: number;
  warmUpSeconds: number;
  seconds: number;
}

export interface TokenResult {
  requests: number;
  ok: number;
  statuses: Record<string, number>;
  seconds: number;
  okPerSec: number;
  p50: number | null;
  p99: number | null;
}

/** `revocation`: rounds of a victim's token polled on both nodes while node 1 revokes it. */
export interface RevocationSpec {
  node1: string;
  node2: string;
  officer: Credentials;
  /** Revoked in one unreported round first. */
  warmUp: Credentials;
  victims: Credentials[];
  roundTimeoutMs: number;
}

export interface RevocationResult {
  /** Per measured round, ms from sending the POST (NaN: not refused within the timeout). */
  node2Ms: number[];
  node1Ms: number[];
  postMs: number[];
  pollP50: number | null;
  pollP99: number | null;
  polls: number;
  unexpected: Record<string, number>;
}

export type LoadRequest =
  | { op: 'publish'; spec: PublishSpec }
  | { op: 'probe'; spec: ProbeSpec }
  | { op: 'flood'; spec: FloodSpec }
  | { op: 'ordered'; spec: OrderedSpec }
  | { op: 'tokens'; spec: TokenSpec }
  | { op: 'revocation'; spec: RevocationSpec };

export interface LoadReply {
  publish?: PublishResult;
  probe?: ProbeResult;
  flood?: StreamResult[];
  ordered?: StreamResult;
  tokens?: TokenResult;
  revocation?: RevocationResult;
}
