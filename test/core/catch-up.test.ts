/**
 * core/kafka/catch-up.ts (#31 item 9): a read waits until the view has read its topic to the end
 * as it was when the read began, on every partition; an end it cannot learn, or a view that does
 * not reach it, is a 503 UNAVAILABLE (retriable), and the next read asks a fresh admin client.
 */
import t from 'tap';
import type { Kafka } from 'kafkajs';
import { topicCatchUp, type Reader } from '../../core/kafka/catch-up.ts';
import { SluiceError } from '../../core/errors.ts';

/** A Kafka whose admin answers `ends()` for the topic's end offsets; counts the clients made. */
function fakeKafka(ends: () => Promise<{ partition: number; high: string }[]>) {
  const made = { admins: 0, disconnected: 0, asked: [] as string[] };
  const kafka = {
    admin: () => {
      made.admins++;
      return {
        connect: async () => {},
        disconnect: async () => {
          made.disconnected++;
        },
        fetchTopicOffsets: async (topic: string) => {
          made.asked.push(topic);
          return ends();
        },
      };
    },
  } as unknown as Kafka;
  return { kafka, made };
}

/** A reader that has read each partition up to `at[partition]`, and notes what it was asked. */
function fakeReader(at: Record<number, bigint>) {
  const asked: Array<[string, number, bigint]> = [];
  const reader: Reader = {
    reached: async (topic, partition, offset) => {
      asked.push([topic, partition, BigInt(offset)]);
      return (at[partition] ?? 0n) >= BigInt(offset);
    },
  };
  return { reader, asked };
}

const unavailable = (t: Tap, err: unknown, what: string) => {
  t.ok(err instanceof SluiceError, `${what}: a SluiceError`);
  t.equal((err as SluiceError).code, 'UNAVAILABLE', `${what}: UNAVAILABLE`);
  t.equal((err as SluiceError).status, 503, `${what}: 503`);
};
type Tap = { ok(v: unknown, m: string): unknown; equal(a: unknown, b: unknown, m: string): unknown };

t.test('a read waits for every partition up to the end the broker names', async (t) => {
  const { kafka, made } = fakeKafka(async () => [
    { partition: 0, high: '7' },
    { partition: 1, high: '0' },
  ]);
  const { reader, asked } = fakeReader({ 0: 7n });
  const caughtUp = topicCatchUp(kafka, reader, 'sluice.event-types');
  await caughtUp();
  await caughtUp();
  t.same(made.asked, ['sluice.event-types', 'sluice.event-types'], 'the end is asked for at every read');
  t.same(
    asked.map(([topic, p, o]) => `${topic}:${p}@${o}`),
    ['sluice.event-types:0@7', 'sluice.event-types:1@0', 'sluice.event-types:0@7', 'sluice.event-types:1@0'],
  );
  t.equal(made.admins, 1, 'one admin client, kept');
  await caughtUp.close();
  t.equal(made.disconnected, 1, 'closed: disconnected');
});

t.test('a view that does not reach the end is a 503', async (t) => {
  const { kafka } = fakeKafka(async () => [{ partition: 0, high: '8' }]);
  const { reader } = fakeReader({ 0: 7n });
  const err = await topicCatchUp(kafka, reader, 'sluice.event-types')().catch((e) => e);
  unavailable(t, err, 'one record short');
});

t.test('an end the broker does not give is a 503, and the next read connects afresh', async (t) => {
  let fail = true;
  const { kafka, made } = fakeKafka(async () => {
    if (fail) throw new Error('broker gone');
    return [{ partition: 0, high: '3' }];
  });
  const { reader } = fakeReader({ 0: 3n });
  const caughtUp = topicCatchUp(kafka, reader, 'sluice.event-types');
  unavailable(t, await caughtUp().catch((e) => e), 'the broker failed');
  t.equal(made.disconnected, 1, 'the failed client was let go');
  fail = false;
  await caughtUp();
  t.equal(made.admins, 2, 'a new client for the next read');
  await caughtUp.close();
});
