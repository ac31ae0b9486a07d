/**
 * Fetch waits decided fetch by fetch (core/kafka/fetch-wait.ts): an idle group asks the broker
 * rarely, a group with a partition paused for backpressure (or a re-read pending) asks often, one
 * whose paused partitions wait on timers asks when the next is due; and a record still ends an
 * idle wait at once. On a real broker, counting the fetches kafkajs makes and reading on the wire
 * the wait each asks of the broker (the group is made with 50 ms: without the fix every fetch asks that).
 */
import t from 'tap';
import kafkajs from 'kafkajs';
import { brokers, uniquePrefix, until } from '../helpers/sluice.ts';
import { Member } from '../../core/kafka/member.ts';
import { groupWait, registerFetchWait, waitOf, type FetchWait } from '../../core/kafka/fetch-wait.ts';
import { ensureTopics } from '../../core/kafka/topic-admin.ts';
import { KafkaWire } from '../helpers/kafka-wire.ts';
import { connectedClients } from '../helpers/kafka-clients.ts';

t.test('the wait of one member', async (t) => {
  const w = (extra: Partial<FetchWait> = {}): FetchWait => ({ busyMs: 50, idleMs: 2000, ...extra });
  t.equal(waitOf(w(), false), 2000, 'nothing paused: idle');
  t.equal(waitOf(w({ busy: () => true }), false), 50, 'busy (a re-read pending): short');
  t.equal(waitOf(w(), true), 50, 'paused, and nothing says when it resumes: short');
  t.equal(waitOf(w({ resumeInMs: () => null }), true), 50, 'paused, some for room in a buffer: short');
  t.equal(waitOf(w({ resumeInMs: () => 300.2 }), true), 301, 'paused on a timer: until it is due');
  t.equal(waitOf(w({ resumeInMs: () => 0 }), true), 50, 'a timer due now: never below the short wait');
  t.equal(waitOf(w({ resumeInMs: () => 60_000 }), true), 2000, 'a timer far off: never above the idle wait');
});

t.test('a group id shared by members in one process waits as the most eager of them', async (t) => {
  const group = (paused: boolean) => ({
    groupId: uniquePrefix('shared'),
    subscriptionState: { paused: () => (paused ? [{ topic: 'x', partitions: [0] }] : []) },
  });
  const g = group(false);
  t.equal(groupWait(g), 5000, 'nobody registered: kafkajs default');
  const off1 = registerFetchWait(g.groupId, { busyMs: 50, idleMs: 2000 });
  const off2 = registerFetchWait(g.groupId, { busyMs: 100, idleMs: 1000 });
  t.equal(groupWait(g), 1000, 'the shorter idle wait');
  off2();
  t.equal(groupWait(g), 2000, 'one left');
  off1();
  t.equal(groupWait(g), 5000, 'none left');
});

t.test('on a real broker: few fetches idle, many while a partition is paused, a record at once', async (t) => {
  const { Kafka, logLevel } = kafkajs;
  // The fetches' waits are read on the wire: what kafkajs asked the broker, fetch by fetch.
  const wire = new KafkaWire();
  const kafka = new Kafka({
    clientId: 'fetch-wait-test',
    brokers: brokers(),
    logLevel: logLevel.NOTHING,
    socketFactory: wire.socketFactory,
  });
  const { producer } = await connectedClients(t, kafka);
  const topic = `${uniquePrefix('fetchwait')}.events`;
  // ensureTopics retries what a busy broker answers while it creates them (unknown topic).
  await ensureTopics(kafka, [{ name: topic, partitions: 2, config: {} }]);

  let fetches = 0;
  const seen: string[] = [];
  let busy = false;
  let consumer: kafkajs.Consumer | null = null;
  const member = new Member(kafka, {
    config: { groupId: uniquePrefix('fetchwait-group'), maxWaitTimeInMs: 50 },
    fetchWait: { busyMs: 50, idleMs: 2000, busy: () => busy },
    topics: [topic],
    fromBeginning: true,
    listen: (c) => {
      consumer = c;
      c.on(c.events.FETCH_START, () => fetches++);
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

  let waits: number[] = [];
  const count = async (ms: number) => {
    const from = fetches;
    const fromWire = wire.fetchWaits.length;
    await new Promise((r) => setTimeout(r, ms));
    waits = wire.fetchWaits.slice(fromWire);
    return fetches - from;
  };
  const idle = await count(4000);
  t.ok(idle <= 4, `idle: ${idle} fetches in 4 s (at most 2 of 2 s each, and the one in flight)`);
  t.ok(waits.length > 0, `a fetch began while idle (${waits.length})`);
  t.same(new Set(waits), new Set([2000]), 'each asked the broker to wait the idle 2 s (the group was made with 50 ms)');

  // Sent just after a fetch began: without the record ending it, that fetch would wait its 2 s.
  const started = fetches;
  await until(
    () => fetches,
    (n) => n > started,
    10_000,
    'a fetch to begin',
    5,
  );
  const sentAt = Date.now();
  await producer.send({ topic, messages: [{ partition: 0, value: 'one' }] });
  await until(() => seen.includes('one'), Boolean, 10_000, 'the record', 10);
  const took = Date.now() - sentAt;
  t.ok(took < 1000, `a record ends the idle wait (${took} ms after a fetch of 2000 ms began)`);

  consumer!.pause([{ topic, partitions: [1] }]);
  await count(2100); // the idle fetch in flight returns
  const paused = await count(2000);
  t.ok(paused >= 8, `a partition paused for backpressure: ${paused} fetches in 2 s (50 ms waits)`);
  t.same(new Set(waits), new Set([50]), 'each asked the broker to wait 50 ms');
  consumer!.resume([{ topic, partitions: [1] }]);

  busy = true;
  await count(2100);
  const reread = await count(2000);
  t.ok(reread >= 8, `busy (a re-read pending): ${reread} fetches in 2 s`);
  t.same(new Set(waits), new Set([50]), 'each asked the broker to wait 50 ms');
});
