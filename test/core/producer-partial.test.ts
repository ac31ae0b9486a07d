/**
 * DurableProducer after a failed request: it goes again one partition per request, each later try
 * with only the partitions not yet acknowledged (so one partition that keeps failing, as a leader
 * cut off in another region, no longer writes the rest of its request once per try). Against the
 * real broker, through a tap that resets the connection as the first produce request is written.
 * How many repeats that saves across a real cut is measured by `npm run lab:regions -- --only cut`.
 */
import t from 'tap';
import { Kafka, logLevel } from 'kafkajs';
import { DurableProducer } from '../../core/kafka/producers.ts';
import { partitionOfKey } from '../../core/kafka/client.ts';
import { ensureTopics } from '../../core/kafka/topic-admin.ts';
import { brokers, uniquePrefix } from '../helpers/sluice.ts';
import { connectedClients } from '../helpers/kafka-clients.ts';
import { KafkaWire } from '../helpers/kafka-wire.ts';

t.test('a failed request is sent again per partition: every record once, in order per key', async (t) => {
  const plain = new Kafka({ clientId: 'producer-partial-admin', brokers: brokers(), logLevel: logLevel.NOTHING });
  const { admin } = await connectedClients(t, plain);
  const wire = new KafkaWire();
  const tapped = new Kafka({
    clientId: 'producer-partial',
    brokers: brokers(),
    logLevel: logLevel.NOTHING,
    socketFactory: wire.socketFactory,
  });
  const producer = new DurableProducer(tapped);
  await producer.connect();
  t.teardown(() => producer.disconnect());
  const topic = `${uniquePrefix('partial')}.a`;
  await ensureTopics(plain, [{ name: topic, partitions: 3, config: { 'cleanup.policy': 'delete' } }]);

  const keys = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot'];
  const records = Array.from({ length: 60 }, (_, i) => ({ key: keys[i % keys.length], value: String(i) }));
  const partitions = new Set(keys.map((k) => partitionOfKey(topic, k, 3)));
  t.ok(partitions.size > 1, `the keys fall in ${partitions.size} partitions`);

  // The first send to a topic has its partition count read in the background (what a split needs).
  await producer.send(topic, [{ key: 'warm-up', value: '-1' }]);
  await new Promise((r) => setTimeout(r, 1000));
  wire.note('sending');
  const cut = wire.cutAtNext('Produce');
  await producer.send(topic, records);
  await cut;
  const produced = wire.after('sending').filter((r) => r === 'Produce').length;
  t.equal(produced, partitions.size, `after the cut, one produce request per partition (${produced})`);

  const offsets = await admin.fetchTopicOffsets(topic);
  t.equal(
    offsets.reduce((n, p) => n + Number(p.high), 0),
    61,
    'every record written once (the cut request wrote nothing)',
  );
  const consumer = plain.consumer({ groupId: `${topic}-check` });
  await consumer.connect();
  t.teardown(() => consumer.disconnect());
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = new Map<string, number[]>();
  let n = 0;
  let misplaced = 0;
  await new Promise<void>((done) => {
    void consumer.run({
      eachMessage: async ({ partition, message }) => {
        const key = String(message.key);
        n++;
        if (key === 'warm-up') return n === 61 ? done() : undefined;
        if (partition !== partitionOfKey(topic, key, 3)) misplaced++;
        seen.set(key, [...(seen.get(key) ?? []), Number(String(message.value))]);
        if (n === 61) done();
      },
    });
  });
  t.equal(misplaced, 0, "every record in the partition kafkajs's own partitioner picks for its key");
  for (const key of keys) {
    const sent = records.filter((r) => r.key === key).map((r) => Number(r.value));
    t.same(seen.get(key), sent, `${key}: in the order sent`);
  }
});
