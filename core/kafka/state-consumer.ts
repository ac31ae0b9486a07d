/**
 * Every node keeps in-memory views of the state topics. One consumer per node reads them all from
 * the beginning (a group of its own, so every node sees every record) with a short fetch wait, so
 * that a revocation written anywhere reaches this node in milliseconds. `start()` resolves once the
 * views caught up to the end offsets seen at start: a node does not serve before that.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Kafka, IHeaders } from 'kafkajs';
import { consumer, endOffsets, type Consumer } from './client.ts';

export interface StateRecord {
  topic: string;
  partition: number;
  offset: string;
  key: string;
  value: Buffer | null;
  headers: IHeaders;
  timestamp: number;
}

export interface StateView {
  readonly topic: string;
  apply(record: StateRecord): void;
}

export interface StateConsumerOptions {
  groupPrefix: string;
  maxWaitMs?: number;
  readyTimeoutMs?: number;
  onError?: (err: Error) => void;
}

export class StateConsumer {
  private readonly consumer: Consumer;
  private readonly views = new Map<string, StateView[]>();
  private pending = new Map<string, bigint>(); // "topic:partition" -> end offset still to reach
  private readyResolve: (() => void) | null = null;
  /** Last time a fetch answered (even empty): the fail-closed check reads this. */
  lastContactAt = 0;
  ready = false;
  private stopped = false;
  /** Next offset to read per "topic:partition", past control records too (read_committed). */
  private readonly positions = new Map<string, bigint>();

  constructor(private readonly kafka: Kafka, views: StateView[], private readonly opts: StateConsumerOptions) {
    for (const v of views) this.views.set(v.topic, [...(this.views.get(v.topic) ?? []), v]);
    this.consumer = consumer(kafka, {
      groupId: `${opts.groupPrefix}-view-${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`,
      maxWaitTimeInMs: opts.maxWaitMs ?? 20,
      sessionTimeout: 10_000,
      heartbeatInterval: 1000,
      retry: { retries: Number.MAX_SAFE_INTEGER, initialRetryTime: 100, maxRetryTime: 2000 },
    });
    this.consumer.on(this.consumer.events.FETCH, () => {
      this.lastContactAt = Date.now();
    });
    // END_BATCH_PROCESS also fires for batches of only transaction markers, which eachBatch never sees.
    this.consumer.on(this.consumer.events.END_BATCH_PROCESS, (e) => {
      const { topic, partition, lastOffset } = e.payload;
      this.advance(`${topic}:${partition}`, BigInt(lastOffset) + 1n);
    });
    this.consumer.on(this.consumer.events.CRASH, (e) => {
      if (!this.stopped) opts.onError?.(e.payload.error);
    });
  }

  async start(): Promise<void> {
    const topics = [...this.views.keys()];
    const ends = await endOffsets(this.kafka, topics);
    for (const [topic, parts] of ends) {
      for (const [p, end] of parts) if (end > 0n) this.pending.set(`${topic}:${p}`, end);
    }
    const readyPromise = new Promise<void>((resolve) => {
      this.readyResolve = resolve;
    });
    this.checkReady();
    await this.consumer.connect();
    for (const topic of topics) await this.consumer.subscribe({ topic, fromBeginning: true });
    await this.consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: true,
      eachBatch: async ({ batch }) => {
        const views = this.views.get(batch.topic) ?? [];
        for (const m of batch.messages) {
          const record: StateRecord = {
            topic: batch.topic,
            partition: batch.partition,
            offset: m.offset,
            key: m.key?.toString() ?? '',
            value: m.value,
            headers: m.headers ?? {},
            timestamp: Number(m.timestamp),
          };
          for (const v of views) {
            try {
              v.apply(record);
            } catch (err) {
              this.opts.onError?.(err as Error);
            }
          }
        }
        const key = `${batch.topic}:${batch.partition}`;
        if (batch.messages.length > 0) this.advance(key, BigInt(batch.messages[batch.messages.length - 1].offset) + 1n);
        const end = this.pending.get(key);
        if (end !== undefined && BigInt(batch.highWatermark) >= end && BigInt(batch.lastOffset()) + 1n >= end) {
          this.pending.delete(key);
          this.checkReady();
        }
      },
    });
    const timeout = this.opts.readyTimeoutMs ?? 60_000;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      readyPromise,
      new Promise<void>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`state views did not catch up within ${timeout} ms (left: ${[...this.pending.keys()].join(', ')})`)), timeout);
      }),
    ]).finally(() => clearTimeout(timer));
  }

  private advance(key: string, next: bigint): void {
    if (next > (this.positions.get(key) ?? 0n)) this.positions.set(key, next);
    // A partition that ends in transaction markers is caught up without eachBatch seeing its end.
    const end = this.pending.get(key);
    if (end !== undefined && next >= end) {
      this.pending.delete(key);
      this.checkReady();
    }
  }

  /** The next offset this consumer will read on a partition (0 before the first batch). */
  position(topic: string, partition: number): bigint {
    return this.positions.get(`${topic}:${partition}`) ?? 0n;
  }

  viewsOf(topic: string): readonly StateView[] {
    return this.views.get(topic) ?? [];
  }

  private checkReady(): void {
    if (this.pending.size === 0 && !this.ready) {
      this.ready = true;
      this.lastContactAt = Date.now();
      this.readyResolve?.();
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.consumer.disconnect();
  }
}

export function parseJson<T>(value: Buffer | null): T | null {
  if (value === null) return null;
  return JSON.parse(value.toString('utf8')) as T;
}
