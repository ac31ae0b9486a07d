/**
 * Consumer plumbing shared by the fan-out, the delivery consumer and the rung consumer:
 *
 * - `GroupConsumer`: one consumer group member (autoCommit off, eachBatch), rebuilt when kafkajs
 *   gives it up (core/kafka/member.ts).
 * - `OffsetTracker`: deliveries finish out of order; the committed offset of a partition is the
 *   lowest one whose outcome is not yet durable, so a crash repeats deliveries and never loses one;
 *   beside it goes the set of offsets finished beyond it (offset-map.ts), which the partition's
 *   next owner skips: a crash repeats what was in flight, not all that a slow delivery held back.
 */
import { waitUntil } from '../core/poll.ts';
import type { EachBatchPayload, Kafka } from '../core/kafka/client.ts';
import { isTransientKafkaError } from '../core/kafka/client.ts';
import { keptAdmin, type KeptAdmin } from '../core/kafka/kept-admin.ts';
import { beforeRejoin } from '../core/kafka/rejoin-patch.ts';
import { Member } from '../core/kafka/member.ts';
import { type CommittedOffset, committedOffsets } from '../core/kafka/topic-admin.ts';
import { decodeFinished, encodeFinished } from './offset-map.ts';
import type { Logger } from '../core/log.ts';
import type { Metrics } from '../core/metrics.ts';

export interface GroupConsumerOptions {
  groupId: string;
  topics: string[];
  /** Where the consumer lag per partition is reported (as of each fetched batch). */
  metrics?: Metrics;
  /** A fetch's wait while something is expected soon (a partition paused, a re-read pending). */
  maxWaitTimeInMs?: number;
  /**
   * A fetch's wait while nothing is (SLUICE_IDLE_FETCH_WAIT_MS): a record ends it at once, so it
   * sets what an idle group costs, not latency (core/kafka/fetch-wait.ts). Unset: always the above.
   */
  idleWaitMs?: number;
  /** A re-read (seek) is pending: fetch with the short wait. */
  busy?(): boolean;
  /** Milliseconds until the owner resumes its paused partitions by itself, or null when it cannot say. */
  resumeInMs?(): number | null;
  /** The group's session timeout (SLUICE_DISPATCH_SESSION_TIMEOUT_MS); heartbeats go at a tenth of it. */
  sessionTimeoutMs: number;
  partitionsConsumedConcurrently?: number;
  /** Called when the group starts rebalancing (this member's partitions may be about to move). */
  onRebalancing?(): void;
  /**
   * Awaited before this member rejoins a rebalancing group (core/kafka/rejoin-patch.ts), while the
   * coordinator still takes its commits: finish and commit what is in flight, within its own bound.
   */
  beforeRejoin?(): Promise<void>;
  /** Called after every (re)join with the partitions this member now owns. */
  onAssignment?(assigned: Record<string, number[]>): void;
  /** Awaited by `stop` before the member leaves the group (its commits are still taken). */
  beforeStop?(): Promise<void>;
  eachBatch(payload: EachBatchPayload, member: GroupConsumer): Promise<void>;
}

export class GroupConsumer {
  private readonly member: Member;
  private unregisterRejoin: () => void = () => {};
  /** Reads the commits (committed): a partition's new owner waits for that answer. */
  private readonly admin: KeptAdmin;

