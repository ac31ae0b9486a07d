/**
 * The fan-out: a consumer group over `sluice.events` (published through the API or written
 * straight by data-plane producers) that turns each event into its deliveries on `sluice.deliveries`:
 * one DeliverySet record (key event id) per event and up to 100 matching endpoints (matched by type,
 * then by their CEL filter: core/webhooks/filters), so the event
 * crosses Kafka once, not once per endpoint; an endpoint with limits or order gets its delivery on
 * `sluice.lanes` instead (key endpoint id: dispatcher/lanes.ts). A batch's offsets are committed only after its
 * deliveries were acknowledged, so a crash repeats a fan-out (same delivery ids), never skips one.
 * Commits go at most once per COMMIT_EVERY_MS (one commit for every batch fanned out meanwhile, on
 * any partition: under light load each event is its own batch, and a commit each was a third of the
 * fan-out's Kafka requests); a batch that finds a commit overdue waits until it lands, so a partition
 * that moves repeats the batches of one interval at most, not every batch fanned out while the
 * group's coordinator was out of reach (a region cut).
 */
import type { Context } from '../core/context.ts';
import type { OutRecord } from '../core/kafka/producers.ts';
import type { Metrics } from '../core/metrics.ts';
import {
  DELIVERY_SET_MAX,
  deliveryJson,
  deliverySetJson,
  newDelivery,
  parseEventRecord,
} from '../core/webhooks/deliveries.ts';
import { needsLane } from './delivery-policy.ts';
import type { TypeCountReports } from '../core/webhooks/event-type-counts.ts';
import { selectByFilter } from '../core/webhooks/filters/filter-cache.ts';
import { GroupConsumer, rejoinSettleMs } from './consume.ts';
import { waitUntil } from '../core/poll.ts';
import type { EachBatchPayload } from '../core/kafka/client.ts';
import type { FilterErrorReports } from './filter-errors.ts';
import { endSpans, relaying, type Span } from '../core/tracing.ts';

/**
 * How long a fan-out waits for its endpoint view to catch up before it matches anyway: 10 s, or
 * less when the session timeout is short (the wait must end well within it).
 */
const viewWaitMs = (sessionTimeoutMs: number) => Math.min(10_000, Math.floor(sessionTimeoutMs / 2));

/** The first wait before a refused fan-out commit is made again (doubling to 1 s). */
const COMMIT_RETRY_FIRST_MS = 100;

/**
 * A batch that writes more records than this is written in the background, its partition paused
 * meanwhile: kafkajs fetches again only once every batch of the last fetch is handled, so a
 * tenant's big fan-out (thousands of lane records) would otherwise hold every other partition's
 * events back for as long as its writes take.
 */
export const DETACH_AT = 500;

/**
 * Records per write of a big fan-out. kafkajs encodes a produce request in one synchronous go
 * (about 0.1 ms a record on a slow 2-vCPU VM), so 500 at a time stalled the process's other work,
 * another tenant's publishes and deliveries among them, for 50-100 ms per write.
 */
const WRITE_CHUNK = 100;

/** How often the fan-out commits at most; a commit this much overdue holds the next batch. */
export const COMMIT_EVERY_MS = 100;

type Offset = { topic: string; partition: number; offset: string };

/** What the fan-out reads of the process's context. */
export type FanOutDeps = Pick<
  Context,
  'clock' | 'config' | 'endpoints' | 'kafka' | 'log' | 'producer' | 'state' | 'topics'
>;

