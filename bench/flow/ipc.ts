/** Messages between bench/flow-control.ts and its receivers and load generator (over bench/harness/ipc.ts). */

/** How one receiver port answers a delivery (a `ping` is always answered 200 at once). */
export interface FlowPortSpec {
  name: string;
  /** Holds every delivery this long before its 2xx (ms). */
  holdMs?: number;
  /** Every `tooManyEvery`-th request (the 10th, the 20th, ...) is answered 429 with `Retry-After: retryAfterS`. */
  tooManyEvery?: number;
  retryAfterS?: number;
  /** This share of requests (0..1), drawn at random, is answered 500 at once. */
  failRate?: number;
  /** The others are answered after a random 0..delayMaxMs. */
  delayMaxMs?: number;
  /** Deliveries carry `data: {key, seq, sent_at}`: per-key order is checked. */
  ordered?: boolean;
}

export type FlowReceiverRequest =
  /** Opens one node:http server per spec; returns their ports in the same order. */
  | { op: 'listen'; ports: FlowPortSpec[] }
  /** Forgets what the named ports (every port when absent) recorded: a new measuring window. */
  | { op: 'reset'; names?: string[] }
  /** Cheap counts, for polling. */
  | { op: 'progress' }
  /** `splitAt` (epoch ms, the kill): an ordered port's latencies before and after it. */
  | { op: 'stats'; splitAt?: number }
  /** The event ids a port answered 2xx at least once. */
  | { op: 'ids'; name: string };

export interface FlowProgress {
  /** Per port: event ids answered 2xx at least once. */
  ok: Record<string, number>;
}

export interface OrderedStats {
  keys: number;
  /** First sightings of an event id whose seq is below an earlier first-seen seq of its key. */
  inversions: number;
  /** First 2xx of an event id whose seq is below an earlier first-2xx seq of its key. */
  okInversions: number;
  /** A few inversions, for the report. */
  examples: string[];
  /**
   * Events answered 2xx before `splitAt` that no failure of their key held back (none between
   * their publish and their first 2xx): publish-to-first-2xx ms.
   */
  clear: Latency;
  /** Events answered 2xx before `splitAt` behind a failure of their key (their own or an earlier event's). */
  behind: Latency;
  /** Every event answered 2xx before `splitAt`. */
  beforeSplit: Latency;
  /** Events answered 2xx at or after `splitAt`. */
  afterSplit: Latency;
  /**
   * The longest time between two consecutive first-2xx answers (ms), when it ended (epoch ms), and
   * the first-2xx answers since (the one that ended it included).
   */
  longestGapMs: number | null;
  longestGapEnd: number | null;
  okSinceGap: number;
}

export interface Latency {
  count: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
}

export interface FlowPortStats {
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
  /** Most requests open at once (arrived, not answered yet). */
  maxOpen: number;
  /** Epoch ms of the first and the last first-2xx. */
  firstOkAt: number | null;
  lastOkAt: number | null;
  /** 429s sent, and the least time from a 429 to the next request that arrived (ms). */
  tooMany: number;
  minGapAfter429: number | null;
  /** Publish (data.sent_at) to first 2xx (ms), every event. */
  latency: Latency;
  ordered: OrderedStats | null;
}

export interface FlowReceiverStats {
  ports: FlowPortStats[];
}

/** One event type flooded by the load generator: `events` events in batches of `batch`, `connections` at once. */
export interface FloodStream {
  type: string;
  events: number;
  batch: number;
  connections: number;
}

export interface FloodSpec {
  base: string;
  clientId: string;
  clientSecret: string;
  streams: FloodStream[];
}

export interface StreamResult {
  type: string;
  sent: number;
  accepted: number;
  /** Responses by status; network failures as `error:<code>`; batch items refused as `item:<code>`. */
  statuses: Record<string, number>;
  firstSentAt: number;
  lastAnsweredAt: number;
}

/**
 * The ordered publish: `keys` keys × `perKey` events, data `{key, seq, sent_at}`, in seq-major
 * order (seq 0 of every key, then seq 1, ...) from one sequential stream of batches (`batchMax`
 * events at most), paced at `rate` events/s (0: as fast as Sluice accepts them).
 */
export interface OrderedSpec {
  base: string;
  clientId: string;
  clientSecret: string;
  type: string;
  keys: number;
  perKey: number;
  rate: number;
  batchMax: number;
}

export interface OrderedResult extends StreamResult {
  /** The ids of the accepted events. */
  ids: string[];
}

export type FlowLoadRequest = { op: 'flood'; spec: FloodSpec } | { op: 'ordered'; spec: OrderedSpec };
