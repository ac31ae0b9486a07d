/**
 * core/kafka/empty-batch-patch.ts: a fetch hands kafkajs's runner only the partitions that brought
 * records (or records it filtered), and an idle member still heartbeats. On a real broker, counting
 * the batches the runner takes through its queue (its handleBatch) while a 12-partition group idles.
 */
import t from 'tap';
import { createRequire } from 'node:module';
import kafkajs from 'kafkajs';
import { brokers, uniquePrefix, until } from '../helpers/sluice.ts';
import { withRecords } from '../../core/kafka/empty-batch-patch.ts';
import { Member } from '../../core/kafka/member.ts';
import { ensureTopics } from '../../core/kafka/topic-admin.ts';
import { connectedClients } from '../helpers/kafka-clients.ts';

t.test('withRecords keeps batches with records and batches whose records were filtered', async (t) => {
  const batch = (messages: number, raw: number) => ({
    id: `${messages}/${raw}`,
    isEmpty: () => messages === 0,
    isEmptyDueToFiltering: () => messages === 0 && raw > 0,
  });
  const all = [batch(0, 0), batch(3, 3), batch(0, 2), batch(0, 0)];
  t.same(
    withRecords(all).map((b) => b.id),
    ['3/3', '0/2'],
  );
  const full = [batch(1, 1)];
  t.equal(withRecords(full), full, 'nothing to drop: the same array');
});

t.test('on a real broker: an idle group queues no batch, heartbeats, and a record still arrives', async (t) => {
  const { Kafka, logLevel } = kafkajs;
  const kafka = new Kafka({ clientId: 'empty-batch-test', brokers: brokers(), logLevel: logLevel.NOTHING });
  const { producer } = await connectedClients(t, kafka);
  const topic = `${uniquePrefix('emptybatch')}.events`;
  await ensureTopics(kafka, [{ name: topic, partitions: 12, config: {} }]);

  const runner = createRequire(import.meta.url)('kafkajs/src/consumer/runner.js').prototype as {
    handleBatch: (batch: { topic: string }) => Promise<void>;
  };
  const handleBatch = runner.handleBatch;
  let queued = 0;
  runner.handleBatch = function (this: unknown, batch: { topic: string }) {
    if (batch.topic === topic) queued++;
    return handleBatch.call(this, batch);
  };
  t.teardown(() => {
    runner.handleBatch = handleBatch;
  });

  let fetches = 0;
  let heartbeats = 0;
  const seen: string[] = [];
  const member = new Member(kafka, {
    config: { groupId: uniquePrefix('emptybatch-group'), maxWaitTimeInMs: 200, heartbeatInterval: 500 },
    topics: [topic],
    fromBeginning: true,
    listen: (c) => {
      c.on(c.events.FETCH, () => fetches++);
      c.on(c.events.HEARTBEAT, () => heartbeats++);
    },
    run: { eachMessage: async ({ message }) => void seen.push(message.value!.toString()) },
  });
  t.teardown(() => member.stop());
  await member.start();
  await until(
    () => fetches,
    (n) => n > 0,
    30_000,
    'the first fetch',
    20,
  );

  const [f0, q0, h0] = [fetches, queued, heartbeats];
  await new Promise((r) => setTimeout(r, 3000));
  const idleFetches = fetches - f0;
  t.ok(idleFetches >= 5, `the group fetched while idle (${idleFetches} fetches of 12 partitions in 3 s)`);
  t.equal(queued - q0, 0, 'no batch went through the runner while idle (12 empty partitions each fetch)');
  t.ok(heartbeats - h0 >= 2, `it heartbeat meanwhile (${heartbeats - h0} in 3 s, every 500 ms)`);

  await producer.send({ topic, messages: [{ partition: 7, value: 'one' }] });
  await until(() => seen.includes('one'), Boolean, 10_000, 'the record', 10);
  t.ok(queued - q0 >= 1, 'the partition with a record went through');
});
