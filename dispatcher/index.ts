/**
 * The webhook dispatcher of one process: the fan-out (events → deliveries), and the one batch
 * loop of delivery (delivery-consumer.ts) run as three groups: `sluice.deliveries`, the retry rungs
 * with the hold rung, and `sluice.lanes` (endpoints with limits or order). They share one
 * keep-alive agent, one scheduler (per-endpoint queues, tenant shares, bounded buffer; the lanes
 * decide only when their next delivery may go and take its slot there) and one outcome recorder.
 *
 *   const d = await startDispatcher(ctx);  // ... await d.stop();
 */
import type { Context } from '../core/context.ts';
import { BestEffortProducer } from '../core/kafka/producers.ts';
import type { Metrics } from '../core/metrics.ts';
import { createDeliverer, DELIVERY_TIMEOUT_MS, type DelivererDeps } from './deliver.ts';
import { deliveryConsumer, type DeliveryConsumer } from './delivery-consumer.ts';
import { fanOutConsumer, type FanOutDeps } from './fan-out.ts';
import { startTypeCountReports, type TypeCountDeps } from '../core/webhooks/event-type-counts.ts';
import { FilterErrorReports } from './filter-errors.ts';
import { laneIntake, type LaneIntake } from './lanes.ts';
import { isWaiting } from './delivery-policy.ts';
import type { EndpointRecord } from '../core/webhooks/records.ts';
import { EndpointHealth, type HealthDeps } from './health.ts';
import { DeliveryScheduler, type EndpointSignal } from './scheduler.ts';
import type { Stage, StageDeps } from './process.ts';
import { RecentAttempts } from './recent-attempts.ts';
import { OutcomeRecorder, type RecorderDeps } from './record.ts';
import type { Outcome } from './ladder.ts';
import type { GroupConsumer } from './consume.ts';
import { waitUntil } from '../core/poll.ts';
import type { TraceContext } from '../core/tracing.ts';
import { stopStep } from '../core/stop-steps.ts';

export type { Outcome } from './ladder.ts';

export interface Dispatcher {
  metrics: Metrics;
  fanOut: GroupConsumer;
  deliveries: DeliveryConsumer;
  rungs: DeliveryConsumer;
  lanes: DeliveryConsumer;
  laneIntake: LaneIntake;
  stop(): Promise<void>;
}

/** Counts outcomes being made durable, so a stopping dispatcher can wait for them. */
class TrackedRecorder extends OutcomeRecorder {
  pending = 0;
  override async record(o: Outcome, trace?: TraceContext): Promise<void> {
    this.pending++;
    try {
      await super.record(o, trace);
    } finally {
      this.pending--;
    }
  }
}

/**
 * What the dispatcher reads of the process's context: its parts' (the stages, the health writes
 * with the `endpoint.disabled` events they publish, the recorder, the fan-out, the reports) and
 * its metrics.
 */
export type DispatcherDeps = Pick<Context, 'metrics'> &
  StageDeps &
  HealthDeps &
  DelivererDeps &
  RecorderDeps &
  FanOutDeps &
  TypeCountDeps;

