/**
 * Every node keeps views of the state topics. One consumer per node reads them (a group of its
 * own, so every node sees every record; the bursty DLQ and audit topics through a second member,
 * `apart`, so their batches never hold back the others), so that a revocation written anywhere
 * reaches this node in milliseconds. `start()` resolves once the views caught up to the
 * end offsets seen at start: a node does not serve before that.
 *
 * In-memory views read their topics from the beginning at every start. Stored views (StoredView:
 * endpoints, DLQ, audit; on an ingress, the attempt history and event type counts, read by a
 * second StateConsumer into a store of their own: cli/assemble.ts) keep their data on disk: a
 * batch of their records is applied in one store transaction together with the next offset, and
 * at start (and at every group join) the consumer seeks their partitions to the stored offsets,
 * so only the tail is read.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { setImmediate } from 'node:timers/promises';
import type { Batch, Kafka, IHeaders } from 'kafkajs';
import { isTransientKafkaError, rackOf, type Consumer } from './client.ts';
import { endOffsets, retryAdmin } from './topic-admin.ts';
import { Member } from './member.ts';
import type { FetchWait } from './fetch-wait.ts';
import { ViewStore } from '../store/view-store.ts';
import { ViewChanges } from './view-changes.ts';
import { unavailable } from '../errors.ts';

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

/**
 * A view kept in a ViewStore: its records are applied inside store transactions and it resumes from the stored offsets.
 */
export interface StoredView extends StateView {
  /** Called once, before any record, with the store the view keeps its data in. */
  attach(store: ViewStore): void;
  /**
   * Its topic is compacted: a delete there is a tombstone that compaction drops one day later
   * (Kafka's delete.retention.ms), so a store that stopped reading longer ago may have missed one.
   */
  readonly compacted?: boolean;
}

export function isStored(v: StateView): v is StoredView {
  return typeof (v as StoredView).attach === 'function';
}

export interface StateConsumerOptions {
  groupPrefix: string;
  maxWaitMs?: number;
  /**
   * Gather records while they stream: once a batch came within the last `2 × waitMs`, a fetch
   * answers when `minBytes` are there or after `waitMs`; otherwise it waits `maxWaitMs` for any
   * record (minBytes 1), so the first record after a quiet spell is read at once. Without it every
   * fetch answers at the first record.
   */
  batching?: { minBytes: number; waitMs: number };
  /** start() fails when catching up makes no progress for this long (not a bound on a long catch-up). */
  readyTimeoutMs?: number;
  onError?: (err: Error) => void;
  /** A crash kafkajs retries by itself (an expected start-up or failover condition). */
  onTransient?: (err: Error) => void;
  /** Called every few seconds while catching up at start, with the records left and in all. */
  onProgress?: (left: bigint, total: bigint) => void;
  /**
   * Where the stored views keep their data. Without one they get a temporary store that stays
   * readable after stop() and vanishes with the process (for one-off readers such as `sluice audit verify`).
   */
  store?: ViewStore;
  /** A consumer kafkajs gave up on was replaced by a new one (see core/kafka/member.ts). */
  onRebuilt?: () => void;
  /** Where this consumer announces applied batches (default: its own); share one to wait on several consumers. */
  changes?: ViewChanges;
  /**
   * What counts as contact with Kafka for the fail-closed check: any answered fetch (default), or
   * only a heartbeat read back (`heard()`, core/kafka/heartbeat.ts), for nodes reading a local replica.
   */
  freshness?: 'fetch' | 'heartbeat';
  /**
   * Topics read by a second group member of their own: kafkajs fetches again only once every batch
   * of the last fetch is applied, so a burst on a busy stored topic (2,000 DLQ replay markers took
   * 5-20 s to apply beside a busy dispatcher) would hold back the other topics, revocations
   * included, and the node would fail closed. Contact with Kafka counts from the first member.
   */
  apart?: string[];
  /**
   * The first member's heartbeat (default 1 s): a heartbeat that finds the group's coordinator gone
   * looks it up again (core/kafka/coordinator-patch.ts), so it bounds how long a node that must stay
   * in contact with Kafka reads nothing after a coordinator's broker dies. A view only people read
   * can beat every 3 s, a third of the 10 s session, and cost an idle node fewer requests.
   */
  contactHeartbeatMs?: number;
  /**
   * Whether the node fails closed when its views lose Kafka (an ingress; the default). A node that
   * does not (a dispatcher only) needs no contact: its first member waits and beats like the
   * member apart, two wake-ups a second less; a record still ends a wait at once.
   */
  failClosed?: boolean;
}

