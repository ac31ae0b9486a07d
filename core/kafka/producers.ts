/**
 * The two producers Sluice writes with: DurableProducer (acks=all, resolves once Kafka has the
 * records; every write that must not be lost) and BestEffortProducer (acks=1, drops on failure; the
 * attempt history and the event type counts), with the request limits both respect.
 */
import type { Kafka, Producer } from 'kafkajs';
import { SluiceError, unavailable } from '../errors.ts';
import { doubling, retry } from '../retry.ts';
import { isPermanentWriteError, isTransientKafkaError, partitionOfKey } from './client.ts';
import { type KeptAdmin, keptAdmin } from './kept-admin.ts';

export interface OutRecord {
  key: string;
  value: string | null;
  headers?: Record<string, string>;
}

/** Records waiting for a produce request: one caller's, for one topic. */
interface Queued {
  topic: string;
  records: OutRecord[];
  bytes: number;
}

interface PendingSend extends Queued {
  resolve: () => void;
  reject: (err: Error) => void;
}

/** One topic's records of a produce request; a record naming its partition goes there. */
interface TopicMessages {
  topic: string;
  messages: (OutRecord & { partition?: number })[];
}

const isRetriableWrite = (err: unknown) => !isPermanentWriteError(err) && isTransientKafkaError(err);

/** Most records one produce request carries; the rest wait for the next. */
const MAX_BATCH_RECORDS = 2000;
/**
 * Most bytes one produce request carries. Kafka refuses a partition's batch above the topic's
 * `max.message.bytes` (1 MiB by default, the value Sluice's topics keep), so requests stay well
 * under it whatever the partitioning.
 */
export const MAX_BATCH_BYTES = 768 * 1024;
/** The largest single record Sluice writes; larger ones are refused before Kafka sees them. */
export const MAX_RECORD_BYTES = 900 * 1024;

/** The bytes a record takes on the wire, near enough to bound batches by. */
export function recordBytes(r: OutRecord): number {
  let n = 70 + Buffer.byteLength(r.key) + (r.value === null ? 0 : Buffer.byteLength(r.value));
  if (r.headers) for (const [k, v] of Object.entries(r.headers)) n += Buffer.byteLength(k) + Buffer.byteLength(v) + 8;
  return n;
}

/**
 * Takes from the head of `queue` what one produce request carries (at least one entry, then as
 * many as fit MAX_BATCH_RECORDS and MAX_BATCH_BYTES), in order, with its records grouped by topic.
 */
function takeRequest<T extends Queued>(
  queue: T[],
): { taken: T[]; topicMessages: { topic: string; messages: OutRecord[] }[] } {
  let n = 0;
  let count = 0;
  let bytes = 0;
  while (
    n < queue.length &&
    (n === 0 || (count + queue[n].records.length <= MAX_BATCH_RECORDS && bytes + queue[n].bytes <= MAX_BATCH_BYTES))
  ) {
    count += queue[n].records.length;
    bytes += queue[n].bytes;
    n++;
  }
  const taken = queue.splice(0, n);
  const byTopic = new Map<string, OutRecord[]>();
  for (const q of taken) {
    const list = byTopic.get(q.topic);
    if (list) for (const r of q.records) list.push(r);
    else byTopic.set(q.topic, q.records.slice());
  }
  return { taken, topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })) };
}

/**
 * A producer whose `send` resolves only once Kafka acknowledged the write (acks=all). One request
 * is in flight, so sends that arrive while one is in flight are queued and go out together as the
 * next request: one round trip for many callers, in arrival order (so per-key order holds).
 *
 * A failed request is sent again whole, by this class, never by kafkajs, and kafkajs's idempotent
 * mode is off: both lose acknowledged records (docs/decisions.md). kafkajs's own retry re-sends
 * only to the brokers that had not answered, so records whose partition moved to a broker that
 * had answered are acknowledged unsent; its idempotent producer rewinds its sequence numbers when
 * it gives up on a request the broker did write, and the next request of the same size is then
 * acknowledged as that one's duplicate, unwritten (or, of another size, refused as out of order
 * for good). Sending again writes some records twice, which at-least-once allows; but only once:
 * after a failure the request goes again one partition per request, and each later try carries only
 * the partitions not yet acknowledged. Sent whole, every try wrote again the partitions that had
 * succeeded, so one leaderless partition (a region cut off) wrote the rest of its request once per
 * try for as long as it lasted.
 */
