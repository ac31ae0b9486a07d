/**
 * Hop ceiling of bench:dispatch, its own process: kafkajs producers with Sluice's settings (acks=-1, one
 * request in flight: core/kafka/client.ts) send `records` side by side, then one consumer group reads them
 * back, on a topic of its own deleted at the end. Spec: argv[2] (JSON); answers over IPC.
 */
import { createKafka } from '../../core/kafka/client.ts';
import { fmt } from '../../harness/stats.ts';

export interface HopKafkaSpec {
  brokers: string[];
  topic: string;
  records: number;
}
export interface HopKafkaResult {
  /** What was sent, for the report. */
  setup: string;
  producePerSec: number;
  /** From consumer.run() (group join included) to the last record. */
  consumePerSec: number;
  /** From consumer.run() to the first batch: group join and first fetch. */
  consumerJoinMs: number;
}

const { brokers, topic, records } = JSON.parse(process.argv[2]) as HopKafkaSpec;
const [recordBytes, batch, producerCount, partitions] = [600, 500, 4, 6];
const setup =
  `${fmt(records)} records of ~${recordBytes} B, acks=-1, one request in flight, ` +
  `${producerCount} producers × batches of ${batch}, ${partitions} partitions`;
const kafka = createKafka(brokers, 'sluice-bench-hop');
const admin = kafka.admin();
await admin.connect();
const topics = [{ topic, numPartitions: partitions, replicationFactor: -1 }];
await admin.createTopics({ waitForLeaders: true, topics });

// ~recordBytes of JSON, like a delivery record carrying a small event.
const filler = 'x'.repeat(recordBytes - 80);
const producers = Array.from({ length: producerCount }, () =>
  kafka.producer({ maxInFlightRequests: 1, allowAutoTopicCreation: false }),
);
await Promise.all(producers.map((p) => p.connect()));
let sent = 0;
const t0 = performance.now();
await Promise.all(
  producers.map(async (p) => {
    while (sent < records) {
      const first = sent;
      sent = Math.min(records, sent + batch);
      const messages = Array.from({ length: sent - first }, (_, i) => ({
        key: `ep_${(first + i) % 64}`,
        value: JSON.stringify({ delivery_id: `dlv_${first + i}`, seq: first + i, at: Date.now(), filler }),
      }));
      await p.send({ topic, acks: -1, messages });
    }
  }),
);
const produceMs = performance.now() - t0;
await Promise.all(producers.map((p) => p.disconnect()));

const consumer = kafka.consumer({ groupId: `${topic}.g`, allowAutoTopicCreation: false });
await consumer.connect();
await consumer.subscribe({ topic, fromBeginning: true });
let [consumed, firstAt, lastAt] = [0, 0, 0];
const runAt = performance.now();
await new Promise<void>((resolve) => {
  void consumer.run({
    partitionsConsumedConcurrently: partitions,
    eachBatch: async ({ batch }) => {
      firstAt ||= performance.now();
      consumed += batch.messages.length;
      lastAt = performance.now();
      if (consumed >= records) resolve();
    },
  });
});
await consumer.disconnect();
await admin.deleteGroups([`${topic}.g`]).catch(() => {});
await admin.deleteTopics({ topics: [topic] }).catch(() => {});
await admin.disconnect();

const [producePerSec, consumePerSec] = [records / (produceMs / 1000), consumed / (Math.max(1, lastAt - runAt) / 1000)];
const result: HopKafkaResult = { setup, producePerSec, consumePerSec, consumerJoinMs: firstAt - runAt };
process.send!(result, () => process.exit(0));
