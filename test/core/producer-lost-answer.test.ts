/**
 * A write the broker took whose answer never came back must not cost a later write. The sockets
 * here are real connections to a real broker; while `losingAnswers` is set, the first bytes of an
 * answer close the connection instead (the broker has written the request by then).
 */
import net from 'node:net';
import t from 'tap';
import type { Test } from 'tap';
import { Kafka, logLevel } from 'kafkajs';
import type { ISocketFactory } from 'kafkajs';
import { DurableProducer } from '../../core/kafka/producers.ts';
import { ensureTopics } from '../../core/kafka/topic-admin.ts';
import { brokers, uniquePrefix, until } from '../helpers/sluice.ts';

let losingAnswers = false;
const answersLost = { count: 0 };

const socketFactory: ISocketFactory = ({ host, port, onConnect }) => {
  const socket = net.connect({ host, port }, onConnect);
  const on = socket.on.bind(socket);
  socket.on = ((event: string, listener: (...args: unknown[]) => void) => {
    if (event !== 'data') return on(event, listener);
    return on('data', (chunk: Buffer) => {
      if (!losingAnswers) return listener(chunk);
      answersLost.count++;
      socket.destroy(new Error('connection lost before the answer'));
    });
  }) as typeof socket.on;
  return socket;
};

const kafka = new Kafka({
  clientId: 'producer-lost-answer-test',
  brokers: brokers(),
  logLevel: logLevel.NOTHING,
  socketFactory,
  retry: { initialRetryTime: 50, retries: 1 },
  connectionTimeout: 3000,
  requestTimeout: 3000,
});
const plain = new Kafka({ clientId: 'producer-lost-answer-reader', brokers: brokers(), logLevel: logLevel.NOTHING });

/** Every value on the topic's one partition, read from the start until `count` are seen. */
async function readValues(topic: string, count: number): Promise<string[]> {
  const values: string[] = [];
  const consumer = plain.consumer({ groupId: `${topic}.reader` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ message }) => {
      values.push(message.value?.toString() ?? '');
    },
  });
  await until(
    () => values.length,
    (n) => n >= count,
    30_000,
    `${count} records on ${topic}`,
  ).catch(() => {});
  await consumer.disconnect();
  return values;
}

async function topicOf(name: string): Promise<string> {
  const topic = `${uniquePrefix(name)}.events`;
  await ensureTopics(plain, [
    { name: topic, partitions: 1, config: { 'cleanup.policy': 'delete', 'retention.ms': '600000' } },
  ]);
  return topic;
}

const records = (tag: string, n: number) => Array.from({ length: n }, (_, i) => ({ key: 'k', value: `${tag}-${i}` }));

/** Writes `first` while every answer is lost (it fails, though the broker wrote it), then `second`. */
async function loseThenWrite(t: Test, topic: string, first: number, second: number): Promise<string[]> {
  const producer = new DurableProducer(kafka, { retryForMs: 500 });
  await producer.connect();
  try {
    await producer.send(topic, records('warm', 1));
    losingAnswers = true;
    const lost = answersLost.count;
    await t.rejects(producer.send(topic, records('unanswered', first)), 'the unanswered write fails');
    losingAnswers = false;
    t.ok(answersLost.count > lost, 'answers were lost');
    await producer.send(topic, records('next', second));
    return await readValues(topic, 1 + first + second);
  } finally {
    losingAnswers = false;
    await producer.disconnect();
  }
}

t.test('a write of the same size after an unanswered one is written, not taken for its retry', async (t) => {
  const topic = await topicOf('lost-same');
  const values = await loseThenWrite(t, topic, 3, 3);
  t.same(
    values.filter((v) => v.startsWith('next-')),
    ['next-0', 'next-1', 'next-2'],
    'every record of the next write is on the topic',
  );
  t.ok(values.includes('unanswered-0'), 'the broker did write the unanswered one');
});

t.test('a write of another size after an unanswered one is accepted, not refused as out of order', async (t) => {
  const topic = await topicOf('lost-other');
  const values = await loseThenWrite(t, topic, 3, 5);
  t.same(
    values.filter((v) => v.startsWith('next-')),
    ['next-0', 'next-1', 'next-2', 'next-3', 'next-4'],
    'every record of the next write is on the topic',
  );
});
