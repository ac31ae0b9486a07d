/**
 * The one place that knows kafkajs: a client factory, an idempotent producer, topic creation.
 * Keeping it small lets another client replace kafkajs (see design/kafka-notes.md).
 */
import { Kafka, logLevel, type Producer, type Admin, type IHeaders, type Consumer, type ConsumerConfig } from 'kafkajs';
import type { TopicSpec } from '../topics.ts';
import { SluiceError } from '../errors.ts';

export type { Consumer, Producer, Admin, IHeaders };

export function createKafka(brokers: string[], clientId: string): Kafka {
  return new Kafka({
    clientId,
    brokers,
    logLevel: logLevel.NOTHING,
    retry: { initialRetryTime: 100, retries: 8, maxRetryTime: 5000 },
    connectionTimeout: 3000,
    requestTimeout: 10000,
  });
}

export interface OutRecord {
  key: string;
  value: string | null;
  headers?: Record<string, string>;
}

interface PendingSend {
  topic: string;
  records: OutRecord[];
  resolve: () => void;
  reject: (err: Error) => void;
}

/** Most records one produce request carries; the rest wait for the next. */
const MAX_BATCH_RECORDS = 2000;

/**
 * A producer whose `send` resolves only once Kafka acknowledged the write (acks=all, idempotent).
 * The idempotent producer allows one request in flight, so sends that arrive while one is in
 * flight are queued and go out together as the next request: one round trip for many callers,
 * in arrival order (so per-key order holds).
 */
export class DurableProducer {
  private readonly producer: Producer;
  private connected = false;
  private readonly queue: PendingSend[] = [];
  private flushing = false;
  constructor(kafka: Kafka) {
    this.producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false, retry: { retries: 10, initialRetryTime: 100 } });
  }
  async connect(): Promise<void> {
    await this.producer.connect();
    this.connected = true;
  }
  send(topic: string, records: OutRecord[]): Promise<void> {
    if (!this.connected) return Promise.reject(new SluiceError('UNAVAILABLE', 'Kafka producer is not connected', {}, { 'Retry-After': '1' }));
    if (records.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ topic, records, resolve, reject });
      void this.flush();
    });
  }
  private async flush(): Promise<void> {
    if (this.flushing) return;
    this.flushing = true;
    try {
      while (this.queue.length > 0) {
        const batch: PendingSend[] = [];
        let count = 0;
        while (this.queue.length > 0 && (batch.length === 0 || count + this.queue[0].records.length <= MAX_BATCH_RECORDS)) {
          const next = this.queue.shift()!;
          count += next.records.length;
          batch.push(next);
        }
        const byTopic = new Map<string, { key: string; value: string | null; headers?: Record<string, string> }[]>();
        for (const b of batch) {
          const list = byTopic.get(b.topic) ?? [];
          for (const r of b.records) list.push({ key: r.key, value: r.value, headers: r.headers });
          byTopic.set(b.topic, list);
        }
        try {
          await this.producer.sendBatch({ acks: -1, topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })) });
          for (const b of batch) b.resolve();
        } catch (err) {
          const e = new SluiceError('UNAVAILABLE', `Kafka did not accept the write: ${(err as Error).message}`, {}, { 'Retry-After': '1' });
          for (const b of batch) b.reject(e);
        }
      }
    } finally {
      this.flushing = false;
    }
  }
  async sendJson(topic: string, key: string, value: unknown, headers?: Record<string, string>): Promise<void> {
    await this.send(topic, [{ key, value: value === null ? null : JSON.stringify(value), headers }]);
  }
  async disconnect(): Promise<void> {
    this.connected = false;
    await this.producer.disconnect();
  }
}

/**
 * Retries an admin operation through the transient errors of a broker that has just started or
 * is electing leaders ("coordinator is loading", "not the leader for that topic-partition").
 */
export async function withRetry<T>(what: string, fn: () => Promise<T>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let delay = 100; ; delay = Math.min(delay * 2, 2000)) {
    try {
      return await fn();
    } catch (err) {
      const e = err as { retriable?: boolean; name?: string; message?: string };
      const transient = e.retriable === true || /leader|coordinator|not available|ECONNREFUSED|timeout|metadata/i.test(`${e.name} ${e.message}`);
      if (!transient || Date.now() + delay > deadline) throw new Error(`${what}: ${e.message ?? String(err)}`);
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}

/** Creates missing topics and aligns the config of existing ones; safe to run on every start. */
export async function ensureTopics(kafka: Kafka, specs: TopicSpec[]): Promise<void> {
  await withRetry('creating topics', () => ensureTopicsOnce(kafka, specs));
}

async function ensureTopicsOnce(kafka: Kafka, specs: TopicSpec[]): Promise<void> {
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
        if (!/already exists/i.test((err as Error).message)) throw err;
      }
    }
    const present = specs.filter((s) => existing.has(s.name));
    if (present.length > 0) {
      await admin.alterConfigs({
        validateOnly: false,
        resources: present.map((s) => ({
          type: 2, // ConfigResourceTypes.TOPIC
          name: s.name,
          configEntries: Object.entries(s.config).map(([name, value]) => ({ name, value })),
        })),
      });
    }
    // Leaders elected for every partition before anyone produces or consumes.
    const meta = await admin.fetchTopicMetadata({ topics: specs.map((s) => s.name) });
    const leaderless = meta.topics.filter((t) => t.partitions.some((p) => p.leader < 0)).map((t) => t.name);
    if (leaderless.length > 0) throw Object.assign(new Error(`no leader yet for ${leaderless.join(', ')}`), { retriable: true });
  } finally {
    await admin.disconnect();
  }
}

export function endOffsets(kafka: Kafka, topics: string[]): Promise<Map<string, Map<number, bigint>>> {
  return withRetry('reading end offsets', () => endOffsetsOnce(kafka, topics));
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
