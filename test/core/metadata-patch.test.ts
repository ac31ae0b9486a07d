/**
 * core/kafka/metadata-patch.ts: a client that targets no topic yet (an admin creating a topic)
 * asks Kafka for none, where kafkajs asked for every topic of the cluster; a send still finds its
 * topic, and listTopics still lists them all. On a real broker, reading what each metadata
 * request was answered with.
 */
import t from 'tap';
import { createRequire } from 'node:module';
import kafkajs from 'kafkajs';
import { brokers, uniquePrefix } from '../helpers/sluice.ts';
import { ensureTopics } from '../../core/kafka/topic-admin.ts';
import '../../core/kafka/client.ts';

t.test('on a real broker: an admin refreshing asks for no topic, a send for its own, listTopics for all', async (t) => {
  const { Kafka, logLevel } = kafkajs;
  const kafka = new Kafka({ clientId: 'metadata-test', brokers: brokers(), logLevel: logLevel.NOTHING });
  const prefix = uniquePrefix('metadata');
  const topics = [`${prefix}.one`, `${prefix}.two`];
  await ensureTopics(
    kafka,
    topics.map((name) => ({ name, partitions: 1, config: {} })),
  );

  type Answer = { topicMetadata: { topic: string }[] };
  const broker = createRequire(import.meta.url)('kafkajs/src/broker/index.js').prototype as {
    metadata: (topics: string[]) => Promise<Answer>;
  };
  const metadata = broker.metadata;
  const answers: { asked: number; answered: number }[] = [];
  broker.metadata = async function (this: unknown, asked: string[] = []) {
    const res = await metadata.call(this, asked);
    answers.push({ asked: asked.length, answered: res.topicMetadata.length });
    return res;
  };
  t.teardown(() => {
    broker.metadata = metadata;
  });

  const admin = kafka.admin();
  const producer = kafka.producer();
  t.teardown(async () => {
    await producer.disconnect();
    await admin.disconnect();
  });
  await admin.connect();
  await producer.connect();
  // createTopics refreshes the admin's metadata first, with no topic targeted yet.
  await admin.createTopics({ topics: [{ topic: `${prefix}.three`, numPartitions: 1 }] });
  await producer.send({ topic: topics[0], messages: [{ value: 'x' }] });
  const untargeted = answers.filter((a) => a.asked === 0);
  t.ok(untargeted.length >= 1, `${untargeted.length} refreshes with no topic targeted`);
  t.same(
    untargeted.filter((a) => a.answered > 0),
    [],
    'each was answered with no topic (the broker holds at least the two of this test)',
  );
  t.ok(
    answers.some((a) => a.asked === 1 && a.answered === 1),
    'the send asked for its topic alone, and got it',
  );
  const listed = await admin.listTopics();
  t.ok(
    topics.every((name) => listed.includes(name)),
    'listTopics still asks for every topic',
  );
});
