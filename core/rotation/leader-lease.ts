/**
 * Kafka-native leadership: every candidate joins one consumer group over the single-partition
 * `sluice.control` topic, and whoever the group assigns partition 0 leads. A rebalance (a node
 * joins, leaves or misses its session) revokes before it reassigns, so leadership moves without a
 * second store; `isLeader` drops the moment a rebalance starts.
 */
import type { Kafka } from '../kafka/client.ts';
import { Member } from '../kafka/member.ts';

export class LeaderLease {
  private readonly member: Member;
  private leading = false;
  /**
   * `idleWaitMs`: a fetch's wait while nothing comes (SLUICE_IDLE_FETCH_WAIT_MS); records end it at
   * once. `wake` writes a record to `topic` that nothing reads: a stopping leader's leave waits
   * behind its fetch in flight (the broker answers a connection's requests in order), and a record
   * ends that fetch at once instead of after up to `idleWaitMs`.
   */
  constructor(
    kafka: Kafka,
    topic: string,
    groupId: string,
    idleWaitMs = 500,
    private readonly wake: () => Promise<void> = async () => {},
  ) {
    const lose = () => {
      this.leading = false;
    };
    this.member = new Member(kafka, {
      config: {
        groupId,
        // Rotation runs once every 30 days: leadership moving a few seconds late costs nothing, and
        // each heartbeat is a request on every node and the broker.
        sessionTimeout: 10_000,
        rebalanceTimeout: 10_000,
        heartbeatInterval: 3000,
        maxWaitTimeInMs: 500,
        retry: { retries: Number.MAX_SAFE_INTEGER, initialRetryTime: 200, maxRetryTime: 2000 },
      },
      // A third of the session timeout at most: heartbeats go between fetches. A follower has no
      // partition and fetches nothing: kafkajs sleeps the wait instead, which a stop sits out, so
      // it sleeps the short one (a timer, no request).
      fetchWait: {
        busyMs: 500,
        idleMs: Math.min(Math.max(idleWaitMs, 500), 3000),
        busy: () => !this.leading,
      },
      topics: [topic],
      fromBeginning: false,
      run: { autoCommit: false, eachMessage: async () => {} },
      // A dead lease consumer is rebuilt: without that a broker restart could leave no leader anywhere.
      listen: (c) => {
        c.on(c.events.GROUP_JOIN, (e) => {
          this.leading = (e.payload.memberAssignment[topic] ?? []).includes(0);
        });
        c.on(c.events.REBALANCING, lose);
        c.on(c.events.CRASH, lose);
        c.on(c.events.DISCONNECT, lose);
        c.on(c.events.STOP, lose);
      },
    });
  }

  get isLeader(): boolean {
    return this.leading;
  }

  start(): Promise<void> {
    return this.member.start();
  }

  async stop(): Promise<void> {
    const leading = this.leading;
    this.leading = false;
    const woken = leading ? this.wake().catch(() => {}) : Promise.resolve();
    await this.member.stop();
    await woken;
  }
}