export async function startDispatcher(ctx: DispatcherDeps): Promise<Dispatcher> {
  const t = ctx.topics;
  const metrics = ctx.metrics;
  const scheduler = new DeliveryScheduler<EndpointSignal>(
    {
      concurrency: ctx.config.dispatchConcurrency,
      perEndpoint: ctx.config.dispatchPerEndpoint,
      maxBuffered: ctx.config.dispatchBuffer,
      now: () => ctx.clock.now(),
    },
    (_job, signal) => signal,
  );
  const deliverer = createDeliverer(ctx);
  const recorder = new TrackedRecorder(ctx, metrics);
  const reports = new BestEffortProducer(ctx.kafka, (count, err) => {
    metrics.attemptReportsDropped.inc(count);
    if (err)
      ctx.log.warn('attempt reports could not be written; the attempt history misses them', {
        count,
        error: err.message,
      });
  });
  await reports.connect();
  recorder.reports = reports;
  const stage: Stage = {
    ctx,
    scheduler,
    deliverer,
    health: new EndpointHealth(ctx),
    stopping: false,
    attempting: 0,
    onAttempt: (a) => recorder.noteAttempt(a),
    recent: new RecentAttempts(),
  };
  const holdTopic = t.hold;
  const deliveries = deliveryConsumer(stage, recorder, metrics, {
    groupId: `${ctx.config.topicPrefix}.dispatch`,
    topics: [t.deliveries],
    modeOf: () => 'main',
    maxWaitTimeInMs: 100,
    concurrency: ctx.config.topicPartitions,
  });
  const rungs = deliveryConsumer(stage, recorder, metrics, {
    groupId: `${ctx.config.topicPrefix}.dispatch-rungs`,
    topics: [...t.rungs],
    modeOf: (topic) => (topic === holdTopic ? 'hold' : 'rung'),
    // Short polls: a resumed rung partition is fetched again within this, which bounds lateness.
    maxWaitTimeInMs: 50,
    concurrency: 4,
  });
  const intake = laneIntake(stage, recorder, metrics);
  const lanes = deliveryConsumer(stage, recorder, metrics, {
    groupId: `${ctx.config.topicPrefix}.dispatch-lanes`,
    topics: [t.lanes],
    modeOf: () => 'lane',
    maxWaitTimeInMs: 100,
    concurrency: ctx.config.topicPartitions,
    lanes: intake,
  });
  const onEndpoint = (id: string, rec: EndpointRecord | null) => {
    if (rec === null || !isWaiting(rec)) rungs.timers.wake(holdTopic);
    // A lane looks again at once: resumed, verified, its limits changed or gone.
    intake.wake(id);
  };
  ctx.endpoints.listeners.add(onEndpoint);
  const typeCounts = await startTypeCountReports(ctx);
  const filterErrors = FilterErrorReports.of(ctx);
  const fanOut = fanOutConsumer(ctx, metrics, typeCounts, filterErrors);
  await Promise.all([deliveries.member.start(), rungs.member.start(), lanes.member.start(), fanOut.start()]);
  metrics.gauge('sluice_deliveries_in_flight', 'Delivery attempts under way in this process.', () => scheduler.active);
  metrics.gauge(
    'sluice_deliveries_buffered',
    'Deliveries this process holds (queued or in flight).',
    // A lane's ticket is counted by both.
    () => scheduler.buffered + intake.lanes.buffered - intake.lanes.ticketed,
  );
  return {
    metrics,
    fanOut,
    deliveries,
    rungs,
    lanes,
    laneIntake: intake,
    /**
     * Stops within DELIVERY_TIMEOUT_MS plus a few seconds: nothing new is fetched or attempted;
     * attempts under way finish (10 s at most) and their outcomes are recorded; then the offsets
     * are committed up to the first delivery that has no durable outcome. Deliveries that were only
     * queued stay uncommitted, and the partitions' next owner delivers them.
     */
    async stop() {
      ctx.endpoints.listeners.delete(onEndpoint);
      stage.stopping = true;
      for (const c of [deliveries, rungs, lanes]) {
        c.member.pauseAll();
        c.timers.clear();
      }
      const settled = async () => {
        const idle = () => (stage.attempting ?? 0) === 0 && recorder.pending === 0;
        if (!(await waitUntil(idle, DELIVERY_TIMEOUT_MS + 2000)))
          ctx.log.error('stopping with attempts or outcomes still under way; they stay uncommitted', {
            attempting: stage.attempting,
            recording: recorder.pending,
          });
      };
      await Promise.all([
        stopStep('dispatcher: fan-out batches under way', () => fanOut.stop()),
        stopStep('dispatcher: attempts in flight and their outcomes', settled),
      ]);
      await stopStep('dispatcher: filter errors', () => filterErrors.stop());
      recorder.stopped = true;
      // Everything that can finish has: commit what is durable and leave the groups.
      await Promise.all([
        stopStep('dispatcher: deliveries commit and leave', () => deliveries.stop(0)),
        stopStep('dispatcher: rungs commit and leave', () => rungs.stop(0)),
        stopStep('dispatcher: lanes commit and leave', () => lanes.stop(0)),
      ]);
      recorder.flushReports();
      await stopStep('dispatcher: closing its clients', () =>
        Promise.all([deliverer.close(), reports.disconnect().catch(() => {}), typeCounts.stop().catch(() => {})]),
      );
    },
  };
}
