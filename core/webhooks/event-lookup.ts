/**
 * Reading published events back by id, for a recovery of still-failing deliveries (their payloads
 * wait on a retry rung; only `sluice.events` holds them where they can be found): the events topic is
 * read from the first offset at or after `fromMs` up to the end it had when the lookup began, by a
 * consumer of its own (a one-off group, deleted afterwards), and the tenant's events with the wanted
 * ids are kept. Bounded by the time window, not by an index: a recovery pays for it, once per job.
 *
 *   const found = await lookupEvents(ctx, 'acme', new Set(['evt_1', 'evt_2']), Date.now() - 3 * 86400_000);
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Context } from '../context.ts';
import { parseEventRecord } from './deliveries.ts';
import type { EventRecord } from './records.ts';

const LOOKUP_TIMEOUT_MS = 120_000;

/** What a lookup reads of the process's context. */
export type LookupDeps = Pick<Context, 'config' | 'kafka' | 'topics'>;

export async function lookupEvents(
  ctx: LookupDeps,
  tenantId: string,
  ids: ReadonlySet<string>,
  fromMs: number,
  /** Polled while it reads: true ends the lookup with what it found so far (its node is stopping). */
  stopped: () => boolean = () => false,
): Promise<Map<string, EventRecord>> {
  const found = new Map<string, EventRecord>();
  if (ids.size === 0) return found;
  const topic = ctx.topics.events;
  const admin = ctx.kafka.admin();
  await admin.connect();
  const groupId = `${ctx.config.topicPrefix}-event-lookup-${randomUUID()}`;
  const consumer = ctx.kafka.consumer({ groupId, maxWaitTimeInMs: 100, allowAutoTopicCreation: false });
  try {
    const [starts, ends] = await Promise.all([
      admin.fetchTopicOffsetsByTimestamp(topic, Math.max(0, fromMs)),
      admin.fetchTopicOffsets(topic),
    ]);
    // Partitions with something between the start and the end captured now.
    const end = new Map(ends.map((p) => [p.partition, BigInt(p.high)]));
    const left = new Set(starts.filter((p) => BigInt(p.offset) < (end.get(p.partition) ?? 0n)).map((p) => p.partition));
    if (left.size === 0) return found;
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    let finish!: () => void;
    const done = new Promise<void>((resolve) => (finish = resolve));
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        const stop = end.get(batch.partition) ?? 0n;
        for (const m of batch.messages) {
          if (BigInt(m.offset) >= stop) break;
          const e = parseEventRecord(m.value);
          if (e && e.tenant_id === tenantId && ids.has(e.id)) found.set(e.id, e);
        }
        const last = batch.messages[batch.messages.length - 1];
        if (last && BigInt(last.offset) + 1n >= stop) left.delete(batch.partition);
        if (left.size === 0 || found.size === ids.size) finish();
      },
    });
    for (const p of starts) consumer.seek({ topic, partition: p.partition, offset: p.offset });
    let finished = false;
    void done.then(() => (finished = true));
    const deadline = Date.now() + LOOKUP_TIMEOUT_MS;
    while (!finished && !stopped() && Date.now() < deadline) await sleep(50);
    return found;
  } finally {
    await consumer.disconnect().catch(() => {});
    await admin.deleteGroups([groupId]).catch(() => {});
    await admin.disconnect().catch(() => {});
  }
}
