/**
 * The lane intake: what the delivery consumer (delivery-consumer.ts) does with a record of
 * `sluice.lanes`, where the deliveries of endpoints with a rate limit, an in-flight limit or
 * `ordering: key` travel keyed by endpoint id. Each partition has one owner in the cluster, so the
 * owner's LaneScheduler (lane-scheduler.ts) enforces the endpoint's limits and order for every
 * dispatcher at once (dispatcher/delivery-policy.ts).
 *
 * A delivery that fails:
 * - without order, goes up the retry ladder as any other (its rung forwards it back here when due);
 * - with an ordering key, stays at the head of its key and is tried again in place on the ladder's
 *   schedule, holding back that key's later deliveries until it succeeds or is dead-lettered.
 *   Its offset (and those after it) stay uncommitted meanwhile: after a crash the partition's next
 *   owner reads them again in order (duplicates, never an inversion).
 *
 * A paused or PENDING endpoint's deliveries wait on the hold rung, or, with order, here.
 *
 * What is held here is shared out by tenant (LaneScheduler.admits): a tenant over its share of the
 * buffer, or over its small allowance of deliveries that only wait, has its record *left in Kafka*:
 * its offset stays unfinished (so the commit stays below it) and so do the later records of that
 * endpoint in the partition (their order holds). Once the tenant has room again (or the endpoint
 * changes) the partition is read again from the first record left (a seek); records finished
 * meanwhile are skipped. The partition itself never stops for one tenant, so another tenant's lane
 * endpoints on it keep flowing.
 */
import type { IHeaders } from '../core/kafka/client.ts';
import type { Metrics } from '../core/metrics.ts';
import { isOrdered, isWaiting, spacingMs } from './delivery-policy.ts';
import type { DeliveryRecord, EndpointRecord } from '../core/webhooks/records.ts';
import { hold, type Outcome } from './ladder.ts';
import { LaneScheduler, type LaneJob, type LaneStep } from './lane-scheduler.ts';
import { attemptAt, clockOf, isOutcome, never, precheck, type Stage } from './process.ts';
import type { OutcomeRecorder } from './record.ts';
import { consumed, consuming, type TraceContext } from '../core/tracing.ts';

/** Deliveries one tenant may hold in memory only to wait (paused or PENDING ordered endpoints). */
export function waitAllowance(buffer: number): number {
  return Math.max(16, Math.floor(buffer / 64));
}

/** What the intake needs of the consumer that reads `sluice.lanes`. */
export interface LaneSource {
  /** Reads the partition again from `offset`. */
  seek(topic: string, partition: number, offset: number): void;
  /** The accepted offset is not handled now: it stays unfinished until read again. */
  leave(topic: string, partition: number, offset: string): void;
}

export interface LaneIntake {
  lanes: LaneScheduler;
  /** Binds the consumer that reads the lanes topic (once, when it is made). */
  bind(source: LaneSource): void;
  /** The backstop: false when the lane buffer is far past its size; `whenRoom` resumes then. */
  hasRoom(): boolean;
  whenRoom(resume: () => void): void;
  /**
   * Waits until the endpoint view has read as far as the record's fan-out had (a PATCH that made
   * the endpoint ordered is seen before its first ordered delivery); in the partition's order.
   */
  caughtUp(rec: DeliveryRecord | null): Promise<unknown> | undefined;
  /**
   * Takes an accepted record: resolves once it has a durable outcome, or returns null when the
   * record was left in Kafka (its tenant has no room) to be read again later.
   */
  take(
    topic: string,
    partition: number,
    offset: string,
    rec: DeliveryRecord | null,
    headers: IHeaders | undefined,
  ): Promise<void> | null;
  /** A re-read is pending: the consumer's fetches stay short. */
  busy(): boolean;
  /** An endpoint changed: its lane looks again, and what was left in Kafka may be read again. */
  wake(endpointId: string): void;
  freeze(): void;
  thaw(): void;
  /** Partitions went to another member: their queued jobs go, and what was left of them is forgotten. */
  dropQueued(gone: Set<string>): number;
  close(): void;
}

/** Records of one partition left in Kafka: from which offset, and whose. */
interface LeftBehind {
  topic: string;
  from: number;
  /** endpoint id → tenant id */
  endpoints: Map<string, string>;
}

/** Whether the endpoint's deliveries would only wait here now (ordered, and paused or PENDING). */
const waitsHere = (ep: EndpointRecord | undefined) => ep !== undefined && isOrdered(ep) && isWaiting(ep);

