/**
 * Messages between the dispatch bench's orchestrator (bench/dispatch.ts) and its child processes
 * (over bench/harness/ipc.ts).
 */
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
  /** Each event carries its own publish id (the idempotent path: a claim, the event, a published marker). */
  ids?: boolean;
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
