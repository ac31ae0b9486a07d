/**
 * Makes an outcome durable: a retry, a deferral or a hold is re-produced to its rung, a dead
 * letter to `sluice.dlq`; a delivery or a drop needs no write. Writes of concurrent outcomes are
 * gathered into one produce per topic (the producer splits them by bytes), and a failed produce is
 * retried until it succeeds or the dispatcher stops (the offset stays uncommitted meanwhile, so
 * nothing is lost either way). Every attempt is also reported on `sluice.attempts` for the
 * tenant's attempt history (noteAttempt), digested per endpoint and never waited for: the
 * history is for people reading it, and a delivery's offset does not wait on it.
 * A write Kafka refuses for good (too large) is never retried as it is: the batch
 * is split, and a single record that still cannot be written is logged, counted
 * (`sluice_outcome_write_failures_total`) and let go rather than stall its partition.
 */
import type { Context } from '../core/context.ts';
import { isPermanentWriteError } from '../core/kafka/client.ts';
import type { BestEffortProducer, OutRecord } from '../core/kafka/producers.ts';
import type { Metrics } from '../core/metrics.ts';
import { doubling, retry } from '../core/retry.ts';
import { producing, tracing, type TraceContext } from '../core/tracing.ts';
import type { Outcome } from './ladder.ts';
import type { AttemptRecord } from '../core/webhooks/attempt-history.ts';
import { DigestBuilder, type AttemptDigest } from '../core/webhooks/attempt-digest.ts';

export const HEADER_HELD_SINCE = 'sluice-held-since';
export const HEADER_DUE_AT = 'sluice-due-at';
export const HEADER_ATTEMPT = 'sluice-attempt';

interface Pending {
  record: OutRecord;
  resolve(): void;
}

/**
 * Attempts per record on the attempts topic (~250 B each): a node applies a record in one go,
 * ~6 µs an attempt, so 200 hold its event loop ~1 ms.
 */
const ATTEMPTS_PER_RECORD = 200;
/**
 * How long attempts are gathered into digests (attempt-digest.ts) before they are sent: an
 * endpoint busier than 20 attempts a window has a sample of 20 sent in full (newest failures
 * kept), the rest counted by minute. Sent one by one, the reports and their history
 * writes on every node cost more CPU than the deliveries themselves.
 */
const REPORTS_WINDOW_MS = 1000;
/** A window with attempts of this many endpoints is sent at once (a bound on what it holds). */
const WINDOW_MAX_ENDPOINTS = 2000;

/** What recording outcomes reads of the process's context. */
export type RecorderDeps = Pick<Context, 'clock' | 'log' | 'producer' | 'topics'>;

