import t from 'tap';
import { createKafka } from '../../core/kafka/client.ts';
import { DurableProducer, MAX_RECORD_BYTES, MAX_BATCH_BYTES } from '../../core/kafka/producers.ts';
import { ensureTopics } from '../../core/kafka/topic-admin.ts';
import { brokers, uniquePrefix } from '../helpers/sluice.ts';

const kafka = createKafka(brokers(), 'producer-limits-test');
const producer = new DurableProducer(kafka);
await producer.connect();
t.teardown(() => producer.disconnect());

async function count(topic: string): Promise<number> {
  const admin = kafka.admin();
  await admin.connect();
  const offsets = await admin.fetchTopicOffsets(topic);
  await admin.disconnect();
  return offsets.reduce((n, p) => n + Number(p.high) - Number(p.low), 0);
}

t.test('a burst far larger than one Kafka request lands whole, in byte-bounded requests', async (t) => {
  const topic = `${uniquePrefix('burst')}.dlq`;
  await ensureTopics(kafka, [
    { name: topic, partitions: 1, config: { 'cleanup.policy': 'delete', 'retention.ms': '600000' } },
  ]);
  const small = Array.from({ length: 10_000 }, (_, i) => ({
    key: 'acme',
    value: JSON.stringify({ i, pad: 'x'.repeat(900) }),
  }));
  await producer.send(topic, small);
  t.equal(
    await count(topic),
    10_000,
    `10,000 records of ~1 KB (${Math.round((10_000 * 1000) / MAX_BATCH_BYTES)} × the request bound) all written`,
  );
  const big = Array.from({ length: 12 }, (_, i) => ({
    key: 'acme',
    value: JSON.stringify({ i, payload: 'y'.repeat(256 * 1024) }),
  }));
  await Promise.all([producer.send(topic, big.slice(0, 6)), producer.send(topic, big.slice(6))]);
  t.equal(await count(topic), 10_012, 'and 12 records of 256 KiB sent at once');
});

t.test('a record over the limit is refused at once, never sent or retried', async (t) => {
  const topic = `${uniquePrefix('huge')}.events`;
  await ensureTopics(kafka, [
    { name: topic, partitions: 1, config: { 'cleanup.policy': 'delete', 'retention.ms': '600000' } },
  ]);
  await t.rejects(producer.send(topic, [{ key: 'k', value: 'z'.repeat(MAX_RECORD_BYTES + 1) }]), {
    code: 'PAYLOAD_TOO_LARGE',
  });
  t.equal(await count(topic), 0, 'nothing was written');
});