export class DurableProducer {
  private readonly producer: Producer;
  private connected = false;
  private readonly queue: PendingSend[] = [];
  private flushing = false;
  private readonly retryForMs: number;
  /**
   * Partition counts by topic (what the per-partition resend needs), read in the background when a
   * topic is first sent to, so a failure never waits for them.
   */
  private readonly partitionCounts = new Map<string, number>();
  private readonly counting = new Set<string>();
  private readonly admin: KeptAdmin;
  /** `retryForMs`: how long a failed request is sent again (with doubling waits) before its callers fail. */
  constructor(kafka: Kafka, options: { retryForMs?: number } = {}) {
    this.retryForMs = options.retryForMs ?? 25_000;
    this.admin = keptAdmin(kafka);
    this.producer = kafka.producer({
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
      // No kafkajs retry: `flush` sends a failed request again, to every partition.
      retry: { retries: 0 },
    });
  }
  async connect(): Promise<void> {
    await this.producer.connect();
    this.connected = true;
  }
  /**
   * Resolves once Kafka acknowledged every record. A caller's records go out in one request when
   * they fit in MAX_BATCH_BYTES, else in several (each acknowledged before the next is sent).
   */
  async send(topic: string, records: OutRecord[], opts: { timeoutMs?: number } = {}): Promise<void> {
    if (!this.connected) throw unavailable('Kafka producer is not connected');
    this.learnPartitions(topic);
    let chunk: OutRecord[] = [];
    let bytes = 0;
    const chunks: { records: OutRecord[]; bytes: number }[] = [];
    for (const r of records) {
      const size = recordBytes(r);
      if (size > MAX_RECORD_BYTES)
        throw new SluiceError(
          'PAYLOAD_TOO_LARGE',
          `a record of ${size} bytes exceeds the ${MAX_RECORD_BYTES}-byte limit of one Kafka record`,
          { max_bytes: MAX_RECORD_BYTES },
        );
      if (chunk.length > 0 && (bytes + size > MAX_BATCH_BYTES || chunk.length >= MAX_BATCH_RECORDS)) {
        chunks.push({ records: chunk, bytes });
        chunk = [];
        bytes = 0;
      }
      chunk.push(r);
      bytes += size;
    }
    if (chunk.length > 0) chunks.push({ records: chunk, bytes });
    for (const c of chunks) {
      await new Promise<void>((resolve, reject) => {
        const pending: PendingSend = { topic, records: c.records, bytes: c.bytes, resolve, reject };
        this.queue.push(pending);
        void this.flush();
        if (opts.timeoutMs === undefined) return;
        const timer = setTimeout(() => {
          // Still queued: it will never be sent. In flight: Kafka may yet take it.
          const i = this.queue.indexOf(pending);
          if (i >= 0) this.queue.splice(i, 1);
          const fate =
            i >= 0
              ? 'nothing was written'
              : 'the write may still complete; retry with the same event ids to stay idempotent';
          reject(unavailable(`Kafka did not acknowledge the write within ${opts.timeoutMs} ms (${fate})`));
        }, opts.timeoutMs);
        pending.resolve = () => {
          clearTimeout(timer);
          resolve();
        };
        pending.reject = (err) => {
          clearTimeout(timer);
          reject(err);
        };
      });
    }
  }
  private async flush(): Promise<void> {
    if (this.flushing) return;
    this.flushing = true;
    try {
      while (this.queue.length > 0) {
        const { taken: batch, topicMessages } = takeRequest(this.queue);
        try {
          await this.sendRequest(topicMessages);
          for (const b of batch) b.resolve();
        } catch (err) {
          const message = (err as Error).message;
          const tooLarge = { max_bytes: MAX_RECORD_BYTES };
          const refused = `Kafka refused the write for good: ${message}`;
          const e = isPermanentWriteError(err)
            ? new SluiceError('PAYLOAD_TOO_LARGE', refused, tooLarge, { cause: err })
            : unavailable(`Kafka did not accept the write: ${message}`, err);
          for (const b of batch) b.reject(e);
        }
      }
    } finally {
      this.flushing = false;
    }
  }
  /**
   * One request, then (failed) its partitions' requests, each try with only those not yet
   * acknowledged, until all are or the time is up. Without partition counts (not read yet, or the
   * admin request failed) a try sends the request again whole.
   */
  private async sendRequest(topicMessages: TopicMessages[]): Promise<void> {
    let first = true;
    let parts: TopicMessages[] | null = null;
    await retry(
      async () => {
        if (!first) parts ??= this.byPartition(topicMessages);
        first = false;
        if (parts === null) {
          await this.producer.sendBatch({ acks: -1, topicMessages });
          return;
        }
        const trying = parts;
        const sent = await Promise.allSettled(
          trying.map((p) => this.producer.sendBatch({ acks: -1, topicMessages: [p] })),
        );
        const failed = sent.flatMap((r, i) => (r.status === 'rejected' ? [{ part: trying[i], err: r.reason }] : []));
        parts = failed.map((f) => f.part);
        if (failed.length > 0) throw failed.find((f) => !isRetriableWrite(f.err))?.err ?? failed[0].err;
      },
      {
        timeoutMs: this.retryForMs,
        backoff: doubling(100, 1000),
        isRetriable: isRetriableWrite,
        stopped: () => !this.connected,
      },
    );
  }