  constructor(
    kafka: Kafka,
    readonly log: Logger,
    readonly opts: GroupConsumerOptions,
  ) {
    const group = opts.groupId;
    const busyMs = opts.maxWaitTimeInMs ?? 100;
    this.admin = keptAdmin(kafka);
    this.member = new Member(kafka, {
      config: {
        groupId: group,
        maxWaitTimeInMs: busyMs,
        sessionTimeout: opts.sessionTimeoutMs,
        heartbeatInterval: Math.round(opts.sessionTimeoutMs / 10),
        retry: { retries: 10, initialRetryTime: 200, maxRetryTime: 5000 },
      },
      ...(opts.idleWaitMs === undefined
        ? {}
        : {
            fetchWait: {
              busyMs,
              idleMs: Math.max(opts.idleWaitMs, busyMs),
              busy: opts.busy,
              resumeInMs: opts.resumeInMs,
            },
          }),
      topics: opts.topics,
      fromBeginning: true,
      listen: (c) => {
        c.on(c.events.REBALANCING, () => opts.onRebalancing?.());
        c.on(c.events.GROUP_JOIN, (e) => {
          // Who owns which partition, and since when: what a repeat after a rebalance is read against.
          log.info('joined the group', {
            group,
            member_id: e.payload.memberId,
            leader: e.payload.isLeader,
            took_ms: e.payload.duration,
            partitions: Object.entries(e.payload.memberAssignment)
              .map(([topic, ps]) => `${topic}:${ps.join(',')}`)
              .join(' '),
          });
          const hook = opts.beforeRejoin;
          if (hook) {
            this.unregisterRejoin();
            this.unregisterRejoin = beforeRejoin(e.payload.memberId, hook);
          }
          opts.onAssignment?.(e.payload.memberAssignment);
        });
      },
      run: {
        autoCommit: false,
        eachBatchAutoResolve: false,
        partitionsConsumedConcurrently: opts.partitionsConsumedConcurrently ?? 1,
        eachBatch: (payload) => {
          const { batch } = payload;
          opts.metrics?.consumerLag.set(
            { group, topic: batch.topic, partition: String(batch.partition) },
            Number(batch.offsetLag()),
          );
          return opts.eachBatch(payload, this);
        },
      },
      onCrash: (err, kafkajsRestarts) => {
        const fields = { group, error: err?.message, kafkajs_restarts: kafkajsRestarts };
        // What a starting broker or a new topic says (a coordinator loading, a leader being elected)
        // kafkajs retries by itself: said quietly. Anything else is an error.
        if (kafkajsRestarts && isTransientKafkaError(err))
          log.info('consumer restarting after a transient error', fields);
        else log.error('consumer crashed', fields);
      },
      onRebuildFailed: (err) => log.error('consumer restart failed', { group, error: err.message }),
      onRebuilt: () => log.info('consumer restarted', { group }),
    });
  }

  start(): Promise<void> {
    return this.member.start();
  }

  /** What this group committed for the given partitions (offset and metadata), keyed `topic\0partition`. */
  committed(partitions: Record<string, number[]>): Promise<Map<string, CommittedOffset>> {
    return this.admin.use((a) => committedOffsets(a, this.opts.groupId, partitions));
  }

  /**
   * Commits "next offset to read" per partition; true when it landed. A commit refused after a
   * rebalance is harmless (the records repeat).
   */
  async commit(
    offsets: Array<{ topic: string; partition: number; offset: string; metadata?: string }>,
  ): Promise<boolean> {
    const c = this.member.consumer;
    if (!c) return false;
    if (offsets.length === 0) return true;
    try {
      await c.commitOffsets(offsets);
      return true;
    } catch (err) {
      this.log.debug('offset commit refused', { group: this.opts.groupId, error: (err as Error).message });
      return false;
    }
  }

  /** Reads the partition again from `offset` (kafkajs marks the batches fetched before as stale). */
  seek(topic: string, partition: number, offset: number): void {
    this.member.consumer?.seek({ topic, partition, offset: String(offset) });
  }

  resume(topic: string, partition: number): void {
    this.member.consumer?.resume([{ topic, partitions: [partition] }]);
  }

  pauseAll(): void {
    this.member.consumer?.pause(this.opts.topics.map((topic) => ({ topic })));
  }

  async stop(): Promise<void> {
    await this.opts.beforeStop?.();
    this.unregisterRejoin();
    await this.member.stop();
    await this.admin.close();
  }
}

/**
 * How long a batch of a partition new here waits at most to learn which offsets its last owner
 * finished: a third of the session timeout, so the wait never costs the member its place, and at
 * most 10 s. Past it the partition starts without them (they are delivered again), which is logged.
 */