export function laneIntake(stage: Stage, recorder: OutcomeRecorder, metrics: Metrics): LaneIntake {
  const { ctx } = stage;
  const config = ctx.config;
  /** `topic\0partition` → what was left there. */
  const left = new Map<string, LeftBehind>();
  let source: LaneSource | null = null;
  let checkTimer: NodeJS.Timeout | null = null;
  /** Soon (coalesced): reads again each partition where someone whose records were left has room. */
  const checkLeft = () => {
    if (left.size === 0 || checkTimer !== null) return;
    checkTimer = setTimeout(() => {
      checkTimer = null;
      rereadWhereRoom();
    }, 20);
  };
  const lanes = new LaneScheduler({
    slots: stage.scheduler,
    maxBuffered: config.dispatchBuffer,
    waitAllowance: waitAllowance(config.dispatchBuffer),
    onRelease: checkLeft,
    now: () => ctx.clock.now(),
    recheckMs: Math.max(50, config.dispatchHoldRecheckMs / config.timeScale),
    policyOf(endpointId) {
      const ep = ctx.endpoints.get(endpointId);
      if (!ep) return null;
      return {
        spacingMs: spacingMs(ep),
        maxInFlight: ep.max_in_flight ?? config.dispatchPerEndpoint,
        ordered: isOrdered(ep),
        waiting: isWaiting(ep),
      };
    },
  });

  const finish = (o: Outcome, trace: TraceContext | undefined): Promise<void> => recorder.record(o, trace);

  /** The job of one lane delivery; `done` settles once its outcome is durable. */
  const job = (
    rec: DeliveryRecord,
    origin: string,
    ordered: boolean,
    waiting: boolean,
    span: ReturnType<typeof consuming>,
    done: (p: Promise<void>) => void,
  ): LaneJob => {
    let cur = rec;
    // A record read again after being left in Kafka has waited since it came (or the pause began).
    let heldSince: number | null = waiting ? waitingSince(rec) : null;
    const end = (o: Outcome): LaneStep => {
      consumed(span, o.kind);
      done(finish(o, span?.ctx));
      return { done: true };
    };
    return {
      endpointId: rec.endpoint_id,
      tenantId: rec.tenant_id,
      key: ordered ? (rec.event.ordering_key ?? null) : null,
      origin,
      waiting,
      async run(onRetryAfter) {
        if (stage.stopping) return never();
        const ep = precheck(ctx, cur, heldSince, true);
        if (isOutcome(ep)) {
          // Waiting (paused or PENDING) with order: stay at the head of the key and look again.
          if (ep.kind === 'held' && ordered) {
            heldSince = ep.heldSince;
            return { done: false, retryAt: ctx.clock.now() };
          }
          return end(ep);
        }
        heldSince = null;
        const a = await attemptAt(stage, cur, ep, span?.ctx, onRetryAfter);
        const o = a.outcome;
        if (o.kind === 'retry' && ordered && rec.event.ordering_key !== undefined) {
          // Retried in place: the key's later deliveries wait behind it.
          cur = o.next;
          return { done: false, retryAt: o.next.due_at, notBefore: a.notBefore, slow: a.slow };
        }
        const step = end(o);
        return { ...step, notBefore: a.notBefore, slow: a.slow };
      },
      expire(reason) {
        const o: Outcome =
          reason === 'gone'
            ? { kind: 'dropped', rec: cur, reason: 'endpoint-deleted' }
            : hold(cur, heldSince, 0, clockOf(ctx), ctx.endpoints.get(cur.endpoint_id)?.paused === true);
        consumed(span, o.kind);
        done(finish(o, span?.ctx));
      },
      waitedTooLong() {
        heldSince ??= ctx.clock.now();
        const ep = ctx.endpoints.get(cur.endpoint_id);
        return hold(cur, heldSince, 0, clockOf(ctx), ep?.paused === true).kind === 'dead-letter';
      },
    };
  };

  /** When a waiting delivery began to wait: when it came, or when its endpoint last changed (paused). */
  const waitingSince = (rec: DeliveryRecord): number => {
    const ep = ctx.endpoints.get(rec.endpoint_id);
    return Math.min(ctx.clock.now(), Math.max(rec.event.created_at, ep?.updated_at ?? 0));
  };

  /** Hands one lane record over; resolves once it has a durable outcome. */
  const handle = async (
    topic: string,
    rec: DeliveryRecord | null,
    origin: string,
    headers: IHeaders | undefined,
  ): Promise<void> => {
    if (rec === null) return finish({ kind: 'dropped', rec: null, reason: 'malformed' }, undefined);
    // A copy of an attempt made here (recent-attempts.ts) is not sent again.
    if (stage.recent.repeats(rec)) return finish({ kind: 'dropped', rec, reason: 'duplicate' }, undefined);
    let first = precheck(ctx, rec, null, true);
    // An endpoint this view does not know yet: wait until it has read as far as the fan-out had.
    if (
      isOutcome(first) &&
      first.kind === 'dropped' &&
      (await ctx.state.reached(ctx.topics.endpoints, 0, rec.endpoints_at ?? 0, 10_000))
    )
      first = precheck(ctx, rec, null, true);
    const ordered = !isOutcome(first) || first.kind === 'held' ? isOrdered(ctx.endpoints.get(rec.endpoint_id)!) : false;
    const span = consuming(topic, headers, rec);
    // Without order a waiting endpoint's delivery waits on the hold rung (in Kafka), not here.
    if (isOutcome(first) && !(first.kind === 'held' && ordered)) {
      consumed(span, first.kind);
      return finish(first, span?.ctx);
    }
    const waiting = isOutcome(first) && first.kind === 'held';
    return new Promise<void>((resolve) => {
      lanes.submit(job(rec, origin, ordered, waiting, span, (p) => void p.then(resolve)));
    });
  };

  /** Leaves the record in Kafka: unfinished, with every later record of its endpoint in this partition. */
  const leave = (topic: string, partition: number, offset: string, rec: DeliveryRecord) => {
    source?.leave(topic, partition, offset);
    const key = `${topic}\0${partition}`;
    let l = left.get(key);
    if (!l) {
      l = { topic, from: Number(offset), endpoints: new Map() };
      left.set(key, l);
    }
    l.from = Math.min(l.from, Number(offset));
    l.endpoints.set(rec.endpoint_id, rec.tenant_id);
    metrics.laneRecordsLeft.inc();
  };

  function rereadWhereRoom(): void {
    for (const [key, l] of left) {
      let room = false;
      for (const [endpointId, tenantId] of l.endpoints) {
        const ep = ctx.endpoints.get(endpointId);
        // Gone, or changed so that it no longer waits: read again (to drop or deliver what was left).
        if (ep === undefined || lanes.hasRoom(tenantId, waitsHere(ep))) {
          room = true;
          break;
        }
      }
      if (!room) continue;
      left.delete(key);
      source?.seek(l.topic, Number(key.slice(key.indexOf('\0') + 1)), l.from);
      metrics.laneRereads.inc();
    }
  }

  /** Whether this record may be held in memory now, or must be left in Kafka for later. */
  const mayHold = (key: string, rec: DeliveryRecord): boolean => {
    if (left.get(key)?.endpoints.has(rec.endpoint_id)) return false;
    const ep = ctx.endpoints.get(rec.endpoint_id);
    return ep === undefined || ep.tenant_id !== rec.tenant_id || lanes.admits(rec.tenant_id, waitsHere(ep));
  };

  return {
    lanes,
    bind(s) {
      source = s;
    },
    // A backstop only: tenants over their share are left in Kafka one by one (take), so this
    // takes more tenants than the buffer has room for to reach.
    hasRoom: () => lanes.buffered < 2 * config.dispatchBuffer,
    whenRoom: (resume) => lanes.whenBelow(config.dispatchBuffer, resume),
    caughtUp(rec) {
      const seen = rec?.endpoints_at ?? 0;
      if (seen > 0 && ctx.state.position(ctx.topics.endpoints, 0) < BigInt(seen))
        return ctx.state.reached(ctx.topics.endpoints, 0, seen, 10_000);
      return undefined;
    },
    take(topic, partition, offset, rec, headers) {
      const origin = `${topic}\0${partition}`;
      if (rec !== null && !mayHold(origin, rec)) {
        leave(topic, partition, offset, rec);
        return null;
      }
      return handle(topic, rec, origin, headers);
    },
    busy: () => left.size > 0,
    wake(endpointId) {
      lanes.wake(endpointId);
      checkLeft();
    },
    freeze: () => lanes.freeze(),
    thaw: () => lanes.thaw(),
    dropQueued(gone) {
      for (const key of gone) left.delete(key);
      return lanes.dropQueued(gone);
    },
    close() {
      if (checkTimer) clearTimeout(checkTimer);
      checkTimer = null;
      left.clear();
      lanes.close();
    },
  };
}