/** The fetch wait of the member reading the topics set apart. */
export const APART_WAIT_MS = 5000;

/**
 * How long one store transaction may hold the event loop once the node serves (see eachBatch).
 * A commit costs more than a record: 2,000 DLQ entries applied in 1 ms slices took 414 commits at
 * 262 µs an entry on a quiet machine, in 4 ms slices 68 commits at 151 µs (and a loaded machine
 * pays each commit, and each turn of the event loop between slices, several times over).
 */
const STORED_SLICE_MS = 4;
/**
 * A store not written for this long is rebuilt when it holds a compacted topic's view: half of
 * Kafka's default delete.retention.ms (24 h), the least time a tombstone is kept once compacted.
 */
export const COMPACTED_STORE_FRESH_MS = 12 * 3600_000;
const PROGRESS_EVERY_MS = 5000;

export class StateConsumer {
  /** The member reading the topics not set apart (whose fetches count as contact), then the one reading those. */
  private readonly members: Member[] = [];
  private readonly views = new Map<string, StateView[]>();
  private pending = new Map<string, bigint>(); // "topic:partition" -> end offset still to reach
  private readyResolve: (() => void) | null = null;
  /** The first member's fetch wait and heartbeat (ms): what an idle node pays for contact. */
  readonly contact: { fetchWaitMs: number; heartbeatMs: number };
  /** The member apart's (and, in a node that does not fail closed, the first member's too). */
  private readonly apartWaits: { fetchWaitMs: number; heartbeatMs: number };
  /** Last time a fetch answered (even empty): the fail-closed check reads this. */
  lastContactAt = 0;
  ready = false;
  private stopped = false;
  /** The batches being applied (one per member at most), which stop() lets finish. */
  private readonly applying = new Set<Promise<void>>();
  /** Next offset to read per "topic:partition", past control records too (read_committed). */
  private readonly positions = new Map<string, bigint>();
  /** The store of the stored views (null: none among the views). */
  private readonly store: ViewStore | null;
  private readonly storedTopics = new Set<string>();
  /** Per stored "topic:partition": where reading resumes (the stored offset, never below the earliest one). */
  private readonly resumeAt = new Map<string, { topic: string; partition: number; from: bigint }>();
  private readonly appliedCounts = new Map<string, number>();
  /** Announced after every applied batch and moved position: how waiters for a write learn of it. */
  readonly changes: ViewChanges;

