/**
 * Appends to the hash chains (one per tenant, entry.ts) from any number of processes without
 * forking them (docs/decisions.md, "Audit chain with several writers"). Every writer uses the same
 * Kafka transactional id, so the one that initialises last fences all others: a writer that still
 * holds its epoch knows nobody else appended since it read the tails, and a fenced writer's commit
 * fails, it re-initialises (fencing the others in turn), re-reads the tails and retries.
 */
import type { Kafka, Producer, Admin } from '../kafka/client.ts';
import type { Clock } from '../clock.ts';
import type { StateConsumer } from '../kafka/state-consumer.ts';
import type { Logger } from '../log.ts';
import { unavailable } from '../errors.ts';
import { retry } from '../retry.ts';
import { newId } from '../secrets.ts';
import { GENESIS_HASH, sealEntry, type AuditEntry, type ChainLink } from './entry.ts';
import type { AuditView } from './audit-view.ts';

export interface AuditInput {
  tenant_id: string;
  actor: string;
  action: string;
  subject: string;
  reason?: string | null;
}

export interface AppendedEntry {
  id: string;
  seq: number;
  hash: string;
}

/** A record committed in the audit entry's transaction: both land, or neither. */
export interface AlongWithAudit {
  topic: string;
  key: string;
  value: string;
}

export interface AuditWriterDeps {
  kafka: Kafka;
  topic: string;
  transactionalId: string;
  view: AuditView;
  state: StateConsumer;
  clock: Clock;
  log: Logger;
}

const ATTEMPTS = 10;
const CATCH_UP_MS = 10_000;
/** Entries one transaction takes at most (each ~300 bytes, with what it accounts for). */
const MAX_GROUP = 100;

interface PendingAppend {
  input: AuditInput;
  along?: (entry: AppendedEntry) => AlongWithAudit[];
  id: string;
  resolve: (entry: AppendedEntry) => void;
  reject: (err: unknown) => void;
}

export class AuditWriter {
  private producer: Producer | null = null;
  private admin: Admin | null = null;
  /**
   * Whether this writer holds the chains (its epoch is unfenced and its view had read the whole
   * log when it claimed them), and the tails of the tenants it appended to since: valid only then.
   */
  private claimed = false;
  private readonly tails = new Map<string, ChainLink>();
  /** Appends waiting for the transaction in flight; the next transaction takes all of them. */
  private pending: PendingAppend[] = [];
  private flushing: Promise<void> | null = null;
  private closed = false;

  constructor(private readonly deps: AuditWriterDeps) {}

  /**
   * Appends one entry and resolves once this node's audit view
   * shows it; concurrent calls in one process are serialised.
   */
  async append(input: AuditInput): Promise<AppendedEntry> {
    const { entry, visible } = await this.appendCommitted(input);
    await visible;
    return entry;
  }

  /**
   * Resolves once Kafka committed the entry (what "audit entry first" needs before the write it
   * accounts for), with `visible` resolving once this node's view shows it: a caller overlaps its
   * next write with that wait instead of queueing behind it. Only the transactions are serialised:
   * entries asked for while one is in flight are committed together in the next (group commit: a
   * transaction costs several round trips to the coordinator, the same for one entry or fifty).
   */
  appendCommitted(
    input: AuditInput,
    along?: (entry: AppendedEntry) => AlongWithAudit[],
  ): Promise<{ entry: AppendedEntry; visible: Promise<void> }> {
    if (this.closed) return Promise.reject(unavailable('the audit log did not take the entry: closed'));
    const committed = new Promise<AppendedEntry>((resolve, reject) => {
      this.pending.push({ input, along, id: newId('aud'), resolve, reject });
    });
    this.flushing ??= this.flush();
    return committed.then((entry) => {
      const visible = this.waitVisible(entry.id);
      visible.catch(() => {}); // observed by the caller; never an unhandled rejection here
      return { entry, visible };
    });
  }

