/**
 * A client factory, a durable producer, topic creation: the product's one runtime import of kafkajs.
 * Other modules import its types (Kafka, Batch, EachBatchPayload, IHeaders...) and call the client
 * built here (consumers, the audit writer's transactional producer, admin), so another client
 * replacing kafkajs (last release 2.2.4, 2023) starts here and reaches those too.
 */
import kafkajs, { Kafka, logLevel } from 'kafkajs';
import type { Producer, Admin, IHeaders, Consumer, ConsumerConfig } from 'kafkajs';
import type { TopicSpec } from '../topics.ts';
import { SluiceBaseError, SluiceError, unavailable } from '../errors.ts';
import { doubling, retry } from '../retry.ts';
import './request-queue-patch.ts';

// kafkajs is CommonJS and spreads its error classes into its exports, out of sight of named imports.
const {
  KafkaJSAggregateError,
  KafkaJSBrokerNotFound,
  KafkaJSConnectionError,
  KafkaJSError,
  KafkaJSGroupCoordinatorNotFound,
  KafkaJSMetadataNotLoaded,
  KafkaJSNonRetriableError,
  KafkaJSNumberOfRetriesExceeded,
  KafkaJSProtocolError,
  KafkaJSRequestTimeoutError,
  KafkaJSTimeout,
} = kafkajs;

export type { Consumer, Producer, Admin, IHeaders };

/** The rack (`client.rack`) a client was made for: its consumers fetch from the replica there. */
const racks = new WeakMap<Kafka, string>();

export function createKafka(brokers: string[], clientId: string, rack: string | null = null): Kafka {
  const kafka = new Kafka({
    clientId,
    brokers,
    logLevel: logLevel.NOTHING,
    retry: { initialRetryTime: 100, retries: 8, maxRetryTime: 5000 },
    connectionTimeout: 3000,
    requestTimeout: 10000,
  });
  if (rack) racks.set(kafka, rack);
  return kafka;
}

export function rackOf(kafka: Kafka): string | null {
  return racks.get(kafka) ?? null;
}

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

/** Kafka's refusals of a write that no retry can change (protocol error types). */
const PERMANENT_WRITE_TYPES = new Set([
  'MESSAGE_TOO_LARGE',
  'RECORD_LIST_TOO_LARGE',
  'INVALID_RECORD',
  'CORRUPT_MESSAGE',
  'TOPIC_AUTHORIZATION_FAILED',
]);

/** The error and the ones it wraps (`cause`), outermost first. */
function* causes(err: unknown): Generator<unknown> {
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 10; depth++) {
    yield e;
    e = (e as { cause?: unknown }).cause;
  }
}

/** True when retrying the same write cannot succeed (too large, invalid): the caller must not loop on it. */
export function isPermanentWriteError(err: unknown): boolean {
  for (const e of causes(err)) {
    if (e instanceof SluiceError) return e.code === 'PAYLOAD_TOO_LARGE';
    if (e instanceof KafkaJSProtocolError && PERMANENT_WRITE_TYPES.has(e.type)) return true;
  }
  return false;
}

const TRANSIENT_CLASSES = [
  KafkaJSConnectionError,
  KafkaJSRequestTimeoutError,
  KafkaJSTimeout,
  KafkaJSMetadataNotLoaded,
  KafkaJSBrokerNotFound,
  KafkaJSGroupCoordinatorNotFound,
];

/**
 * Whether a Kafka failure may pass if the operation is tried again, by the error's class and
 * `retriable` flag, never its message: no connection, a request or a wait that timed out, no
 * metadata or leader yet, a coordinator loading or moving (a broker just started or is electing
 * leaders). kafkajs wraps the failure it gave up on (retries exceeded, or a non-retriable wrapper):
 * the original one decides, as kafkajs's own consumer restart decides.
 */
export function isTransientKafkaError(err: unknown): boolean {
  if (err instanceof SluiceBaseError) return err.retriable;
  if (err instanceof KafkaJSAggregateError) return err.errors.length > 0 && err.errors.every(isTransientKafkaError);
  const wrapped = err instanceof KafkaJSError && err.cause !== undefined && err.cause !== err ? err.cause : undefined;
  if (err instanceof KafkaJSNumberOfRetriesExceeded) return wrapped === undefined || isTransientKafkaError(wrapped);
  if (err instanceof KafkaJSNonRetriableError && wrapped !== undefined) return isTransientKafkaError(wrapped);
  if (TRANSIENT_CLASSES.some((c) => err instanceof c)) return true;
  if (err instanceof KafkaJSError) return err.retriable;
  return false;
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
 * for good). Sending again whole writes some records twice, which at-least-once allows.
 */
