/**
 * The delivery consumer: the one batch loop of the dispatcher. A process runs it as a few groups
 * (`sluice.deliveries`; every rung, `sluice.retry.<label>` and the hold rung; `sluice.lanes`), and
 * every record, whatever its topic, goes the same way: parsed, gated by its due time (a rung),
 * admitted under backpressure, accepted by the offset tracker, then handed on without waiting for
 * its attempts, so many deliveries are in flight at once and a slow endpoint holds up nobody.
 * A plain delivery is queued in the process's one scheduler (scheduler.ts); a lane delivery goes to
 * its endpoint's lane (lanes.ts), which decides when it may take a slot of that same scheduler.
 * When the buffer is full the partition is paused until it has room (backpressure), and offsets
 * are committed as outcomes become durable (OffsetTracker).
 */
import type { EachBatchPayload, IHeaders } from '../core/kafka/client.ts';
import type { Logger } from '../core/log.ts';
import { headerString } from '../core/kafka/client.ts';
import type { Metrics } from '../core/metrics.ts';
import { parseDeliveries, parseDeliveryRecord } from '../core/webhooks/deliveries.ts';
import type { DeliveryRecord } from '../core/webhooks/records.ts';
import { GroupConsumer, OffsetTracker, rejoinSettleMs } from './consume.ts';
import { isWaiting } from './delivery-policy.ts';
import type { Outcome } from './ladder.ts';
import type { LaneIntake } from './lanes.ts';
import { processDelivery, type Stage } from './process.ts';
import { HEADER_HELD_SINCE, type OutcomeRecorder } from './record.ts';
import { gate, PauseTimers, type TopicMode } from './rungs.ts';
import { consumed, consuming, within } from '../core/tracing.ts';

export interface DeliveryConsumer {
  member: GroupConsumer;
  tracker: OffsetTracker;
  timers: PauseTimers;
  stop(drainMs: number): Promise<void>;
}

export function deliveryConsumer(
  stage: Stage,
  recorder: OutcomeRecorder,
  metrics: Metrics,
  opts: {
    groupId: string;
    topics: string[];
    modeOf(topic: string): TopicMode;
    maxWaitTimeInMs: number;
    concurrency: number;
    /** Where records of a topic in mode 'lane' go; required when a topic has that mode. */
    lanes?: LaneIntake;
  },
): DeliveryConsumer {
  const lanes = opts.lanes;
  const { ctx } = stage;
  const timers = new PauseTimers();
  // A held delivery may go early once its endpoint may receive again (or is gone: then it is dropped).
  const released = (rec: DeliveryRecord) => {
    const ep = ctx.endpoints.get(rec.endpoint_id);
    return ep === undefined || !isWaiting(ep);
  };
  let tracker!: OffsetTracker;

  const eachBatch = async (p: EachBatchPayload): Promise<void> => {
    const { batch } = p;
    const { topic, partition } = batch;
    // A partition new here: first learn which of its offsets the last owner finished.
    const loading = tracker.ready(topic, partition);
    if (loading) await loading;
    const mode = opts.modeOf(topic);
    const lane = mode === 'lane' ? lanes! : null;
    const items = batch.messages.map((m) => read(mode, m));
    const now = ctx.clock.now();
    const { take, wakeAt } = gate(mode, items, now, released);
    const rung = mode === 'rung' || mode === 'hold' ? topic.slice(topic.lastIndexOf('.') + 1) : null;
    const origin = `${topic}\0${partition}`;
    for (let i = 0; i < take; i++) {
      if (!p.isRunning() || p.isStale()) return;
      const { m, recs, rec, heldSince } = items[i];
      // Backpressure: the rest of this batch is fetched again once there is room. A lane record
      // meets only a backstop here: its tenant's share is judged one record at a time (lanes.ts).
      if (lane ? !lane.hasRoom() : !stage.scheduler.mayTake(rec?.tenant_id ?? '')) {
        if (lane) lane.whenRoom(p.pause());
        else stage.scheduler.whenRoom(p.pause());
        metrics.backpressurePauses.inc({ topic: lane ? 'lanes' : mode });
        return;
      }
      const seen = lane?.caughtUp(rec);
      if (seen) await seen;
      if (tracker.accept(topic, partition, m.offset)) {
        if (rung !== null && rec !== null) metrics.rungLate(rung, Math.max(0, now - rec.due_at) / 1000);
        // The record's offset is done once every delivery in it has a durable outcome.
        const done = lane
          ? lane.take(topic, partition, m.offset, rec, m.headers)
          : recs === null || recs.length <= 1
            ? handle(ctx.log, stage, recorder, rec, heldSince, origin, topic, m.headers)
            : Promise.all(recs.map((r) => handle(ctx.log, stage, recorder, r, heldSince, origin, topic, m.headers)));
        // null: left in Kafka, to be read (and accepted) again.
        if (done !== null) void done.then(() => tracker.finish(topic, partition, m.offset));
      }
      p.resolveOffset(m.offset);
      if (i % 500 === 499) await p.heartbeat();
    }
    if (wakeAt !== null) {
      const resume = p.pause();
      timers.set(topic, partition, wakeAt - ctx.clock.now(), resume);
      metrics.rungPauses.inc({ topic });
    }
  };

  // While the group rebalances no attempt starts (what is delivered then cannot be committed and
  // the partition's next owner would send it again). Once the assignment is known, deliveries
  // still queued for a partition that went to another member are dropped: the new owner reads
  // them again from the last commit. Attempts already in flight finish (bounded duplicates).
  const onRebalancing = () => {
    lanes?.freeze();
    stage.scheduler.freeze(opts.groupId);
  };
  const onAssignment = (assigned: Record<string, number[]>) => {
    const gone = tracker.retain(assigned);
    // A lane topic's jobs in the process scheduler are its lanes' tickets, counted by the lanes.
    const laneDropped = gone.size > 0 ? lanes?.dropQueued(gone) : undefined;
    const queuedDropped = gone.size > 0 ? stage.scheduler.dropQueued(gone) : 0;
    const dropped = laneDropped ?? queuedDropped;
    lanes?.thaw();
    stage.scheduler.thaw(opts.groupId);
    metrics.rebalanceDropped.inc(dropped);
    if (dropped > 0)
      ctx.log.info('partitions moved to another member; their queued deliveries are left to it', {
        group: opts.groupId,
        partitions: gone.size,
        dropped,
      });
  };
  const member = new GroupConsumer(ctx.kafka, ctx.log, {
    groupId: opts.groupId,
    topics: opts.topics,
    metrics,
    maxWaitTimeInMs: opts.maxWaitTimeInMs,
    idleWaitMs: ctx.config.idleFetchWaitMs,
    // Records left in Kafka are read again by a seek, which waits for the fetch in flight.
    busy: lanes ? () => lanes.busy() : undefined,
    // Paused partitions of a rung wait on timers; any waiting for room in a buffer keep fetches short.
    resumeInMs: lanes ? undefined : () => (stage.scheduler.waitingForRoom ? null : timers.nextInMs()),
    sessionTimeoutMs: ctx.config.dispatchSessionTimeoutMs,
    partitionsConsumedConcurrently: opts.concurrency,
    eachBatch,
    onRebalancing,
    // Its attempts in flight finish and are committed before it rejoins (their commits would be refused after).
    beforeRejoin: () =>
      tracker.settle(rejoinSettleMs(ctx.config.dispatchSessionTimeoutMs), () => stage.scheduler.active === 0),
    onAssignment,
  });
  tracker = new OffsetTracker(member, { freezes: stage.scheduler });
  lanes?.bind({
    seek: (t, partition, offset) => member.seek(t, partition, offset),
    leave: (t, partition, offset) => tracker.leave(t, partition, offset),
  });
  return {
    member,
    tracker,
    timers,
    async stop(drainMs) {
      stage.scheduler.thaw(opts.groupId);
      member.pauseAll();
      timers.clear();
      await tracker.drain(drainMs);
      lanes?.close();
      await member.stop();
    },
  };
}

