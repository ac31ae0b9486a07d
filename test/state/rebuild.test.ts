/**
 * A consumer kafkajs gives up on is rebuilt. kafkajs retries a failed handler and restarts a
 * consumer after a crash it calls retriable; after a crash whose cause is a non-retriable kafkajs
 * error it gives the consumer up for good. A broker restart can end that way (a CI run saw
 * KafkaJSGroupCoordinatorNotFound, and the node stayed 503 with a dead state consumer). Here the
 * handler fails with such an error at a moment the test chooses: the consumer is replaced, no
 * record is skipped, and the state views resume where they were instead of reading their topics again.
 */
import t from 'tap';
import kafkajs from 'kafkajs';
import { brokers, uniquePrefix, until } from '../helpers/sluice.ts';
import { Member } from '../../core/kafka/member.ts';
import { StateConsumer, type StateRecord, type StateView, type StoredView } from '../../core/kafka/state-consumer.ts';
import { ViewStore } from '../../core/store/view-store.ts';
import { ensureTopics } from '../../core/kafka/topic-admin.ts';
import { connectedClients } from '../helpers/kafka-clients.ts';

const { Kafka, KafkaJSNonRetriableError, logLevel } = kafkajs;
const kafka = new Kafka({ clientId: 'rebuild-test', brokers: brokers(), logLevel: logLevel.NOTHING });
const { producer } = await connectedClients(t, kafka);

async function newTopic(name: string): Promise<string> {
  const topic = `${uniquePrefix(name)}.state`;
  // ensureTopics retries what a busy broker answers while it creates them (unknown topic).
  await ensureTopics(kafka, [{ name: topic, partitions: 1, config: {} }]);
  return topic;
}

const send = (topic: string, from: number, n: number) =>
  producer.send({
    topic,
    messages: Array.from({ length: n }, (_, i) => ({ key: String(from + i), value: String(from + i) })),
  });

t.test('a member whose consumer kafkajs gives up is rebuilt and reads on', async (t) => {
  const topic = await newTopic('member');
  await send(topic, 0, 10);
  const seen: number[] = [];
  const crashes: boolean[] = [];
  let failNext = true;
  const member = new Member(kafka, {
    config: { groupId: uniquePrefix('member-group'), maxWaitTimeInMs: 50 },
    topics: [topic],
    fromBeginning: true,
    run: {
      eachMessage: async ({ message }) => {
        if (failNext) {
          failNext = false;
          throw new KafkaJSNonRetriableError('the handler failed with an error kafkajs does not retry');
        }
        seen.push(Number(message.value!.toString()));
      },
    },
    onCrash: (_err, kafkajsRestarts) => crashes.push(kafkajsRestarts),
  });
  t.teardown(() => member.stop());
  await member.start();
  const first = member.consumer;
  await until(
    () => seen.length,
    (n) => n >= 10,
    30_000,
    'the first 10 records after the rebuild',
    50,
  );
  t.same(crashes, [false], 'kafkajs reported one crash it would not restart from');
  t.equal(member.rebuilds, 1, 'the member was rebuilt once');
  t.not(member.consumer, first, 'a new consumer runs in place of the dead one');
  await send(topic, 10, 5);
  await until(() => seen.includes(14), Boolean, 30_000, 'records written after the rebuild', 50);
  t.same(
    [...new Set(seen)].sort((a, b) => a - b),
    Array.from({ length: 15 }, (_, i) => i),
    'every record was read (the one whose handler failed, again)',
  );
});

/** An in-memory view that counts how often it saw each key. */
function countingView(topic: string): StateView & { seen: Map<string, number> } {
  return {
    topic,
    seen: new Map(),
    apply(r: StateRecord) {
      this.seen.set(r.key, (this.seen.get(r.key) ?? 0) + 1);
    },
  };
}

/** A stored view that keeps each key it saw in the store. */
function storedView(topic: string): StoredView & { keys: () => string[] } {
  let db: ReturnType<ViewStore['table']>;
  return {
    topic,
    attach(store: ViewStore) {
      db = store.table(`rebuild-${topic}`);
    },
    apply(r: StateRecord) {
      void db.put(r.key, true);
    },
    keys: () => [...db.getKeys()].map(String),
  };
}

t.test('a state consumer whose store write fails is rebuilt and resumes where it was', async (t) => {
  const memTopic = await newTopic('rebuild-mem');
  const storedTopic = await newTopic('rebuild-stored');
  await send(memTopic, 0, 20);
  await send(storedTopic, 0, 20);
  const mem = countingView(memTopic);
  const stored = storedView(storedTopic);
  let rebuilt = 0;
  const errors: string[] = [];
  const store = ViewStore.temporary();
  const state = new StateConsumer(kafka, [mem, stored], {
    groupPrefix: uniquePrefix('rebuild'),
    store,
    onError: (err) => errors.push(err.message),
    onRebuilt: () => rebuilt++,
  });
  t.teardown(() => state.stop());
  await state.start();
  t.equal(mem.seen.size, 20, 'caught up: the in-memory view');
  t.equal(stored.keys().length, 20, 'caught up: the stored view');

  // The next write to the store fails once, with an error kafkajs does not retry.
  const transaction = store.transaction.bind(store);
  let failed = false;
  store.transaction = <T>(fn: () => T): Promise<T> => {
    if (failed) return transaction(fn);
    failed = true;
    return Promise.reject(new KafkaJSNonRetriableError('no space left on device'));
  };
  await send(storedTopic, 20, 10);
  await until(
    () => rebuilt === 1 && stored.keys().length === 30,
    Boolean,
    30_000,
    'the rebuilt consumer to apply the new records',
    50,
  );
  t.ok(failed, 'the store write failed once');
  t.ok(
    errors.some((m) => m.includes('no space left on device')),
    'the crash was reported',
  );
  t.equal(state.rebuilds, 1, 'one consumer was rebuilt');

  await send(memTopic, 20, 5);
  await until(
    () => mem.seen.size,
    (n) => n === 25,
    30_000,
    'new records on the in-memory topic',
    50,
  );
  t.same(
    [...mem.seen.values()].filter((n) => n !== 1),
    [],
    'the in-memory view saw every record once: the rebuilt consumer did not read its topic again',
  );
  t.same(
    stored.keys().sort((a, b) => Number(a) - Number(b)),
    Array.from({ length: 30 }, (_, i) => String(i)),
    'the stored view has every record, the one of the failed batch too',
  );
});