export class DurableProducer {
  private readonly producer: Producer;
  private connected = false;
  private readonly queue: PendingSend[] = [];
  private flushing = false;
  private readonly retryForMs: number;
  /** `retryForMs`: how long a failed request is sent again (with doubling waits) before its callers fail. */
  constructor(kafka: Kafka, options: { retryForMs?: number } = {}) {
    this.retryForMs = options.retryForMs ?? 25_000;
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
          await retry(() => this.producer.sendBatch({ acks: -1, topicMessages }), {
            timeoutMs: this.retryForMs,
            backoff: doubling(100, 1000),
            isRetriable: (err) => !isPermanentWriteError(err) && isTransientKafkaError(err),
            stopped: () => !this.connected,
          });
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

/**
 * Retries an admin operation through the transient errors of a broker that has just started or
 * is electing leaders ("coordinator is loading", "not the leader for that topic-partition"), for
 * up to `timeoutMs`. A failure it gives up on is thrown as UNAVAILABLE naming what was tried; one
 * of Sluice's own (a topic's settings refused) is thrown as it is.
 */
export async function retryAdmin<T>(what: string, fn: () => Promise<T>, timeoutMs = 60_000): Promise<T> {
  try {
    return await retry(fn, { timeoutMs, backoff: doubling(100, 2000), isRetriable: isTransientKafkaError });
  } catch (err) {
    if (err instanceof SluiceBaseError && !err.retriable) throw err;
    const detail = `${what}: ${(err as Error).message ?? String(err)}`;
    throw new SluiceError('UNAVAILABLE', detail, {}, { retriable: isTransientKafkaError(err), cause: err });
  }
}

/** The existing retention values that are longer than desired (kept when other settings are written). */
function keepLonger(current: Record<string, string>, desired: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of RETENTION_KEYS)
    if (current[key] !== undefined && desired[key] !== undefined && longer(current[key], desired[key]))
      out[key] = current[key];
  return out;
}

/** A topic's existing settings that a start would weaken; thrown instead of changing them. */
export class TopicSettingsError extends SluiceBaseError<'TOPIC_SETTINGS_REFUSED'> {
  constructor(message: string) {
    super('TOPIC_SETTINGS_REFUSED', message);
  }
}

const RETENTION_KEYS = ['retention.ms', 'retention.bytes'] as const;
const longer = (a: string, b: string) => (a === '-1' ? b !== '-1' : b !== '-1' && Number(a) > Number(b));

/**
 * What to change on an existing topic so it has at least Sluice's settings, never less: a longer
 * retention is raised to, a longer one kept; a different cleanup policy is refused (changing it
 * would delete or compact data someone relies on). `strict` (a scaled-time start) refuses to run
 * against a topic that keeps data longer than it expects instead of silently keeping it.
 */
export function reconcileTopicConfig(
  topic: string,
  existing: Record<string, string>,
  desired: Record<string, string>,
  strict: boolean,
): Record<string, string> {
  const alter: Record<string, string> = {};
  const want = desired['cleanup.policy'];
  if (want && existing['cleanup.policy'] && existing['cleanup.policy'] !== want) {
    throw new TopicSettingsError(
      `topic ${topic} has cleanup.policy=${existing['cleanup.policy']}, Sluice needs ${want}; ` +
        "Sluice does not change it: fix it with Kafka's tools or use another SLUICE_TOPIC_PREFIX",
    );
  }
  for (const key of RETENTION_KEYS) {
    const d = desired[key];
    const e = existing[key];
    if (d === undefined) continue;
    if (e === undefined || longer(d, e)) alter[key] = d;
    else if (longer(e, d) && strict) {
      throw new TopicSettingsError(
        `topic ${topic} keeps data longer (${key}=${e}) than this scaled-time start expects (${d}): ` +
          "it looks like a real deployment's topic. " +
          'Sluice never shortens it; start with SLUICE_TIME_SCALE=1 or use another SLUICE_TOPIC_PREFIX',
      );
    }
  }
  return alter;
}

/**
 * Creates missing topics with Sluice's settings and checks existing ones: retention is raised to
 * Sluice's when shorter, never lowered, and cleanup is never changed (reconcileTopicConfig).
 * `strict`: refuse topics that keep data longer than asked (a scaled-time start). Safe on every start.
 */
export async function ensureTopics(kafka: Kafka, specs: TopicSpec[], opts: { strict?: boolean } = {}): Promise<void> {
  await retryAdmin('creating topics', () => ensureTopicsOnce(kafka, specs, opts.strict ?? false));
}

async function ensureTopicsOnce(kafka: Kafka, specs: TopicSpec[], strict: boolean): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const missing = specs.filter((s) => !existing.has(s.name));
    if (missing.length > 0) {
      try {
        await admin.createTopics({
          waitForLeaders: true,
          topics: missing.map((s) => ({
            topic: s.name,
            numPartitions: s.partitions,
            replicationFactor: -1,
            configEntries: Object.entries(s.config).map(([name, value]) => ({ name, value })),
          })),
        });
      } catch (err) {
        // Another node may have created them at the same moment.
        if (!isTopicAlreadyExists(err)) throw err;
      }
    }
    const present = specs.filter((s) => existing.has(s.name));
    if (present.length > 0) {
      const described = await admin.describeConfigs({
        includeSynonyms: false,
        resources: present.map((s) => ({
          type: 2 /* ConfigResourceTypes.TOPIC */,
          name: s.name,
          configNames: ['cleanup.policy', ...RETENTION_KEYS],
        })),
      });
      const changes: { type: number; name: string; configEntries: { name: string; value: string }[] }[] = [];
      for (const s of present) {
        const res = described.resources.find((r) => r.resourceName === s.name);
        const current = Object.fromEntries((res?.configEntries ?? []).map((c) => [c.configName, c.configValue]));
        const alter = reconcileTopicConfig(s.name, current, s.config, strict);
        // alterConfigs replaces a topic's whole set of overrides: send the current ones with the change.
        if (Object.keys(alter).length > 0)
          changes.push({
            type: 2,
            name: s.name,
            configEntries: Object.entries({ ...current, ...s.config, ...alter, ...keepLonger(current, s.config) }).map(
              ([name, value]) => ({ name, value }),
            ),
          });
      }
      if (changes.length > 0) await admin.alterConfigs({ validateOnly: false, resources: changes });
    }
    // Leaders elected for every partition before anyone produces or consumes.
    const meta = await admin.fetchTopicMetadata({ topics: specs.map((s) => s.name) });
    const leaderless = meta.topics.filter((t) => t.partitions.some((p) => p.leader < 0)).map((t) => t.name);
    if (leaderless.length > 0) throw unavailable(`no leader yet for ${leaderless.join(', ')}`);
  } finally {
    await admin.disconnect();
  }
}