export class OutcomeRecorder {
  private readonly queues = new Map<string, Pending[]>();
  private scheduled = false;
  stopped = false;
  /** Where attempt reports go (a producer of their own); without one they are not reported. */
  reports: BestEffortProducer | null = null;
  private readonly digests = new DigestBuilder();
  private attemptsTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly ctx: RecorderDeps,
    private readonly metrics: Metrics,
  ) {}

  /** `trace`: the context of the delivery's consume span; the rung or DLQ record carries it on. */
  async record(o: Outcome, trace?: TraceContext): Promise<void> {
    this.metrics.delivery(o.kind);
    const t = this.ctx.topics;
    switch (o.kind) {
      case 'delivered':
        this.metrics.deliveryLatency.observe(Math.max(0, this.ctx.clock.now() - o.rec.event.created_at) / 1000);
        return;
      case 'dropped':
        return;
      case 'retry':
      case 'deferred':
        return this.write(t.retry(o.rung), trace, (h) => rungRecord(o.next.delivery_id, o.next, h));
      case 'forwarded':
        // Keyed by endpoint: the lane's one owner reads it (dispatcher/lanes.ts).
        return this.write(t.lanes, trace, (h) => ({
          key: o.next.endpoint_id,
          value: JSON.stringify(o.next),
          ...(h ? { headers: h } : {}),
        }));
      case 'held':
        return this.write(t.hold, trace, (h) =>
          rungRecord(o.next.delivery_id, o.next, { [HEADER_HELD_SINCE]: String(o.heldSince), ...h }),
        );
      case 'dead-letter':
        return this.write(t.dlq, trace, (h) => ({
          key: o.entry.tenant_id,
          value: JSON.stringify(o.entry),
          ...(h ? { headers: h } : {}),
        }));
    }
  }

  /**
   * Reports an attempt for the attempt history (core/webhooks/attempt-history.ts); best effort.
   * Attempts gathered over REPORTS_WINDOW_MS go out as digests, one per endpoint, several to a
   * record (ATTEMPTS_PER_RECORD attempts at most): every node that keeps the history reads them all.
   */
  noteAttempt(a: AttemptRecord): void {
    if (!this.reports) return;
    this.digests.add(a);
    if (this.digests.endpoints >= WINDOW_MAX_ENDPOINTS) this.flushReports();
    else if (!this.attemptsTimer) this.attemptsTimer = setTimeout(() => this.flushReports(), REPORTS_WINDOW_MS);
  }

  /** Hands the gathered digests to the producer now (at stop, before it disconnects). */
  flushReports(): void {
    clearTimeout(this.attemptsTimer ?? undefined);
    this.attemptsTimer = null;
    let record: AttemptDigest[] = [];
    let size = 0;
    const send = () => {
      if (record.length === 0) return;
      this.reports?.add(this.ctx.topics.attempts, { key: 'attempts', value: JSON.stringify(record) });
      record = [];
      size = 0;
    };
    for (const d of this.digests.take()) {
      if (size + d.attempts.length > ATTEMPTS_PER_RECORD) send();
      record.push(d);
      size += d.attempts.length;
    }
    send();
  }

  private write(
    topic: string,
    trace: TraceContext | undefined,
    make: (headers: Record<string, string> | undefined) => OutRecord,
  ): Promise<void> {
    if (!tracing.on || !trace) return this.enqueue(topic, make(undefined));
    return producing(topic, (h) => this.enqueue(topic, make(h)), trace);
  }

  private enqueue(topic: string, record: OutRecord): Promise<void> {
    return new Promise<void>((resolve) => {
      let q = this.queues.get(topic);
      if (!q) {
        q = [];
        this.queues.set(topic, q);
      }
      q.push({ record, resolve });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    this.scheduled = false;
    const batches = [...this.queues];
    this.queues.clear();
    await Promise.all(batches.map(([topic, items]) => this.send(topic, items)));
  }

  private async send(topic: string, items: Pending[]): Promise<void> {
    try {
      // The producer's failures are retriable (Kafka unavailable) or not (refused for good).
      await retry(
        () =>
          this.ctx.producer.send(
            topic,
            items.map((i) => i.record),
          ),
        {
          backoff: doubling(200, 5000),
          stopped: () => this.stopped,
          onRetry: (err) => {
            const error = (err as Error).message;
            this.ctx.log.error('could not record delivery outcomes; retrying', { topic, count: items.length, error });
          },
        },
      );
    } catch (err) {
      if (!isPermanentWriteError(err)) return; // stopped: left unresolved, their offsets stay uncommitted
      if (items.length > 1) {
        const half = Math.ceil(items.length / 2);
        await Promise.all([this.send(topic, items.slice(0, half)), this.send(topic, items.slice(half))]);
        return;
      }
      this.metrics.outcomeWriteFailures.inc({ topic });
      const fields = { topic, key: items[0].record.key, error: (err as Error).message };
      this.ctx.log.error('a delivery outcome cannot be written to Kafka (refused for good); it is dropped', fields);
    }
    for (const i of items) i.resolve();
  }
}

export function rungRecord(
  key: string,
  rec: { due_at: number; attempt: number },
  headers: Record<string, string> | undefined = {},
): OutRecord {
  return {
    key,
    value: JSON.stringify(rec),
    headers: { [HEADER_DUE_AT]: String(Math.round(rec.due_at)), [HEADER_ATTEMPT]: String(rec.attempt), ...headers },
  };
}
