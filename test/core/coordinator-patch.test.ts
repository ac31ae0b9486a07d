/**
 * The consumer's fix for a lost group coordinator (core/kafka/coordinator-patch.ts): a heartbeat
 * that cannot reach the coordinator asks where it is now and is sent once more there; a commit
 * whose coordinator's connection is gone asks the same. On the real broker, through a kafkajs
 * consumer whose connections the test taps and cuts as a dying broker does (test/helpers/
 * kafka-wire.ts). One broker cannot move its coordinator elsewhere (test/faults/cluster.test.ts
 * kills a coordinator of three): here the lookup is seen on the wire, between the failure and the
 * request that goes through. Without the fix the heartbeat fails to the consumer's fetch loop and
 * the commit goes back to the old coordinator without asking.
 */
import t, { type Test } from 'tap';
import kafkajs from 'kafkajs';
import '../../core/kafka/client.ts';
import {
  coordinatorRefinds,
  heartbeatFindingCoordinator,
  type GroupState,
} from '../../core/kafka/coordinator-patch.ts';
import { ensureTopics } from '../../core/kafka/topic-admin.ts';
import { KafkaWire } from '../helpers/kafka-wire.ts';
import { connectedClients } from '../helpers/kafka-clients.ts';
import { brokers, uniquePrefix, until } from '../helpers/sluice.ts';

const { Kafka, logLevel } = kafkajs;

t.test('a heartbeat the coordinator answered with an error is not sent again', async (t) => {
  const lookups: string[] = [];
  const group: GroupState = {
    groupId: 'g',
    coordinator: null,
    cluster: {
      findGroupCoordinator: async ({ groupId }) => {
        lookups.push(groupId);
        return { isConnected: () => true };
      },
    },
  };
  const rebalancing = Object.assign(new Error('The group is rebalancing'), { name: 'KafkaJSProtocolError' });
  let sent = 0;
  const heartbeat = heartbeatFindingCoordinator(async function (this: GroupState) {
    sent++;
    throw rebalancing;
  });
  await t.rejects(heartbeat.call(group, {}), rebalancing, 'the answer reaches the consumer as it is');
  t.equal(sent, 1, 'sent once');
  t.same(lookups, [], 'no lookup: the coordinator answered');
});

t.test('concurrent heartbeats that lost the coordinator share one lookup', async (t) => {
  let lookups = 0;
  const found = { isConnected: () => true };
  const group: GroupState = {
    groupId: 'g',
    coordinator: { isConnected: () => false },
    cluster: {
      findGroupCoordinator: async () => {
        lookups++;
        return found;
      },
    },
  };
  const lost = Object.assign(new Error('Connection error'), { name: 'KafkaJSConnectionError' });
  const heartbeat = heartbeatFindingCoordinator(async function (this: GroupState) {
    if (this.coordinator !== found) throw lost;
  });
  await Promise.all([heartbeat.call(group, {}), heartbeat.call(group, {})]);
  t.equal(lookups, 1, 'one lookup');
  t.equal(group.coordinator, found, 'the group keeps the coordinator found');
});

/** A consumer on a topic of its own, its connections tapped; the admin and producer are not. */
async function setUp(t: Test, name: string) {
  const plain = new Kafka({ clientId: `${name}-admin`, brokers: brokers(), logLevel: logLevel.NOTHING });
  const { admin, producer } = await connectedClients(t, plain);
  const topic = `${uniquePrefix(name)}.events`;
  await ensureTopics(plain, [{ name: topic, partitions: 1, config: {} }]);
  const wire = new KafkaWire();
  const tapped = new Kafka({
    clientId: name,
    brokers: brokers(),
    logLevel: logLevel.NOTHING,
    socketFactory: wire.socketFactory,
  });
  return { admin, producer, topic, wire, tapped, groupId: uniquePrefix(`${name}-group`) };
}

t.test('on a real broker: a heartbeat whose connection fails finds the coordinator and is answered', async (t) => {
  const { producer, topic, wire, tapped, groupId } = await setUp(t, 'coordhb');
  const consumer = tapped.consumer({ groupId, maxWaitTimeInMs: 100, heartbeatInterval: 100 });
  const crashes: string[] = [];
  consumer.on(consumer.events.HEARTBEAT, () => wire.note('heartbeat answered'));
  consumer.on(consumer.events.CRASH, ({ payload }) => crashes.push(payload.error.message));
  const seen: string[] = [];
  await consumer.connect();
  t.teardown(() => consumer.disconnect());
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await consumer.run({ eachMessage: async ({ message }) => void seen.push(String(message.value)) });
  await until(() => wire.log.includes('heartbeat answered'), Boolean, 30_000, 'the first heartbeat answered', 20);

  const refinds = coordinatorRefinds();
  await wire.cutAtNext('Heartbeat');
  await until(
    () => wire.after('cut at Heartbeat'),
    (log) => log.includes('heartbeat answered'),
    30_000,
    'a heartbeat answered after the cut',
    20,
  );
  // Without the fix the heartbeat's failure stops the fetchers, which start again with a fetch.
  t.same(
    wire.after('cut at Heartbeat').slice(0, 3),
    ['FindCoordinator', 'Heartbeat', 'heartbeat answered'],
    'the coordinator looked up, then the same heartbeat sent again and answered, before any fetch',
  );
  t.equal(coordinatorRefinds() - refinds, 1, 'one lookup, counted by the fix');

  await producer.send({ topic, messages: [{ value: 'after the cut' }] });
  await until(() => seen.includes('after the cut'), Boolean, 30_000, 'the record sent after the cut', 20);
  t.same(crashes, [], 'the consumer never crashed');
});

t.test('on a real broker: a commit after the connections died asks where the coordinator is', async (t) => {
  const { admin, producer, topic, wire, tapped, groupId } = await setUp(t, 'coordcommit');
  const consumer = tapped.consumer({ groupId, maxWaitTimeInMs: 100 });
  const errors: string[] = [];
  let committed: string | null = null;
  await consumer.connect();
  t.teardown(() => consumer.disconnect());
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await consumer.run({
    eachBatch: async ({ batch, commitOffsetsIfNecessary }) => {
      for (const message of batch.messages) {
        if (String(message.value) !== 'cut') continue;
        // No fetch is in flight while a batch is handled: every connection is idle, and all die.
        await wire.cutAll();
        wire.note('cut');
        const next = String(Number(message.offset) + 1);
        try {
          await commitOffsetsIfNecessary({ topics: [{ topic, partitions: [{ partition: 0, offset: next }] }] });
          wire.note('committed');
          committed = next;
        } catch (err) {
          errors.push((err as Error).message);
        }
      }
    },
  });
  const refinds = coordinatorRefinds();
  await producer.send({ topic, messages: [{ value: 'before' }, { value: 'cut' }] });
  await until(
    () => committed ?? errors[0],
    (v) => v !== undefined,
    30_000,
    'the commit after the cut',
    20,
  );
  t.same(errors, [], 'the commit went through');
  const between = wire.after('cut');
  t.same(
    between.slice(0, between.indexOf('committed')),
    ['FindCoordinator', 'OffsetCommit'],
    'the coordinator looked up before the commit (without the fix: the commit alone, to the old one)',
  );
  t.equal(coordinatorRefinds() - refinds, 1, 'one lookup, counted by the fix');
  const [offsets] = await admin.fetchOffsets({ groupId, topics: [topic] });
  t.same(offsets.partitions, [{ partition: 0, offset: committed, metadata: null }], 'the broker holds the offset');
});