  constructor(
    private readonly kafka: Kafka,
    views: StateView[],
    private readonly opts: StateConsumerOptions,
  ) {
    this.changes = opts.changes ?? new ViewChanges();
    const waitMs = opts.maxWaitMs ?? 20;
    this.apartWaits = { fetchWaitMs: Math.max(waitMs, APART_WAIT_MS), heartbeatMs: 3000 };
    this.contact =
      opts.failClosed === false
        ? this.apartWaits
        : { fetchWaitMs: waitMs, heartbeatMs: opts.contactHeartbeatMs ?? 1000 };
    for (const v of views) this.views.set(v.topic, [...(this.views.get(v.topic) ?? []), v]);
    const stored = views.filter(isStored);
    this.store = stored.length === 0 ? null : (opts.store ?? ViewStore.temporary());
    for (const v of stored) {
      // An in-memory view on a stored topic would miss everything before the stored offset.
      if (!this.views.get(v.topic)!.every(isStored))
        throw new Error(`topic ${v.topic} mixes stored and in-memory views`);
      this.storedTopics.add(v.topic);
      v.attach(this.store!);
    }
    const apart = new Set((opts.apart ?? []).filter((topic) => this.views.has(topic)));
    const groups = [[...this.views.keys()].filter((topic) => !apart.has(topic)), [...apart]].filter(
      (g) => g.length > 0,
    );
    const id = `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
    groups.forEach((topics, i) => {
      const contact = i === 0;
      const member = new Member(kafka, {
        config: {
          groupId: `${opts.groupPrefix}-view-${contact ? '' : 'apart-'}${id}`,
          // The member apart counts no contact, so its idle fetches can wait longer (a record ends the
          // wait at once): what an idle node pays for it is a fetch every 5 s and a heartbeat every 3 s.
          maxWaitTimeInMs: (contact ? this.contact : this.apartWaits).fetchWaitMs,
          // In a region (SLUICE_KAFKA_RACK), read the replica there: the brokers' rack-aware selector picks it.
          ...(rackOf(kafka) ? { rackId: rackOf(kafka)! } : {}),
          minBytes: 1,
          // kafkajs decodes a whole fetch at once: 1 MB (its default) of DLQ records held the event
          // loop ~5 ms, and the decoded batch outlived young collections while applied in slices.
          maxBytesPerPartition: 512 * 1024,
          sessionTimeout: 10_000,
          heartbeatInterval: (contact ? this.contact : this.apartWaits).heartbeatMs,
          retry: { retries: Number.MAX_SAFE_INTEGER, initialRetryTime: 100, maxRetryTime: 2000 },
        },
        topics,
        fromBeginning: true,
        run: { autoCommit: false, eachBatchAutoResolve: true, eachBatch: ({ batch }) => this.eachBatch(batch) },
        listen: (c) => this.listen(c, new Set(topics), contact),
        ...(contact && opts.batching ? { fetchWait: this.batchingWait(opts.batching) } : {}),
        onCrash: (err, kafkajsRestarts) => {
          if (this.stopped) return;
          // A coordinator still loading, a leader being elected: kafkajs retries these by itself.
          if (kafkajsRestarts && isTransientKafkaError(err)) opts.onTransient?.(err);
          else opts.onError?.(err);
        },
        onRebuildFailed: (err) => opts.onError?.(err),
        onRebuilt: () => opts.onRebuilt?.(),
      });
      this.members.push(member);
    });
  }

  /** When a batch of records last came (the batching option's clock). */
  private recordsAt = Number.NEGATIVE_INFINITY;

  private batchingWait(batching: { minBytes: number; waitMs: number }): FetchWait {
    const streaming = () => Date.now() - this.recordsAt < 2 * batching.waitMs;
    return {
      busyMs: batching.waitMs,
      idleMs: Math.max(this.contact.fetchWaitMs, batching.waitMs),
      busy: streaming,
      minBytes: () => (streaming() ? batching.minBytes : 1),
    };
  }

  private listen(c: Consumer, topics: Set<string>, contact: boolean): void {
    c.on(c.events.FETCH, () => {
      if (contact && this.opts.freshness !== 'heartbeat') this.lastContactAt = Date.now();
    });
    // END_BATCH_PROCESS also fires for batches of only transaction markers, which eachBatch never sees.
    c.on(c.events.END_BATCH_PROCESS, (e) => {
      const { topic, partition, lastOffset } = e.payload;
      if (this.opts.batching) this.recordsAt = Date.now();
      if (this.advance(`${topic}:${partition}`, BigInt(lastOffset) + 1n)) this.changes.announce();
    });
    // A join comes before the first fetch of an assignment. Without these seeks a rejoin, or a
    // consumer rebuilt after a crash, would read every partition from the beginning again (no
    // offsets are committed): stored views resume from their stored offsets, the others from
    // where this node had read.
    c.on(c.events.GROUP_JOIN, () => {
      for (const { topic, partition, from } of this.resumeAt.values()) {
        if (!topics.has(topic)) continue;
        const next = this.store!.offset(topic, partition);
        c.seek({ topic, partition, offset: String(next > from ? next : from) });
      }
      for (const [key, next] of this.positions) {
        const [topic, partition] = splitKey(key);
        if (topics.has(topic) && !this.storedTopics.has(topic) && next > 0n)
          c.seek({ topic, partition, offset: String(next) });
      }
    });
  }

  async start(): Promise<void> {
    const topics = [...this.views.keys()];
    const ends = await endOffsets(this.kafka, topics);
    await this.planResume(ends);
    for (const [topic, parts] of ends) {
      for (const [p, end] of parts) {
        const key = `${topic}:${p}`;
        const from = this.resumeAt.get(key)?.from ?? 0n;
        if (from > 0n) this.positions.set(key, from);
        if (end > from) this.pending.set(key, end);
      }
    }
    const readyPromise = new Promise<void>((resolve) => {
      this.readyResolve = resolve;
    });
    this.checkReady();
    await Promise.all(this.members.map((m) => m.start()));
    await this.untilCaughtUp(readyPromise);
  }

  private eachBatch(batch: Batch): Promise<void> {
    // A fetch answered after stop() is dropped: the views keep what they read until then.
    if (this.stopped) return Promise.resolve();
    const applying = this.apply(batch).finally(() => this.applying.delete(applying));
    this.applying.add(applying);
    return applying;
  }

  private async apply(batch: Batch): Promise<void> {
    const records: StateRecord[] = batch.messages.map((m) => ({
      topic: batch.topic,
      partition: batch.partition,
      offset: m.offset,
      key: m.key?.toString() ?? '',
      value: m.value,
      headers: m.headers ?? {},
      timestamp: Number(m.timestamp),
    }));
    if (!this.storedTopics.has(batch.topic)) this.applyAll(batch.topic, records);
    else {
      // Once serving, a batch is applied in slices of about STORED_SLICE_MS, each its own
      // transaction, and the event loop turns between slices (the store commits synchronously),
      // so the requests waiting behind a batch are served between its slices. Records differ in
      // cost (a DLQ entry ~25 µs, a record of attempt reports far more): a count would not bound
      // the time. While catching up at start, whole batches (fewer commits) are faster.
      // A failed transaction fails the batch: the consumer is rebuilt and resumes at the stored offset.
      for (let i = 0; i < records.length; ) {
        const serving = this.ready;
        const until = serving ? performance.now() + STORED_SLICE_MS : Number.POSITIVE_INFINITY;
        const from = i;
        i = await this.store!.transaction(() => this.applyStored(batch.topic, batch.partition, records, from, until));
        if (serving && i < records.length) {
          this.changes.announce(); // waiters see the slice (a long batch is progress, not a stall)
          await setImmediate();
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
    this.changes.announce();
  }

  /**
   * Waits for `ready`. A start with millions of records to apply takes as long as it takes, with
   * progress reported; it fails only when reading stalls (no position moved for readyTimeoutMs).
   */
  private async untilCaughtUp(ready: Promise<void>): Promise<void> {
    const stallMs = this.opts.readyTimeoutMs ?? 60_000;
    const total = this.recordsLeft();
    let last = total;
    let lastMoveAt = Date.now();
    let timer: NodeJS.Timeout | undefined;
    const stalled = new Promise<void>((_, reject) => {
      const tick = () => {
        const left = this.recordsLeft();
        if (left < last) [last, lastMoveAt] = [left, Date.now()];
        if (Date.now() - lastMoveAt > stallMs) {
          const where = [...this.pending.keys()].join(', ');
          const stalled = `state views made no progress for ${stallMs} ms while catching up`;
          reject(unavailable(`${stalled} (${left} records left in ${where})`));
          return;
        }
        if (left > 0n) this.opts.onProgress?.(left, total);
        timer = setTimeout(tick, Math.min(PROGRESS_EVERY_MS, stallMs));
      };
      timer = setTimeout(tick, Math.min(PROGRESS_EVERY_MS, stallMs));
    });
    await Promise.race([ready, stalled]).finally(() => clearTimeout(timer));
  }

  /** Records still to apply before this node is ready (transaction markers count as records). */
  private recordsLeft(): bigint {
    let left = 0n;
    for (const [key, end] of this.pending) {
      const at = this.positions.get(key) ?? 0n;
      if (end > at) left += end - at;
    }
    return left;
  }

  /**
   * Where each stored partition resumes: its stored offset, or the earliest offset when retention
   * removed records since. The store is emptied and every view rebuilt when it is ahead of a
   * topic's end (it belongs to an older topic of that name, deleted and created again), or when it
   * holds a compacted topic's view and was last written longer ago than COMPACTED_STORE_FRESH_MS.
   */
  private async planResume(ends: Map<string, Map<number, bigint>>): Promise<void> {
    if (this.storedTopics.size === 0) return;
    const earliest = await earliestOffsets(this.kafka, [...this.storedTopics]);
    const stored = (topic: string, p: number) => this.store!.offset(topic, p);
    const recreated = [...this.storedTopics].some((topic) =>
      [...(ends.get(topic) ?? [])].some(([p, end]) => stored(topic, p) > end),
    );
    const writtenAt = this.store!.writtenAt();
    const compacted = [...this.views.values()].some((vs) => vs.some((v) => isStored(v) && v.compacted));
    const tooOld = compacted && writtenAt !== null && Date.now() - writtenAt > COMPACTED_STORE_FRESH_MS;
    if (recreated || tooOld) this.store!.clear();
    for (const topic of this.storedTopics) {
      for (const [partition, low] of earliest.get(topic) ?? []) {
        const next = stored(topic, partition);
        this.resumeAt.set(`${topic}:${partition}`, { topic, partition, from: next > low ? next : low });
      }
    }
  }

  private applyAll(topic: string, records: StateRecord[]): void {
    const views = this.views.get(topic) ?? [];
    for (const record of records) this.applyOne(views, record);
    this.appliedCounts.set(topic, (this.appliedCounts.get(topic) ?? 0) + records.length);
  }

  private applyOne(views: StateView[], record: StateRecord): void {
    for (const v of views) {
      try {
        v.apply(record);
      } catch (err) {
        this.opts.onError?.(err as Error);
      }
    }
  }

  /**
   * Inside a store transaction: applies `records` from index `from` on, skipping those applied
   * already (a seek may come after a first fetch), until `until` (performance.now()) has passed
   * after a record; stores the next offset. Returns the index to go on from.
   */
  private applyStored(topic: string, partition: number, records: StateRecord[], from: number, until: number): number {
    const views = this.views.get(topic) ?? [];
    const next = this.store!.offset(topic, partition);
    let i = from;
    let applied = 0;
    let last: StateRecord | null = null;
    while (i < records.length) {
      const record = records[i++];
      if (BigInt(record.offset) < next) continue;
      this.applyOne(views, record);
      applied++;
      last = record;
      if (performance.now() >= until) break;
    }
    if (last) {
      this.store!.setOffset(topic, partition, BigInt(last.offset) + 1n);
      this.appliedCounts.set(topic, (this.appliedCounts.get(topic) ?? 0) + applied);
    }
    return i;
  }

  /**
   * Records applied to the views of `topic` since start (a stored view resumed from its offset applies only the tail).
   */
  applied(topic: string): number {
    return this.appliedCounts.get(topic) ?? 0;
  }

  /** Moves a partition's position forward; true when it moved. */
  private advance(key: string, next: bigint): boolean {
    const moved = next > (this.positions.get(key) ?? 0n);
    if (moved) this.positions.set(key, next);
    // A partition that ends in transaction markers is caught up without eachBatch seeing its end.
    const end = this.pending.get(key);
    if (end !== undefined && next >= end) {
      this.pending.delete(key);
      this.checkReady();
    }
    return moved;
  }

  /** The next offset this consumer will read on a partition (0 before the first batch). */
  position(topic: string, partition: number): bigint {
    return this.positions.get(`${topic}:${partition}`) ?? 0n;
  }

  /**
   * Resolves true once this consumer has read a partition up to `offset` (its next offset is at
   * least that), false when `timeoutMs` passed first: how a caller waits for its own or another
   * node's write to reach this node's views.
   */
  reached(topic: string, partition: number, offset: bigint | number, timeoutMs: number): Promise<boolean> {
    const want = BigInt(offset);
    return this.changes.until(() => this.position(topic, partition) >= want, timeoutMs);
  }

  /** In heartbeat freshness: everything committed before `sentAt` has been read (core/kafka/heartbeat.ts). */
  heard(sentAt: number): void {
    if (sentAt > this.lastContactAt) this.lastContactAt = sentAt;
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

  /** Consumers rebuilt after kafkajs gave one up. */
  get rebuilds(): number {
    return this.members.reduce((n, m) => n + m.rebuilds, 0);
  }

  /**
   * Stops following the topics; the views keep what they read. A member leaves its group only once
   * its fetch in flight is answered (up to its wait: 3-5 s when idle), and a view consumer commits
   * nothing in a group of its own, so waiting for that buys nothing: the leave goes on behind, a
   * batch answered meanwhile is dropped, and stop() waits only for a batch being applied. The
   * owner lets go of the client's sockets after (core/kafka/client.ts `releasableKafka`), so the
   * leave does not keep a process that is done alive either.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const m of this.members) m.stop().catch(() => {});
    await Promise.allSettled(this.applying);
  }
}

async function earliestOffsets(kafka: Kafka, topics: string[]): Promise<Map<string, Map<number, bigint>>> {
  return retryAdmin('reading earliest offsets', async () => {
    const admin = kafka.admin();
    await admin.connect();
    try {
      const out = new Map<string, Map<number, bigint>>();
      for (const topic of topics)
        out.set(topic, new Map((await admin.fetchTopicOffsets(topic)).map((o) => [o.partition, BigInt(o.low)])));
      return out;
    } finally {
      await admin.disconnect();
    }
  });
}

function splitKey(key: string): [string, number] {
  const at = key.lastIndexOf(':');
  return [key.slice(0, at), Number(key.slice(at + 1))];
}

export function parseJson<T>(value: Buffer | null): T | null {
  if (value === null) return null;
  return JSON.parse(value.toString('utf8')) as T;
}