  private async flush(): Promise<void> {
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0, MAX_GROUP);
      try {
        const entries = await this.appendNow(batch);
        for (const [i, p] of batch.entries()) p.resolve(entries[i]);
      } catch (err) {
        for (const p of batch) p.reject(err);
      }
    }
    this.flushing = null;
  }

  /**
   * Commits the batch's entries, in order, in one transaction. `along` names the records each
   * entry accounts for, committed in its transaction (each attempt asks again, so what it builds
   * belongs to the attempt that commits).
   */
  private async appendNow(batch: PendingAppend[]): Promise<AppendedEntry[]> {
    const { view, clock, topic } = this.deps;
    const at = new Date(clock.now()).toISOString();
    if (this.closed) throw unavailable('the audit log did not take the entry: closed');
    const once = async (): Promise<AppendedEntry[]> => {
      if (!this.producer || !this.claimed) await this.claim();
      // An earlier attempt may have committed before its acknowledgement was lost: all of the
      // batch then, as one transaction.
      const done = batch.map((p) => view.get(p.id));
      if (done.every((d) => d !== undefined))
        return batch.map((p, i) => ({ id: p.id, seq: done[i]!.seq, hash: done[i]!.hash }));
      if (done.some((d) => d !== undefined))
        throw unavailable('the audit view shows part of a transaction: reading on');
      // Once claimed, only this writer appends: the view, which had read the whole log then, knows
      // each tenant's tail up to this writer's own appends, and those are in `tails`.
      const tails = new Map(this.tails);
      const appended: AppendedEntry[] = [];
      const byTopic = new Map<string, { key: string; value: string }[]>([[topic, []]]);
      for (const { id, input, along } of batch) {
        const { tenant_id, actor, action, subject } = input;
        const tail = tails.get(tenant_id) ?? view.tenantTail(tenant_id) ?? { seq: 0, hash: GENESIS_HASH };
        const reason = input.reason ?? null;
        const entry: AuditEntry = sealEntry(
          { id, seq: tail.seq + 1, at, tenant_id, actor, action, subject, reason },
          tail.hash,
        );
        tails.set(tenant_id, { seq: entry.seq, hash: entry.hash });
        const one = { id, seq: entry.seq, hash: entry.hash };
        appended.push(one);
        byTopic.get(topic)!.push({ key: entry.tenant_id, value: JSON.stringify(entry) });
        for (const r of along?.(one) ?? []) {
          if (!byTopic.has(r.topic)) byTopic.set(r.topic, []);
          byTopic.get(r.topic)!.push({ key: r.key, value: r.value });
        }
      }
      const topicMessages = [...byTopic].map(([t, messages]) => ({ topic: t, messages }));
      const tx = await this.producer!.transaction();
      try {
        await tx.sendBatch({ acks: -1, topicMessages });
        await tx.commit();
      } catch (err) {
        await tx.abort().catch(() => {});
        throw err;
      }
      for (const [tenant, tail] of tails) this.tails.set(tenant, tail);
      return appended;
    };
    try {
      // Any failure (fenced, coordinator moved, broker gone) is met the same way: drop the
      // producer, claim the chain again and re-read its tail. Hence every failure is retried.
      const dropOnFailure = () =>
        once().catch(async (err) => {
          await this.drop();
          throw err;
        });
      return await retry(dropOnFailure, {
        attempts: ATTEMPTS,
        isRetriable: () => true,
        stopped: () => this.closed,
        // Writers that fenced each other back off by different amounts so one of them gets through.
        backoff: (n) => 10 + Math.random() * 40 * (n + 1),
        onRetry: (err, n) => this.deps.log.debug('audit append retry', { attempt: n, error: (err as Error).message }),
      });
    } catch (err) {
      throw unavailable(`the audit log did not take the entry: ${(err as Error).message}`, err);
    }
  }

  /** Becomes the writer (fencing every other one) and waits until its view read the log to its end. */
  private async claim(): Promise<void> {
    const { kafka, transactionalId, state, topic } = this.deps;
    const producer = kafka.producer({
      transactionalId,
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
      transactionTimeout: 30_000,
      // kafkajs backs off 300 ms on CONCURRENT_TRANSACTIONS by default: far too long here.
      retry: { initialRetryTime: 5, maxRetryTime: 200, retries: 25 },
    });
    await producer.connect();
    this.producer = producer;
    // kafkajs sends the transactional InitProducerId (which bumps the epoch, fencing every other
    // writer, and settles any transaction they left open) on the first transaction(), not on
    // connect(): open and abort an empty one so the fence is up before the tail is read.
    const fence = await producer.transaction();
    await fence.abort();
    if (!this.admin) {
      this.admin = kafka.admin();
      await this.admin.connect();
    }
    const offsets = await this.admin.fetchTopicOffsets(topic);
    const end = BigInt(offsets.find((o) => o.partition === 0)?.high ?? '0');
    if (!(await state.reached(topic, 0, end, CATCH_UP_MS))) {
      throw unavailable(`the audit view did not reach offset ${end} within ${CATCH_UP_MS} ms`);
    }
    this.tails.clear();
    this.claimed = true;
  }

  private async waitVisible(id: string): Promise<void> {
    const shown = await this.deps.state.changes.until(() => this.deps.view.get(id) !== undefined, CATCH_UP_MS);
    if (!shown) {
      const late = `did not become visible within ${CATCH_UP_MS} ms in this node's view`;
      throw unavailable(`the audit entry was committed but ${late}`);
    }
  }

  private async drop(): Promise<void> {
    const p = this.producer;
    this.producer = null;
    this.claimed = false;
    this.tails.clear();
    await p?.disconnect().catch(() => {});
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.flushing;
    await this.drop();
    await this.admin?.disconnect().catch(() => {});
    this.admin = null;
  }
}
