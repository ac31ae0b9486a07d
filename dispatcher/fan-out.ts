/**
 * The fan-out: a consumer group over `sluice.events` (published through the API or written
 * straight by data-plane producers) that turns each event into one DeliveryRecord per matching
 * endpoint on `sluice.deliveries` (key endpoint id). A batch's offsets are committed only after
 * its deliveries were acknowledged, so a crash repeats a fan-out (same delivery ids), never skips one.
 */
import type { Context } from '../core/context.ts';
import type { OutRecord } from '../core/kafka/client.ts';
import type { Metrics } from '../core/metrics.ts';
import { deliveryJson, newDelivery, parseEventRecord } from '../core/webhooks/deliveries.ts';
import { GroupConsumer } from './consume.ts';

export function fanOutConsumer(ctx: Context, metrics: Metrics): GroupConsumer {
  return new GroupConsumer(ctx.kafka, ctx.log, {
    groupId: `${ctx.config.topicPrefix}.fan-out`,
    topics: [ctx.topics.events],
    partitionsConsumedConcurrently: ctx.config.topicPartitions,
    async eachBatch({ batch, resolveOffset, heartbeat, isRunning, isStale }, member) {
      if (batch.messages.length === 0) return;
      const out: OutRecord[] = [];
      const now = ctx.clock.now();
      for (const m of batch.messages) {
        const event = parseEventRecord(m.value);
        if (!event) {
          metrics.inc('sluice_events_total', { outcome: 'malformed' });
          continue;
        }
        const endpoints = ctx.endpoints.matching(event.tenant_id, event.type);
        metrics.inc('sluice_events_total', { outcome: endpoints.length > 0 ? 'matched' : 'unmatched' });
        // Keyed by delivery id: one endpoint's backlog spreads over every partition, so every
        // dispatcher process shares it (delivery order was never promised; receivers dedupe on id).
        const eventJson = endpoints.length > 0 ? JSON.stringify(event) : '';
        for (const ep of endpoints) {
          const d = newDelivery(event, ep.id, now);
          out.push({ key: d.delivery_id, value: deliveryJson(d, eventJson) });
        }
      }
      if (!isRunning() || isStale()) return;
      for (let i = 0; i < out.length; i += 500) {
        await ctx.producer.send(ctx.topics.deliveries, out.slice(i, i + 500));
        await heartbeat();
      }
      const last = batch.messages[batch.messages.length - 1].offset;
      resolveOffset(last);
      await member.commit([{ topic: batch.topic, partition: batch.partition, offset: (BigInt(last) + 1n).toString() }]);
    },
  });
}
