/**
 * Catching up at start: a long catch-up that keeps moving is waited for however long it takes
 * (with progress reported); readyTimeoutMs bounds a stall, not the catch-up (a node with millions
 * of records to apply used to give up after 60 s).
 */
import t from 'tap';
import { Kafka, logLevel } from 'kafkajs';
import { brokers, uniquePrefix } from '../helpers/sluice.ts';
import { StateConsumer, type StateRecord, type StateView } from '../../core/kafka/state-consumer.ts';
import { ensureTopics } from '../../core/kafka/topic-admin.ts';

const kafka = new Kafka({ clientId: 'catch-up-test', brokers: brokers(), logLevel: logLevel.NOTHING });
const admin = kafka.admin();
await admin.connect();
t.teardown(() => admin.disconnect());

async function topicWith(records: number, bytes: number): Promise<string> {
  const topic = `${uniquePrefix('catchup')}.state`;
  // ensureTopics retries what a busy broker answers while it creates them (unknown topic).
  await ensureTopics(kafka, [{ name: topic, partitions: 1, config: {} }]);
  const producer = kafka.producer();
  await producer.connect();
  const value = 'x'.repeat(bytes);
  for (let i = 0; i < records; i += 500) {
    await producer.send({
      topic,
      messages: Array.from({ length: Math.min(500, records - i) }, (_, j) => ({ key: String(i + j), value })),
    });
  }
  await producer.disconnect();
  return topic;
}

/** An in-memory view whose every record costs `ms` of CPU, so catching up takes a while. */
function slowView(topic: string, ms: number): StateView & { applied: number } {
  return {
    topic,
    applied: 0,
    apply(_r: StateRecord) {
      const until = performance.now() + ms;
      while (performance.now() < until);
      this.applied++;
    },
  };
}

t.test('a catch-up longer than the stall window completes while it progresses', async (t) => {
  const topic = await topicWith(3000, 1000);
  const view = slowView(topic, 1.5);
  const progress: bigint[] = [];
  const state = new StateConsumer(kafka, [view], {
    groupPrefix: uniquePrefix('cu'),
    readyTimeoutMs: 2000,
    onProgress: (left) => progress.push(left),
  });
  t.teardown(() => state.stop());
  await state.start();
  t.equal(view.applied, 3000, 'every record applied before start() resolved');
  t.ok(state.ready);
  t.ok(progress.length > 0, 'progress was reported while catching up');
  t.ok(
    progress.every((left, i) => i === 0 || left <= progress[i - 1]),
    'records left only go down',
  );
});
