/**
 * The lane consumer: one group over `sluice.lanes`, where the deliveries of endpoints with a rate
 * limit, an in-flight limit or `ordering: key` travel keyed by endpoint id. Each partition has one
 * owner in the cluster, so the owner's LaneScheduler (lane-scheduler.ts) enforces the endpoint's
 * limits and order for every dispatcher at once (core/webhooks/delivery-policy.ts).
 *
 * A delivery that fails:
 * - without order, goes up the retry ladder as any other (its rung forwards it back here when due);
 * - with an ordering key, stays at the head of its key and is tried again in place on the ladder's
 *   schedule, holding back that key's later deliveries until it succeeds or is dead-lettered.
 *   Its offset (and those after it) stay uncommitted meanwhile: after a crash the partition's next
 *   owner reads them again in order (duplicates, never an inversion).
 *
 * A paused or PENDING endpoint's deliveries wait on the hold rung, or, with order, here (bounded by
 * the buffer: a full buffer pauses the partitions, and the rest waits in Kafka).
 */
import type { EachBatchPayload } from 'kafkajs';
import { LruMap } from '../core/lru.ts';
import type { Metrics } from '../core/metrics.ts';
import { parseDeliveryRecord } from '../core/webhooks/deliveries.ts';
import { isOrdered, isWaiting, spacingMs } from '../core/webhooks/delivery-policy.ts';
import type { DeliveryRecord } from '../core/webhooks/records.ts';
import { GroupConsumer, OffsetTracker } from './consume.ts';
import type { DeliveryConsumer } from './delivery-consumer.ts';
import { hold, type Outcome } from './ladder.ts';
import { LaneScheduler, type LaneJob, type LaneStep } from './lane-scheduler.ts';
import { attemptAt, clockOf, isOutcome, never, precheck, type Stage } from './process.ts';
import type { OutcomeRecorder } from './record.ts';
import { PauseTimers } from './rungs.ts';

/** How many deliveries delivered here are remembered, so a repeated fan-out is not sent twice. */
const RECENT_DELIVERED = 100_000;

export interface LaneConsumer extends DeliveryConsumer {
  lanes: LaneScheduler;
}

export function laneConsumer(stage: Stage, recorder: OutcomeRecorder, metrics: Metrics): LaneConsumer {
  const { ctx } = stage;
  const config = ctx.config;
  const topic = ctx.topics.lanes;
  const groupId = `${config.topicPrefix}.dispatch-lanes`;
  const recent = new LruMap<string, true>(RECENT_DELIVERED);
  const lanes = new LaneScheduler({
    concurrency: config.dispatchConcurrency,
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
    if (o.kind === 'delivered') recent.set(o.rec.delivery_id, true);
    await recorder.record(o);
  };

  /** The job of one lane delivery; `done` settles once its outcome is durable. */
  const job = (rec: DeliveryRecord, origin: string, ordered: boolean, done: (p: Promise<void>) => void): LaneJob => {
    let cur = rec;
    let heldSince: number | null = null;
    const end = (o: Outcome): LaneStep => {
      done(finish(o));
      return { done: true };
    };
    return {
      endpointId: rec.endpoint_id,
      key: ordered ? (rec.event.ordering_key ?? null) : null,
      origin,
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
        const a = await attemptAt(stage, cur, ep, undefined);
        const o = a.outcome;
        if (o.kind === 'retry' && ordered && rec.event.ordering_key !== undefined) {
          // Retried in place: the key's later deliveries wait behind it.
          cur = o.next;
          return { done: false, retryAt: o.next.due_at, notBefore: a.notBefore };
        }
        const step = end(o);
        return { ...step, notBefore: a.notBefore };
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

  /** Hands one lane record over; resolves once it has a durable outcome. */
  const handle = async (rec: DeliveryRecord | null, origin: string): Promise<void> => {
    if (rec === null) return finish({ kind: 'dropped', rec: null, reason: 'malformed' });
    if (recent.get(rec.delivery_id)) return finish({ kind: 'dropped', rec, reason: 'duplicate' });
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
    return new Promise<void>((resolve) => {
      lanes.submit(job(rec, origin, ordered, (p) => void p.then(resolve)));
    });
  };

  const eachBatch = async (p: EachBatchPayload): Promise<void> => {
    const { batch } = p;
    const { partition } = batch;
    for (let i = 0; i < batch.messages.length; i++) {
      if (!p.isRunning() || p.isStale()) return;
      if (lanes.buffered >= config.dispatchBuffer) {
        // Backpressure: the rest waits in Kafka until the lanes have drained to half.
        lanes.whenBelow(config.dispatchBuffer / 2, p.pause());
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
        void handle(rec, `${topic}\0${partition}`).then(() => tracker.finish(topic, partition, m.offset));
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
    sessionTimeoutMs: config.dispatchSessionTimeoutMs,
    partitionsConsumedConcurrently: config.topicPartitions,
    eachBatch,
    // As the delivery consumers: nothing starts during a rebalance, and what a moved partition
    // had queued here is left to its next owner.
    onRebalancing: () => lanes.freeze(),
    onAssignment: (assigned) => {
      const gone = tracker.retain(assigned);
      const dropped = gone.size > 0 ? lanes.dropQueued(gone) : 0;
      lanes.thaw();
      metrics.rebalanceDropped.inc(dropped);
    },
  });
  tracker = new OffsetTracker(member);
  const timers = new PauseTimers();
  return {
    member,
    tracker,
    timers,
    lanes,
    async stop(drainMs) {
      member.pauseAll();
      await tracker.drain(drainMs);
      lanes.close();
      await member.stop();
    },
  };
}
