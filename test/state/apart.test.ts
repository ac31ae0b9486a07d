/**
 * Topics set apart (StateConsumerOptions.apart) are read by a member of their own: a burst on a
 * busy stored topic (a bulk DLQ replay) is applied while the other topics go on being read. One
 * consumer would fetch again only once the burst's batch was applied, so a revocation written
 * meanwhile would wait behind it (and the node fail closed).
 */
import t from 'tap';
import { Kafka, logLevel } from 'kafkajs';
import { brokers, uniquePrefix } from '../helpers/sluice.ts';
import { StateConsumer, type StateRecord, type StoredView } from '../../core/kafka/state-consumer.ts';
import { ensureTopics } from '../../core/kafka/topic-admin.ts';

const kafka = new Kafka({ clientId: 'apart-test', brokers: brokers(), logLevel: logLevel.NOTHING });
const producer = kafka.producer();
await producer.connect();
t.teardown(() => producer.disconnect());

const prefix = uniquePrefix('apart');
const busy = `${prefix}.busy`;
const quick = `${prefix}.quick`;
await ensureTopics(kafka, [
  { name: busy, partitions: 1, config: {} },
  { name: quick, partitions: 1, config: {} },
]);

/** A stored view whose every record costs 3 ms of CPU (a store write of a loaded machine). */
const slow: StoredView & { applied: number } = {
  topic: busy,
  applied: 0,
  attach() {},
  apply(_r: StateRecord) {
    const until = performance.now() + 3;
    while (performance.now() < until);
    this.applied++;
  },
};
/** What the slow view had applied when each record of the quick topic arrived. */
const seenAt: number[] = [];
const fast = { topic: quick, apply: () => void seenAt.push(slow.applied) };

const state = new StateConsumer(kafka, [slow, fast], { groupPrefix: prefix, apart: [busy], maxWaitMs: 100 });
t.teardown(() => state.stop());
await state.start();

t.test('a record of another topic is applied in the middle of a burst on a topic set apart', async (t) => {
  const N = 800;
  await producer.send({
    topic: busy,
    messages: Array.from({ length: N }, (_, i) => ({ key: String(i), value: `burst ${i}` })),
  });
  const deadline = Date.now() + 30_000;
  while (slow.applied === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  t.ok(slow.applied > 0, 'the burst is being applied');
  await producer.send({ topic: quick, messages: [{ key: 'r', value: 'a revocation' }] });
  while (seenAt.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  t.equal(seenAt.length, 1, 'the record of the other topic was applied');
  t.ok(seenAt[0] < N, `it was applied with ${seenAt[0]} of the ${N} burst records applied, not after them all`);
  while (slow.applied < N && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.equal(slow.applied, N, 'and the burst was applied whole');
});
