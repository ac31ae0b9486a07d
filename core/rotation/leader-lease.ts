/**
 * Kafka-native leadership: every candidate joins one consumer group over the single-partition
 * `sluice.control` topic, and whoever the group assigns partition 0 leads. A rebalance (a node
 * joins, leaves or misses its session) revokes before it reassigns, so leadership moves without a
 * second store; `isLeader` drops the moment a rebalance starts.
 */
import type { Kafka } from 'kafkajs';
import { consumer, type Consumer } from '../kafka/client.ts';

export class LeaderLease {
  private readonly consumer: Consumer;
  private leading = false;
  constructor(
    kafka: Kafka,
    private readonly topic: string,
    groupId: string,
  ) {
    this.consumer = consumer(kafka, {
      groupId,
      sessionTimeout: 10_000,
      rebalanceTimeout: 10_000,
      heartbeatInterval: 1000,
      maxWaitTimeInMs: 500,
      retry: { retries: Number.MAX_SAFE_INTEGER, initialRetryTime: 200, maxRetryTime: 2000 },
    });
    this.consumer.on(this.consumer.events.GROUP_JOIN, (e) => {
      this.leading = (e.payload.memberAssignment[this.topic] ?? []).includes(0);
    });
    const lose = () => {
      this.leading = false;
    };
    this.consumer.on(this.consumer.events.REBALANCING, lose);
    this.consumer.on(this.consumer.events.CRASH, lose);
    this.consumer.on(this.consumer.events.DISCONNECT, lose);
    this.consumer.on(this.consumer.events.STOP, lose);
  }

  get isLeader(): boolean {
    return this.leading;
  }

  async start(): Promise<void> {
    await this.consumer.connect();
    await this.consumer.subscribe({ topic: this.topic, fromBeginning: false });
    await this.consumer.run({ autoCommit: false, eachMessage: async () => {} });
  }

  async stop(): Promise<void> {
    this.leading = false;
    await this.consumer.disconnect().catch(() => {});
  }
}