export function fanOutConsumer(
  ctx: FanOutDeps,
  metrics: Metrics,
  typeCounts?: TypeCountReports,
  filterErrors?: FilterErrorReports,
): GroupConsumer {
  const viewWait = viewWaitMs(ctx.config.dispatchSessionTimeoutMs);
  /** Batches being fanned out now: a rejoin waits for them to commit (rejoin-patch.ts). */
  let inBatch = 0;
  /** Fanned out and not yet committed, per partition (`topic\0partition`): the next offset, and since when. */
  const due = new Map<string, { o: Offset; since: number }>();
  let timer: NodeJS.Timeout | null = null;
  let lastCommitAt = 0;
  let committing: Promise<boolean> | null = null;
  let member!: GroupConsumer;
  /** The partitions this member owns (`topic\0partition`), as of its last join. */
  const owned = new Set<string>();

  /** Commits what is due now (joining a commit under way); true when it landed. */
  const commitDue = (): Promise<boolean> => {
    committing ??= (async () => {
      if (timer) clearTimeout(timer);
      timer = null;
      // Offsets of partitions that went to another member are not committed from here.
      for (const [key] of due) if (!owned.has(key)) due.delete(key);
      const sent = [...due.values()];
      if (sent.length === 0) return true;
      const at = Date.now();
      lastCommitAt = at;
      const landed = await member.commit(sent.map((d) => d.o));
      if (landed)
        for (const d of sent) {
          const key = `${d.o.topic}\0${d.o.partition}`;
          const now = due.get(key);
          // Fanned out again meanwhile: due from when this commit was made.
          if (now === d) due.delete(key);
          else if (now) now.since = Math.max(now.since, at);
        }
      return landed;
    })().finally(() => {
      committing = null;
      schedule(); // what is (still) due goes at the next interval
    });
    return committing;
  };
  const schedule = () => {
    if (timer !== null || committing !== null || due.size === 0) return;
    timer = setTimeout(() => void commitDue(), Math.max(0, lastCommitAt + COMMIT_EVERY_MS - Date.now()));
  };
  /** Whether something has waited for its commit past twice the interval. */
  const overdueNow = () => {
    const limit = Date.now() - 2 * COMMIT_EVERY_MS;
    for (const d of due.values()) if (d.since <= limit) return true;
    return false;
  };

  member = new GroupConsumer(ctx.kafka, ctx.log, {
    groupId: `${ctx.config.topicPrefix}.fan-out`,
    topics: [ctx.topics.events],
    metrics,
    idleWaitMs: ctx.config.idleFetchWaitMs,
    sessionTimeoutMs: ctx.config.dispatchSessionTimeoutMs,
    partitionsConsumedConcurrently: ctx.config.topicPartitions,
    // A batch under way when the group rebalances commits before this member rejoins (after, its
    // commit would be refused and the partition's next owner would fan it out again).
    async beforeRejoin() {
      await waitUntil(() => inBatch === 0, rejoinSettleMs(ctx.config.dispatchSessionTimeoutMs));
      await commitDue();
    },
    // What was fanned out is committed before the member leaves (a stop must repeat nothing).
    async beforeStop() {
      member.pauseAll();
      await waitUntil(() => inBatch === 0, rejoinSettleMs(ctx.config.dispatchSessionTimeoutMs));
      await commitDue();
    },
    onAssignment(assigned) {
      owned.clear();
      for (const [topic, ps] of Object.entries(assigned)) for (const p of ps) owned.add(`${topic}\0${p}`);
    },
    async eachBatch(payload) {
      inBatch++;
      let detach!: () => void;
      const detached = new Promise<void>((resolve) => {
        detach = resolve;
      });
      let inBackground = false;
      const work = fanOutBatch(payload, () => {
        inBackground = true;
        detach();
      }).finally(() => {
        inBatch--;
      });
      // A batch written in the background handles its own write failures (fanOutBatch); should
      // anything else throw there, no runner is waiting for it: it is logged, not left unhandled.
      work.catch((err: Error) => {
        if (inBackground) ctx.log.error('a fan-out batch failed in the background', { error: err.message });
      });
      // Settles with the batch, or as soon as it goes on in the background.
      await Promise.race([work, detached]);
    },
  });
  return member;

  /** Waits while a commit is overdue (its coordinator out of reach): retried, a heartbeat between. */
  async function overdue({ heartbeat, isRunning, isStale }: EachBatchPayload): Promise<boolean> {
    for (let wait = COMMIT_RETRY_FIRST_MS; overdueNow(); ) {
      if (await commitDue()) continue;
      if (!isRunning() || isStale()) return false;
      await heartbeat();
      await new Promise((r) => setTimeout(r, wait));
      wait = Math.min(2 * wait, 1000);
    }
    return true;
  }

  async function fanOutBatch(payload: EachBatchPayload, detach: () => void): Promise<void> {
    const { batch, resolveOffset, heartbeat, isRunning, isStale } = payload;
    if (batch.messages.length === 0) return;
    if (!(await overdue(payload))) return;
    const out: OutRecord[] = [];
    const toLanes: OutRecord[] = [];
    const events = batch.messages.map((m) => parseEventRecord(m.value));
    // Read-your-writes across processes: match only once this view of the endpoints has read
    // as far as the publishing node's had (an endpoint registered just before is not missed).
    const needed = events.reduce((n, e) => Math.max(n, e?.endpoints_at ?? 0), 0);
    await ctx.state.reached(ctx.topics.endpoints, 0, needed, viewWait);
    const now = ctx.clock.now();
    const spans: Span[] = []; // traced: each event's consume and produce spans, ended with the batch
    for (let k = 0; k < events.length; k++) {
      const parsed = events[k];
      if (!parsed) {
        metrics.fannedOut('malformed');
        continue;
      }
      const { endpoints_at: _seen, ...event } = parsed; // a matching detail, not part of the event
      // Matched by type, then by filter (each with the event's budget); a failed filter is no match.
      const endpoints = selectByFilter(ctx.endpoints.matching(event.tenant_id, event.type), event, (ep, v) => {
        metrics.filterEvaluated(event.tenant_id, v.error !== null ? 'error' : v.matched ? 'matched' : 'unmatched');
        if (v.error !== null) filterErrors?.note(ep, v.error, now);
      });
      metrics.fannedOut(endpoints.length > 0 ? 'matched' : 'unmatched');
      typeCounts?.note(event.tenant_id, event.type, now);
      // Keyed by event id: a tenant's events spread over every partition, so every dispatcher
      // process shares them (delivery order was never promised; receivers dedupe on the event id).
      const eventJson = endpoints.length > 0 ? JSON.stringify(event) : '';
      // Traced, the deliveries carry the trace on; undefined otherwise.
      const headers = relaying(
        spans,
        batch.topic,
        batch.messages[k].headers,
        ctx.topics.deliveries,
        event.id,
        endpoints.length,
      );
      const endpointsAt = Number(ctx.state.position(ctx.topics.endpoints, 0));
      // A lane endpoint's delivery goes alone to its lane (keyed by endpoint: one owner, in
      // order); the others share DeliverySets, spread over every dispatcher.
      const spread: string[] = [];
      for (const ep of endpoints) {
        if (!needsLane(ep)) {
          spread.push(ep.id);
          continue;
        }
        const value = deliveryJson({ ...newDelivery(event, ep.id, now), endpoints_at: endpointsAt }, eventJson);
        toLanes.push(headers ? { key: ep.id, value, headers } : { key: ep.id, value });
      }
      for (let i = 0; i < spread.length; i += DELIVERY_SET_MAX) {
        const value = deliverySetJson(eventJson, spread.slice(i, i + DELIVERY_SET_MAX), now, endpointsAt);
        out.push(headers ? { key: event.id, value, headers } : { key: event.id, value });
      }
    }
    if (!isRunning() || isStale()) {
      endSpans(spans, 'abandoned: the partition moved');
      return;
    }
    const last = batch.messages[batch.messages.length - 1].offset;
    let resume: (() => void) | null = null;
    if (out.length + toLanes.length > DETACH_AT) {
      // Nothing of this partition is fetched until it is written; the others go on meanwhile.
      resume = payload.pause();
      resolveOffset(last);
      detach();
    }
    try {
      // WRITE_CHUNK records a write, a heartbeat between writes; the lanes after the deliveries, in
      // the events' order (a lane keeps a key's order as the tenant's partition had it).
      let writes = 0;
      for (const [topic, records] of [
        [ctx.topics.deliveries, out],
        [ctx.topics.lanes, toLanes],
      ] as const)
        for (let i = 0; i < records.length; i += WRITE_CHUNK) {
          if (writes++ > 0) await heartbeat();
          await ctx.producer.send(topic, records.slice(i, i + WRITE_CHUNK));
        }
    } catch (err) {
      endSpans(spans, (err as Error).message);
      if (!resume) throw err;
      // In the background: read the batch again, as a failed batch is (the writes repeat, same ids).
      ctx.log.warn('a fan-out write failed; the batch is read again', { error: (err as Error).message });
      try {
        member.seek(batch.topic, batch.partition, Number(batch.messages[0].offset));
      } catch {
        // The partition moved meanwhile: its next owner reads the batch from the last commit.
      }
      resume();
      return;
    }
    resume?.();
    endSpans(spans);
    resolveOffset(last);
    const o = { topic: batch.topic, partition: batch.partition, offset: (BigInt(last) + 1n).toString() };
    const key = `${batch.topic}\0${batch.partition}`;
    due.set(key, { o, since: due.get(key)?.since ?? Date.now() });
    schedule();
  }
}