export function readCommitWaitMs(sessionTimeoutMs: number): number {
  return Math.min(10_000, Math.max(1000, Math.floor(sessionTimeoutMs / 3)));
}

/**
 * How long a member holds its rejoin for its attempts in flight to finish and be committed: every
 * other member waits meanwhile, and it sends no heartbeat, so a third of the session at most.
 */
export function rejoinSettleMs(sessionTimeoutMs: number): number {
  return Math.min(5000, Math.floor(sessionTimeoutMs / 3));
}

const RUNNING = 0;
const DONE = 1;
/** Handed out, then left in Kafka (lanes.ts: its tenant had no room); accepted again when re-read. */
const LEFT = 2;

/**
 * Offsets of one partition handed to delivery, in order; they finish in any order. Offsets are
 * numbers (Kafka's are below 2^53 in practice) and looked up in a map, so finishing is O(1).
 */
class PartitionWindow {
  private readonly pending = new Map<number, number>();
  /** The lowest offset handed out and not yet finished, or `next` when none is. */
  private low = -1;
  /** One past the highest offset handed out. */
  next = -1;
  committed = -1;
  /** Offsets left in Kafka (LEFT). */
  left = 0;

  /** Offsets under way (handed out, neither finished nor left). */
  get size(): number {
    return this.pending.size - this.left;
  }

  /** Offsets the last owner finished beyond its commit point (its commit's metadata), not read yet. */
  private readonly finishedBefore = new Set<number>();
  /** What was committed last (offset and metadata), so an unchanged window is not committed again. */
  committedMetadata = '';

  /**
   * False when this offset was already handed out (a refetch after a restart or rebalance), or was
   * finished by the partition's last owner; an offset left in Kafka is handed out again.
   */
  accept(offset: number): boolean {
    if (offset < this.next) {
      if (this.pending.get(offset) !== LEFT) return false;
      this.pending.set(offset, RUNNING);
      this.left--;
      return true;
    }
    if (this.pending.size === 0) this.low = offset;
    this.next = offset + 1;
    if (this.finishedBefore.delete(offset)) {
      this.pending.set(offset, DONE);
      this.advance();
      return false;
    }
    this.pending.set(offset, RUNNING);
    return true;
  }

  /** Offsets a previous owner finished beyond the commit point it left: skipped when read. */
  finishedEarlier(offsets: number[]): void {
    for (const o of offsets) if (o >= this.next) this.finishedBefore.add(o);
  }

  /** An accepted offset is not handled now: it is not finished (the commit stays below it) until read again. */
  leave(offset: number): void {
    if (this.pending.get(offset) !== RUNNING) return;
    this.pending.set(offset, LEFT);
    this.left++;
  }

  finish(offset: number): void {
    if (this.pending.get(offset) !== RUNNING) return;
    this.pending.set(offset, DONE);
    this.advance();
  }

  /** Moves `low` past finished offsets; gaps (compacted or skipped offsets) were never handed out. */
  private advance(): void {
    while (this.low < this.next) {
      const state = this.pending.get(this.low);
      if (state === RUNNING || state === LEFT) break;
      if (state === DONE) this.pending.delete(this.low);
      this.low++;
    }
  }

  /** The offset to commit: the lowest not yet durable, else one past the last handed out. */
  commitPoint(): number {
    return this.pending.size > 0 ? this.low : this.next;
  }

  /** The metadata committed with `point`: the offsets finished beyond it, here or by the last owner. */
  metadata(point: number): string {
    const done: number[] = [];
    for (const [offset, state] of this.pending) if (state === DONE && offset > point) done.push(offset);
    for (const o of this.finishedBefore) if (o > point) done.push(o);
    if (this.finishedBefore.size > 0) done.sort((a, b) => a - b);
    return encodeFinished(point, done);
  }
}

/**
 * How long finished deliveries may wait for a commit that lands before the tracker freezes the
 * scheduler (`freezes`): ten commit intervals and a slow round trip.
 */
export const COMMIT_STALL_MS = 1000;

