/**
 * The lane consumer: one group over `sluice.lanes`, where the deliveries of endpoints with a rate
 * limit, an in-flight limit or `ordering: key` travel keyed by endpoint id. Each partition has one
 * owner in the cluster, so the owner's LaneScheduler (lane-scheduler.ts) enforces the endpoint's
 * limits and order for every dispatcher at once (dispatcher/delivery-policy.ts).
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
import type { EachBatchPayload, IHeaders } from '../core/kafka/client.ts';
import type { Metrics } from '../core/metrics.ts';
import { parseDeliveryRecord } from '../core/webhooks/deliveries.ts';
import { isOrdered, isWaiting, spacingMs } from './delivery-policy.ts';
import type { DeliveryRecord } from '../core/webhooks/records.ts';
import { GroupConsumer, OffsetTracker, rejoinSettleMs } from './consume.ts';
import type { DeliveryConsumer } from './delivery-consumer.ts';
import { hold, type Outcome } from './ladder.ts';
import { LaneScheduler, type LaneJob, type LaneStep } from './lane-scheduler.ts';
import { attemptAt, clockOf, isOutcome, never, precheck, type Stage } from './process.ts';
import type { OutcomeRecorder } from './record.ts';
import { PauseTimers } from './rungs.ts';
import { consumed, consuming } from '../core/tracing.ts';
import type { EndpointRecord } from '../core/webhooks/records.ts';

/** Deliveries one tenant may hold in memory only to wait (paused or PENDING ordered endpoints). */
export function waitAllowance(buffer: number): number {
  return Math.max(16, Math.floor(buffer / 64));
}

export interface LaneConsumer extends DeliveryConsumer {
  lanes: LaneScheduler;
  /** An endpoint changed: its lane looks again, and what was left in Kafka may be read again. */
  wake(endpointId: string): void;
}

/** Records of one partition left in Kafka: from which offset, and whose. */
interface LeftBehind {
  from: number;
  /** endpoint id → tenant id */
  endpoints: Map<string, string>;
}

/** Whether the endpoint's deliveries would only wait here now (ordered, and paused or PENDING). */
const waitsHere = (ep: EndpointRecord | undefined) => ep !== undefined && isOrdered(ep) && isWaiting(ep);

