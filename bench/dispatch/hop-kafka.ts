/**
 * Hop ceiling 2 of the dispatch bench, its own process: kafkajs against the same broker, with the
 * settings Sluice writes with (acks=-1, one request in flight: core/kafka/client.ts), so several
 * producers send batches of `batch` records side by side. Then one
 * consumer group reads them all back. Creates its own topic and deletes it at the end.
 *
 *   spec (argv[2], JSON): HopKafkaSpec; answers one HopKafkaResult over IPC and exits.
 */
import { createKafka } from '../../core/kafka/client.ts';

export interface HopKafkaSpec {
  brokers: string[];
  topic: string;
  records: number;
  recordBytes: number;
  batch: number;
  producers: number;
  partitions: number;
}
export interface HopKafkaResult {
  produced: number;
  producePerSec: number;
  consumed: number;
  /** From consumer.run() (group join included) to the last record. */
  consumePerSec: number;
  /** From consumer.run() to the first batch: group join and first fetch. */
  consumerJoinMs: number;
}

const spec = JSON.parse(process.argv[2]) as HopKafkaSpec;
const kafka = createKafka(spec.brokers, 'sluice-bench-hop');
const admin = kafka.admin();
await admin.connect();
await admin.createTopics({
  waitForLeaders: true,
  topics: [{ topic: spec.topic, numPartitions: spec.partitions, replicationFactor: -1 }],
});

// ~recordBytes of JSON, like a delivery record carrying a small event.
const filler = 'x'.repeat(Math.max(0, spec.recordBytes - 80));
const batches = Math.ceil(spec.records / spec.batch);
const producers = Array.from({ length: spec.producers }, () =>
  kafka.producer({ maxInFlightRequests: 1, allowAutoTopicCreation: false }),
);
await Promise.all(producers.map((p) => p.connect()));
let next = 0;
const t0 = performance.now();
await Promise.all(
  producers.map(async (p) => {
    while (next < batches) {
      const b = next++;
      const n = Math.min(spec.batch, spec.records - b * spec.batch);
      const messages = Array.from({ length: n }, (_, i) => {
        const seq = b * spec.batch + i;
        return {
          key: `ep_${seq % 64}`,
          value: JSON.stringify({ delivery_id: `dlv_${seq}`, seq, at: Date.now(), filler }),
        };
      });
      await p.send({ topic: spec.topic, acks: -1, messages });
    }
  }),
);
const produceMs = performance.now() - t0;
await Promise.all(producers.map((p) => p.disconnect()));

const consumer = kafka.consumer({ groupId: `${spec.topic}.g`, allowAutoTopicCreation: false });
await consumer.connect();
await consumer.subscribe({ topic: spec.topic, fromBeginning: true });
let consumed = 0;
let firstAt = 0;
let lastAt = 0;
const runAt = performance.now();
await new Promise<void>((resolve) => {
  void consumer.run({
    partitionsConsumedConcurrently: spec.partitions,
    eachBatch: async ({ batch }) => {
      firstAt ||= performance.now();
      consumed += batch.messages.length;
      lastAt = performance.now();
      if (consumed >= spec.records) resolve();
    },
  });
});
await consumer.disconnect();
await admin.deleteGroups([`${spec.topic}.g`]).catch(() => {});
await admin.deleteTopics({ topics: [spec.topic] }).catch(() => {});
await admin.disconnect();

const result: HopKafkaResult = {
  produced: spec.records,
  producePerSec: spec.records / (produceMs / 1000),
  consumed,
  consumePerSec: consumed / (Math.max(1, lastAt - runAt) / 1000),
  consumerJoinMs: firstAt - runAt,
};
process.send!(result, () => process.exit(0));
