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

/** A producer whose `send` resolves only once Kafka acknowledged the write (acks=all, idempotent). */
export class DurableProducer {
  private readonly producer: Producer;
  private connected = false;
  constructor(kafka: Kafka) {
    this.producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false, retry: { retries: 10, initialRetryTime: 100 } });
  }
  async connect(): Promise<void> {
    await this.producer.connect();
    this.connected = true;
  }
  async send(topic: string, records: OutRecord[]): Promise<void> {
    if (!this.connected) throw new SluiceError('UNAVAILABLE', 'Kafka producer is not connected');
    try {
      await this.producer.send({ topic, acks: -1, messages: records.map((r) => ({ key: r.key, value: r.value, headers: r.headers })) });
    } catch (err) {
      throw new SluiceError('UNAVAILABLE', `Kafka did not accept the write: ${(err as Error).message}`, {}, { 'Retry-After': '1' });
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
