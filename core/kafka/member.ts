/**
 * One kafkajs consumer-group member that outlives kafkajs giving it up. kafkajs restarts a
 * consumer by itself after a crash whose cause it calls retriable; after any other crash the
 * consumer is dead for good. A broker restart can end that way: while the restarted broker loads
 * its groups, the coordinator lookup fails with KafkaJSGroupCoordinatorNotFound, which kafkajs
 * deems not retriable, and a node's views (or its dispatcher, or its leadership) would stop there.
 * A failed write of the handler (an error without a `retriable` flag) ends the same way.
 *
 * `Member` then disconnects the dead consumer and builds a new one with the same settings and
 * listeners, after 0.5 s and then doubling waits up to 10 s, until one runs or the owner stops.
 * What the new consumer reads from is the owner's business: a GROUP_JOIN listener can seek.
 */
import type { ConsumerConfig, ConsumerRunConfig } from 'kafkajs';
import type { Kafka } from 'kafkajs';
import { consumer as newConsumer, type Consumer } from './client.ts';
import { doubling, retry } from '../retry.ts';
import { type FetchWait, registerFetchWait } from './fetch-wait.ts';

const FIRST_REBUILD_MS = 500;
const MAX_REBUILD_MS = 10_000;

export interface MemberOptions {
  config: ConsumerConfig;
  topics: string[];
  fromBeginning: boolean;
  run: ConsumerRunConfig;
  /** Adds the owner's listeners to every consumer built, before it connects. */
  listen?(c: Consumer): void;
  /** Every crash while running: whether kafkajs restarts the consumer itself, or it is rebuilt. */
  onCrash?(err: Error, kafkajsRestarts: boolean): void;
  /** A rebuild attempt failed; another follows. */
  onRebuildFailed?(err: Error): void;
  /** A new consumer runs in place of a dead one. */
  onRebuilt?(): void;
  /** Fetch waits decided fetch by fetch (core/kafka/fetch-wait.ts); else `config.maxWaitTimeInMs` always. */
  fetchWait?: FetchWait;
}

export class Member {
  private current: Consumer | null = null;
  private stopped = false;
  private rebuilding: Promise<void> | null = null;
  /** Ends a rebuild's wait at once: a stop does not sit out a backoff of up to 10 s. */
  private wake: (() => void) | null = null;
  private unregisterWait: (() => void) | null = null;
  /** Dead consumers replaced so far. */
  rebuilds = 0;

  constructor(
    private readonly kafka: Kafka,
    private readonly opts: MemberOptions,
  ) {}

  /** The running consumer (null before start); a different object after a rebuild. */
  get consumer(): Consumer | null {
    return this.current;
  }

  async start(): Promise<void> {
    if (this.opts.fetchWait && !this.unregisterWait)
      this.unregisterWait = registerFetchWait(this.opts.config.groupId, this.opts.fetchWait);
    const c = newConsumer(this.kafka, this.opts.config);
    c.on(c.events.CRASH, (e) => {
      if (this.stopped || this.current !== c) return;
      this.opts.onCrash?.(e.payload.error, e.payload.restart);
      if (!e.payload.restart) void this.rebuild();
    });
    this.opts.listen?.(c);
    this.current = c;
    await c.connect();
    await c.subscribe({ topics: this.opts.topics, fromBeginning: this.opts.fromBeginning });
    await c.run(this.opts.run);
  }

  /**
   * Drops the current consumer and builds new ones until one runs or the member stops; joins a
   * rebuild already under way.
   */
  private rebuild(): Promise<void> {
    if (this.rebuilding) return this.rebuilding;
    const dead = this.current;
    this.rebuilding = (async () => {
      this.rebuilds++;
      await dead?.disconnect().catch(() => {});
      await this.sleep(FIRST_REBUILD_MS);
      if (this.stopped) return;
      await retry(
        () =>
          this.start().catch(async (err) => {
            await this.current?.disconnect().catch(() => {});
            throw err;
          }),
        {
          backoff: doubling(2 * FIRST_REBUILD_MS, MAX_REBUILD_MS),
          isRetriable: () => true,
          stopped: () => this.stopped,
          sleep: (ms) => this.sleep(ms),
          onRetry: (err) => this.opts.onRebuildFailed?.(err as Error),
        },
      ).then(
        () => this.opts.onRebuilt?.(),
        () => {}, // gave up: stopped
      );
    })().finally(() => {
      this.rebuilding = null;
    });
    return this.rebuilding;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.rebuilding?.catch(() => {});
    await this.current?.disconnect().catch(() => {});
    this.unregisterWait?.();
    this.unregisterWait = null;
  }
}