/** What a stalled tracker holds back: the process's scheduler (freeze and thaw by a key). */
export interface Freezable {
  freeze(key: string): void;
  thaw(key: string): void;
}

export interface OffsetTrackerOptions {
  commitEveryMs?: number;
  /** COMMIT_STALL_MS unless a test says otherwise. */
  stallAfterMs?: number;
  /**
   * Frozen (under `<group>:commits`) once finished offsets have waited the stall time for a commit
   * that lands (the group's coordinator unreachable or moving), thawed once one lands: whatever a
   * consumer finishes while its commits fail is repeated by the partition's next owner, so going on
   * would turn a coordinator's failover into seconds of repeated deliveries (a region cut off:
   * every event of ten seconds delivered twice).
   */
  freezes?: Freezable;
}

export class OffsetTracker {
  private readonly windows = new Map<string, PartitionWindow>();
  /** Partitions new here whose last commit is being read. */
  private readonly loading = new Map<string, Promise<void>>();
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();
  private readonly commitEveryMs: number;
  /** Since when finished work has waited for a commit that lands (set per commit interval, not per finish). */
  private uncommittedSince: number | null = null;
  private stalled = false;
  /** Drained for a stop: no further commit is scheduled. */
  private stopped = false;
  private readonly stallKey: string;

  constructor(
    private readonly member: GroupConsumer,
    private readonly opts: OffsetTrackerOptions = {},
  ) {
    this.commitEveryMs = opts.commitEveryMs ?? 100;
    this.stallKey = `${member.opts.groupId}:commits`;
  }

  private window(topic: string, partition: number): PartitionWindow {
    const key = `${topic}\0${partition}`;
    let w = this.windows.get(key);
    if (!w) {
      w = new PartitionWindow();
      this.windows.set(key, w);
    }
    return w;
  }

  accept(topic: string, partition: number, offset: string): boolean {
    return this.window(topic, partition).accept(Number(offset));
  }

  /** The accepted offset is left in Kafka, to be read again (and accepted again) after a seek. */
  leave(topic: string, partition: number, offset: string): void {
    this.window(topic, partition).leave(Number(offset));
  }

  finish(topic: string, partition: number, offset: string): void {
    this.window(topic, partition).finish(Number(offset));
    this.scheduleFlush();
  }

  /** A commit within the interval; one that has waited the stall time for a landed commit freezes first. */
  private scheduleFlush(): void {
    if (this.timer !== null || this.stopped) return;
    this.uncommittedSince ??= Date.now();
    this.timer = setTimeout(() => {
      this.timer = null;
      const waited = this.uncommittedSince === null ? 0 : Date.now() - this.uncommittedSince;
      if (!this.stalled && this.opts.freezes && waited >= (this.opts.stallAfterMs ?? COMMIT_STALL_MS)) {
        this.stalled = true;
        this.member.log.warn('offset commits are not landing; no new attempt starts until one does', {
          group: this.member.opts.groupId,
          waited_ms: waited,
        });
        this.opts.freezes.freeze(this.stallKey);
      }
      void this.flush();
    }, this.commitEveryMs);
  }