export function laneConsumer(stage: Stage, recorder: OutcomeRecorder, metrics: Metrics): LaneConsumer {
  const { ctx } = stage;
  const config = ctx.config;
  const topic = ctx.topics.lanes;
  const groupId = `${config.topicPrefix}.dispatch-lanes`;
  const left = new Map<number, LeftBehind>();
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
  let tracker!: OffsetTracker;

  const finish = async (o: Outcome): Promise<void> => {
    await recorder.record(o);
  };

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
      done(finish(o));
      return { done: true };
    };
    return {
      endpointId: rec.endpoint_id,
      tenantId: rec.tenant_id,
      key: ordered ? (rec.event.ordering_key ?? null) : null,
      origin,
      waiting,
      async run() {
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
        const a = await attemptAt(stage, cur, ep, span?.ctx);
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
        if (reason === 'gone') done(finish({ kind: 'dropped', rec: cur, reason: 'endpoint-deleted' }));
        else done(finish(hold(cur, heldSince, 0, clockOf(ctx), ctx.endpoints.get(cur.endpoint_id)?.paused === true)));
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
  const handle = async (rec: DeliveryRecord | null, origin: string, headers: IHeaders | undefined): Promise<void> => {
    if (rec === null) return finish({ kind: 'dropped', rec: null, reason: 'malformed' });
    // A copy of an attempt made here (recent-attempts.ts) is not sent again.
    if (stage.recent.repeats(rec)) return finish({ kind: 'dropped', rec, reason: 'duplicate' });
    let first = precheck(ctx, rec, null, true);
    // An endpoint this view does not know yet: wait until it has read as far as the fan-out had.
    if (
      isOutcome(first) &&
      first.kind === 'dropped' &&
      (await ctx.state.reached(ctx.topics.endpoints, 0, rec.endpoints_at ?? 0, 10_000))
    )
      first = precheck(ctx, rec, null, true);
    const ordered = !isOutcome(first) || first.kind === 'held' ? isOrdered(ctx.endpoints.get(rec.endpoint_id)!) : false;
    // Without order a waiting endpoint's delivery waits on the hold rung (in Kafka), not here.
    if (isOutcome(first) && !(first.kind === 'held' && ordered)) return finish(first);
    const waiting = isOutcome(first) && first.kind === 'held';
    const span = consuming(topic, headers, rec);
    return new Promise<void>((resolve) => {
      lanes.submit(job(rec, origin, ordered, waiting, span, (p) => void p.then(resolve)));
    });
  };

  /** Leaves the record in Kafka: unfinished, with every later record of its endpoint in this partition. */
  const leave = (partition: number, offset: string, rec: DeliveryRecord) => {
    tracker.leave(topic, partition, offset);
    let l = left.get(partition);
    if (!l) {
      l = { from: Number(offset), endpoints: new Map() };
      left.set(partition, l);
    }
    l.from = Math.min(l.from, Number(offset));
    l.endpoints.set(rec.endpoint_id, rec.tenant_id);
    metrics.laneRecordsLeft.inc();
  };

  function rereadWhereRoom(): void {
    for (const [partition, l] of left) {
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
      left.delete(partition);
      member.seek(topic, partition, l.from);
      metrics.laneRereads.inc();
    }
  }

  /** Whether this record may be held in memory now, or must be left in Kafka for later. */
  const mayHold = (partition: number, rec: DeliveryRecord): boolean => {
    if (left.get(partition)?.endpoints.has(rec.endpoint_id)) return false;
    const ep = ctx.endpoints.get(rec.endpoint_id);
    return ep === undefined || ep.tenant_id !== rec.tenant_id || lanes.admits(rec.tenant_id, waitsHere(ep));
  };

  const eachBatch = async (p: EachBatchPayload): Promise<void> => {
    const { batch } = p;
    const { partition } = batch;
    // A partition new here: first learn which of its offsets the last owner finished.
    const loading = tracker.ready(topic, partition);
    if (loading) await loading;
    for (let i = 0; i < batch.messages.length; i++) {
      if (!p.isRunning() || p.isStale()) return;
      // A backstop only: tenants over their share are left in Kafka one by one (below), so this
      // takes more tenants than the buffer has room for to reach.
      if (lanes.buffered >= 2 * config.dispatchBuffer) {
        lanes.whenBelow(config.dispatchBuffer, p.pause());
        metrics.backpressurePauses.inc({ topic: 'lanes' });
        return;
      }
      const m = batch.messages[i];
      const rec = parseDeliveryRecord(m.value);
      // The policy this record is handled under is at least the one its fan-out matched with
      // (a PATCH that made the endpoint ordered is seen before its first ordered delivery). Waited
      // for here, in the partition's order, so records never overtake each other.
      const seen = rec?.endpoints_at ?? 0;
      if (seen > 0 && ctx.state.position(ctx.topics.endpoints, 0) < BigInt(seen))
        await ctx.state.reached(ctx.topics.endpoints, 0, seen, 10_000);
      if (tracker.accept(topic, partition, m.offset)) {
        if (rec !== null && !mayHold(partition, rec)) leave(partition, m.offset, rec);
        else
          void handle(rec, `${topic}\0${partition}`, m.headers).then(() => tracker.finish(topic, partition, m.offset));
      }
      p.resolveOffset(m.offset);
      if (i % 500 === 499) await p.heartbeat();
    }
  };

  const member = new GroupConsumer(ctx.kafka, ctx.log, {
    groupId,
    topics: [topic],
    metrics,
    maxWaitTimeInMs: 100,
    idleWaitMs: config.idleFetchWaitMs,
    // Records left in Kafka are read again by a seek, which waits for the fetch in flight.
    busy: () => left.size > 0,
    sessionTimeoutMs: config.dispatchSessionTimeoutMs,
    partitionsConsumedConcurrently: config.topicPartitions,
    eachBatch,
    // As the delivery consumers: nothing starts during a rebalance, and what a moved partition
    // had queued here is left to its next owner.
    onRebalancing: () => {
      lanes.freeze();
      stage.scheduler.freeze(groupId);
    },
    beforeRejoin: () =>
      tracker.settle(rejoinSettleMs(config.dispatchSessionTimeoutMs), () => stage.scheduler.active === 0),
    onAssignment: (assigned) => {
      const gone = tracker.retain(assigned);
      // Their tickets in the process scheduler go too (counted once, as lane deliveries).
      const dropped = gone.size > 0 ? lanes.dropQueued(gone) : 0;
      if (gone.size > 0) stage.scheduler.dropQueued(gone);
      for (const key of gone) left.delete(Number(key.slice(key.indexOf('\0') + 1)));
      lanes.thaw();
      stage.scheduler.thaw(groupId);
      metrics.rebalanceDropped.inc(dropped);
    },
  });
  tracker = new OffsetTracker(member, { freezes: stage.scheduler });
  const timers = new PauseTimers();
  return {
    member,
    tracker,
    timers,
    lanes,
    wake(endpointId) {
      lanes.wake(endpointId);
      checkLeft();
    },
    async stop(drainMs) {
      member.pauseAll();
      if (checkTimer) clearTimeout(checkTimer);
      left.clear();
      stage.scheduler.thaw(groupId);
      await tracker.drain(drainMs);
      lanes.close();
      await member.stop();
    },
  };
}