  private learnPartitions(topic: string): void {
    if (this.partitionCounts.has(topic) || this.counting.has(topic)) return;
    this.counting.add(topic);
    void this.admin
      .use((a) => a.fetchTopicMetadata({ topics: [topic] }))
      .then((meta) => {
        for (const t of meta.topics) if (t.partitions.length > 0) this.partitionCounts.set(t.name, t.partitions.length);
      })
      // Unknown, a failed request goes again whole; the next send to the topic asks again.
      .catch(() => {})
      .finally(() => this.counting.delete(topic));
  }

  /** The request's records, one list per partition (in order), each naming its partition; null: a count is unknown. */
  private byPartition(topicMessages: TopicMessages[]): TopicMessages[] | null {
    const parts = new Map<string, TopicMessages>();
    for (const { topic, messages } of topicMessages) {
      const count = this.partitionCounts.get(topic);
      if (count === undefined) return null;
      for (const m of messages) {
        const partition = partitionOfKey(topic, m.key, count);
        const id = `${topic}\0${partition}`;
        const part = parts.get(id) ?? { topic, messages: [] };
        parts.set(id, part);
        part.messages.push({ ...m, partition });
      }
    }
    return [...parts.values()];
  }

  async sendJson(
    topic: string,
    key: string,
    value: unknown,
    headers?: Record<string, string>,
    opts: { timeoutMs?: number } = {},
  ): Promise<void> {
    await this.send(topic, [{ key, value: value === null ? null : JSON.stringify(value), headers }], opts);
  }
  async disconnect(): Promise<void> {
    this.connected = false;
    await this.producer.disconnect();
    await this.admin.close();
  }
}

/**
 * A producer for records that may be lost (the attempt history): acks=1, not idempotent, its own
 * connection and batches. The durable producer has one request in flight; reports sent through it
 * took half of every batch and delayed the publishes and fan-outs queued behind them (measured:
 * delivered/s fell by half). A failed send is dropped and counted by the caller, never retried;
 * at most MAX_QUEUED records wait (more are dropped), so a Kafka outage cannot grow the heap.
 */
export class BestEffortProducer {
  private static readonly MAX_QUEUED = 50_000;
  private readonly producer: Producer;
  private queue: Queued[] = [];
  private scheduled = false;
  private readonly sending = new Set<Promise<void>>();
  constructor(
    kafka: Kafka,
    private readonly onDrop: (count: number, err: Error | null) => void,
  ) {
    this.producer = kafka.producer({
      allowAutoTopicCreation: false,
      maxInFlightRequests: 5,
      retry: { retries: 2, initialRetryTime: 100 },
    });
  }
  connect(): Promise<void> {
    return this.producer.connect();
  }
  /** Queues a record; it goes out with the others queued in the same turn of the event loop. */
  add(topic: string, record: OutRecord): void {
    if (this.queue.length >= BestEffortProducer.MAX_QUEUED) {
      this.onDrop(1, null);
      return;
    }
    this.queue.push({ topic, records: [record], bytes: recordBytes(record) });
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }
  private flush(): void {
    this.scheduled = false;
    while (this.queue.length > 0) {
      const { taken: batch, topicMessages } = takeRequest(this.queue);
      const sent = this.producer
        .sendBatch({ acks: 1, topicMessages })
        .then(
          () => {},
          (err: Error) => this.onDrop(batch.length, err),
        )
        .finally(() => this.sending.delete(sent));
      this.sending.add(sent);
    }
  }
  /** Sends what is queued, waits for the sends under way, then disconnects. */
  async disconnect(): Promise<void> {
    this.flush();
    await Promise.all([...this.sending]);
    await this.producer.disconnect();
  }
}
