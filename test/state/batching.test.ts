/**
 * A state consumer with `batching` (the attempt history's): while records stream, each fetch asks
 * the broker to wait for 64 KB or 1 s, so a stream of small reports is read in few fetches; after
 * a quiet spell it asks for any record with the long idle wait, so an idle node asks rarely and
 * the first record after the quiet is read at once. Read on the wire: the min bytes and the wait
 * each fetch asks of the broker.
 */
import t from 'tap';
import kafkajs from 'kafkajs';
import { brokers, uniquePrefix, until } from '../helpers/sluice.ts';
import { StateConsumer } from '../../core/kafka/state-consumer.ts';
import { ensureTopics } from '../../core/kafka/topic-admin.ts';
import { KafkaWire } from '../helpers/kafka-wire.ts';
import { connectedClients } from '../helpers/kafka-clients.ts';

const { Kafka, logLevel } = kafkajs;

t.test('batching: 64 KB or 1 s while records stream, any record with the idle wait after a quiet spell', async (t) => {
  const wire = new KafkaWire();
  const kafka = new Kafka({
    clientId: 'batching-test',
    brokers: brokers(),
    logLevel: logLevel.NOTHING,
    socketFactory: wire.socketFactory,
  });
  const { producer } = await connectedClients(t, kafka);
  const prefix = uniquePrefix('batching');
  const topic = `${prefix}.reports`;
  await ensureTopics(kafka, [{ name: topic, partitions: 1, config: {} }]);
  const seen: string[] = [];
  const state = new StateConsumer(kafka, [{ topic, apply: (r) => void seen.push(String(r.value)) }], {
    groupPrefix: prefix,
    maxWaitMs: 2000,
    batching: { minBytes: 64 * 1024, waitMs: 500 },
  });
  t.teardown(() => state.stop());
  await state.start();

  /** The (wait, min bytes) pairs of the fetches begun in `ms`. */
  const fetchesIn = async (ms: number) => {
    const from = wire.fetchWaits.length;
    await new Promise((r) => setTimeout(r, ms));
    return wire.fetchWaits.slice(from).map((w, i) => `${w}/${wire.fetchMinBytes[from + i]}`);
  };
  const idle = await fetchesIn(4500);
  t.ok(idle.length >= 1 && idle.length <= 3, `idle: ${idle.length} fetches in 4.5 s`);
  t.same(new Set(idle), new Set(['2000/1']), 'each waited up to 2 s for any record');

  // Sent just after an idle fetch began: without the record ending it, that fetch would wait its 2 s.
  const begun = wire.fetchWaits.length;
  await until(
    () => wire.fetchWaits.length,
    (n) => n > begun,
    10_000,
    'an idle fetch to begin',
    5,
  );
  const sentAt = Date.now();
  await producer.send({ topic, messages: [{ value: 'first' }] });
  await until(() => seen.includes('first'), Boolean, 10_000, 'the first record', 5);
  const took = Date.now() - sentAt;
  t.ok(took < 1000, `the first record after the quiet ends the idle wait (${took} ms after a fetch of 2000 ms began)`);

  // A stream of small records, one every 50 ms for 2 s: the fetches gather them.
  const streaming = fetchesIn(2000);
  for (let i = 0; i < 40; i++) {
    await producer.send({ topic, messages: [{ value: `r${i}` }] });
    await new Promise((r) => setTimeout(r, 50));
  }
  const busy = await streaming;
  t.ok(busy.length <= 6, `while records stream: ${busy.length} fetches for 40 records in 2 s`);
  t.ok(busy.includes('500/65536'), `fetches waited for 64 KB or 500 ms (${busy.join(', ')})`);
  await until(
    () => seen.length,
    (n) => n === 41,
    10_000,
    'every record',
    20,
  );

  // Quiet again: after twice the batching wait, back to any record with the long wait.
  await new Promise((r) => setTimeout(r, 1500));
  const quiet = await fetchesIn(4500);
  t.same(new Set(quiet), new Set(['2000/1']), `quiet again: ${quiet.join(', ')}`);
});