/** TOPIC_ALREADY_EXISTS, alone or for every topic of a createTopics request (kafkajs wraps it). */
function isTopicAlreadyExists(err: unknown): boolean {
  for (const e of causes(err)) {
    if (e instanceof KafkaJSAggregateError) return e.errors.length > 0 && e.errors.every(isTopicAlreadyExists);
    if (e instanceof KafkaJSProtocolError && e.type === 'TOPIC_ALREADY_EXISTS') return true;
  }
  return false;
}

export function endOffsets(kafka: Kafka, topics: string[]): Promise<Map<string, Map<number, bigint>>> {
  return retryAdmin('reading end offsets', () => endOffsetsOnce(kafka, topics));
}

async function endOffsetsOnce(kafka: Kafka, topics: string[]): Promise<Map<string, Map<number, bigint>>> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const out = new Map<string, Map<number, bigint>>();
    for (const topic of topics) {
      const offsets = await admin.fetchTopicOffsets(topic);
      out.set(topic, new Map(offsets.map((o) => [o.partition, BigInt(o.high)])));
    }
    return out;
  } finally {
    await admin.disconnect();
  }
}

export function consumer(kafka: Kafka, config: ConsumerConfig): Consumer {
  return kafka.consumer({ allowAutoTopicCreation: false, ...config });
}

export function headerString(headers: IHeaders | undefined, name: string): string | undefined {
  const v = headers?.[name];
  if (v === undefined) return undefined;
  const first = Array.isArray(v) ? v[0] : v;
  return first === undefined ? undefined : first.toString();
}