  /**
   * Forgets the windows of partitions not in `assigned` and returns their keys (`topic\0partition`);
   * for partitions new here, reads what their last owner committed (`ready` waits for it).
   */
  retain(assigned: Record<string, number[]>): Set<string> {
    const keep = new Set(Object.entries(assigned).flatMap(([topic, ps]) => ps.map((p) => `${topic}\0${p}`)));
    const gone = new Set<string>();
    for (const key of this.windows.keys()) {
      if (keep.has(key)) continue;
      gone.add(key);
      this.windows.delete(key);
    }
    // A stall over work of partitions now gone ends at the next interval, with nothing left to wait on.
    if (gone.size > 0 && this.stalled) this.scheduleFlush();
    const fresh: Record<string, number[]> = {};
    const freshKeys: string[] = [];
    for (const key of keep) {
      if (this.windows.has(key)) continue;
      const [topic, partition] = key.split('\0');
      this.window(topic, Number(partition));
      fresh[topic] = [...(fresh[topic] ?? []), Number(partition)];
      freshKeys.push(key);
    }
    if (freshKeys.length > 0) {
      const loading = this.member
        .committed(fresh)
        .then((committed) => {
          for (const [key, c] of committed) {
            const w = this.windows.get(key);
            if (w) w.finishedEarlier(decodeFinished(c.offset, c.metadata));
          }
        })
        // Unread, nothing is skipped: the records are only delivered again.
        .catch((err: Error) =>
          this.member.log.warn('the last commit of new partitions could not be read; finished deliveries repeat', {
            group: this.member.opts.groupId,
            partitions: freshKeys.length,
            error: err.message,
          }),
        )
        .finally(() => {
          for (const key of freshKeys) if (this.loading.get(key) === bounded) this.loading.delete(key);
        });
      // A batch waits for it at most readCommitWaitMs: a slow answer (a coordinator busy with a
      // rebalance) must not hold the partition towards the session timeout. What arrives later
      // still applies to the offsets not read by then (finishedEarlier keeps only those).
      const waitMs = readCommitWaitMs(this.member.opts.sessionTimeoutMs);
      const bounded = new Promise<void>((resolve) => {
        const late = setTimeout(() => {
          this.member.log.warn('partitions start before their last commit was read; finished deliveries repeat', {
            group: this.member.opts.groupId,
            partitions: freshKeys.length,
            waited_ms: waitMs,
          });
          resolve();
        }, waitMs).unref();
        void loading.then(() => {
          clearTimeout(late);
          resolve();
        });
      });
      for (const key of freshKeys) this.loading.set(key, bounded);
    }
    return gone;
  }

  /** Resolves once the partition's last commit has been read (at once when it has). */
  ready(topic: string, partition: number): Promise<void> | undefined {
    return this.loading.get(`${topic}\0${partition}`);
  }

  get pending(): number {
    let n = 0;
    for (const w of this.windows.values()) n += w.size;
    return n;
  }

  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      const offsets: Array<{ topic: string; partition: number; offset: string; metadata: string }> = [];
      const windows: PartitionWindow[] = [];
      for (const [key, w] of this.windows) {
        const point = w.commitPoint();
        if (point < 0 || point < w.committed) continue;
        const metadata = w.metadata(point);
        if (point === w.committed && metadata === w.committedMetadata) continue;
        const [topic, partition] = key.split('\0');
        offsets.push({ topic, partition: Number(partition), offset: point.toString(), metadata });
        windows.push(w);
      }
      // Nothing finished waits for a commit (all of it landed, or its partitions moved away).
      if (offsets.length === 0) {
        this.uncommittedSince = null;
        if (this.stalled) this.unstall();
        return;
      }
      if (!(await this.member.commit(offsets))) {
        // Tried again at the next interval, finished or not.
        this.scheduleFlush();
        return;
      }
      for (let i = 0; i < windows.length; i++) {
        windows[i].committed = Number(offsets[i].offset);
        windows[i].committedMetadata = offsets[i].metadata;
      }
      this.uncommittedSince = null;
      if (this.stalled) this.unstall();
    });
    return this.flushing;
  }

  /**
   * Before a rejoin: waits until `idle` (nothing in flight) or `timeoutMs`, then commits what
   * finished, while the coordinator still takes this generation's commits.
   */
  async settle(timeoutMs: number, idle: () => boolean): Promise<void> {
    await waitUntil(idle, timeoutMs);
    await this.flush();
  }

  private unstall(): void {
    this.stalled = false;
    this.member.log.info('offset commits land again', { group: this.member.opts.groupId });
    this.opts.freezes?.thaw(this.stallKey);
  }

  async drain(timeoutMs: number): Promise<void> {
    await waitUntil(() => this.pending === 0, timeoutMs);
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.flush();
    // Stopping: nothing more starts here anyway, and the scheduler is not held for a group that left.
    if (this.stalled) {
      this.stalled = false;
      this.opts.freezes?.thaw(this.stallKey);
    }
  }
}