async function handle(
  log: Logger,
  stage: Stage,
  recorder: OutcomeRecorder,
  rec: DeliveryRecord | null,
  heldSince: number | null,
  origin: string,
  topic: string,
  headers: IHeaders | undefined,
): Promise<void> {
  // Traced: the record's span, parent of its attempt and of its outcome's write.
  const span = consuming(topic, headers, rec);
  const outcome = await processDelivery(stage, rec, heldSince, origin, span?.ctx);
  within(span, logOutcome, log, outcome);
  consumed(span, outcome.kind);
  await recorder.record(outcome, span?.ctx);
}

function logOutcome(log: Logger, outcome: Outcome): void {
  if (outcome.kind === 'dead-letter')
    log.info('delivery dead-lettered', {
      delivery_id: outcome.rec.delivery_id,
      endpoint_id: outcome.rec.endpoint_id,
      attempts: outcome.entry.attempts,
    });
  else if (log.level === 'debug' && outcome.rec)
    log.debug('delivery outcome', {
      outcome: outcome.kind,
      delivery_id: outcome.rec.delivery_id,
      endpoint_id: outcome.rec.endpoint_id,
      attempt: outcome.rec.attempt,
      ...(outcome.kind === 'delivered' ? { status: outcome.status } : {}),
    });
}

type KafkaMessage = EachBatchPayload['batch']['messages'][number];

interface Item {
  m: KafkaMessage;
  /** Every delivery of the record (a DeliverySet has many), or null when it is malformed. */
  recs: DeliveryRecord[] | null;
  rec: DeliveryRecord | null;
  heldSince: number | null;
}

/** The main topic carries DeliverySets (one event, many endpoints) or single records; the others single records. */
function read(mode: TopicMode, m: KafkaMessage): Item {
  const recs = mode === 'main' ? parseDeliveries(m.value) : wrap(parseDeliveryRecord(m.value));
  return { m, recs, rec: recs?.[0] ?? null, heldSince: numberOrNull(headerString(m.headers, HEADER_HELD_SINCE)) };
}

function wrap(rec: DeliveryRecord | null): DeliveryRecord[] | null {
  return rec === null ? null : [rec];
}

function numberOrNull(v: string | undefined): number | null {
  if (v === undefined) return null;
  const n = Number(v);
  return Number.isFinite(n) ? n : null;
}
