/**
 * A stored view of a compacted topic (the endpoints) resumes from its stored offset only while the
 * store is recent: a delete on such a topic is a tombstone that compaction drops a day later, so a
 * store that stopped reading longer ago could keep a deleted endpoint for ever. Such a store is
 * emptied and read again from the beginning; a recent one reads only the tail.
 */
import t from 'tap';
import kafkajs from 'kafkajs';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { brokers, uniquePrefix } from '../helpers/sluice.ts';
import {
  COMPACTED_STORE_FRESH_MS,
  StateConsumer,
  type StateRecord,
  type StoredView,
} from '../../core/kafka/state-consumer.ts';
import { ViewStore } from '../../core/store/view-store.ts';
import { ensureTopics } from '../../core/kafka/topic-admin.ts';

const { Kafka, logLevel } = kafkajs;
const kafka = new Kafka({ clientId: 'compacted-resume-test', brokers: brokers(), logLevel: logLevel.NOTHING });
const admin = kafka.admin();
const producer = kafka.producer();
await admin.connect();
await producer.connect();
const dir = mkdtempSync(join(tmpdir(), 'sluice-compacted-'));
t.teardown(async () => {
  await producer.disconnect();
  await admin.disconnect();
  rmSync(dir, { recursive: true, force: true });
});

const topic = `${uniquePrefix('compacted-resume')}.endpoints`;
// ensureTopics retries what a busy broker answers while it creates them (unknown topic).
await ensureTopics(kafka, [{ name: topic, partitions: 1, config: {} }]);
await producer.send({ topic, messages: Array.from({ length: 20 }, (_, i) => ({ key: `k${i}`, value: 'v' })) });

function compactedView(): StoredView & { seen: number } {
  return {
    topic,
    compacted: true,
    seen: 0,
    attach(store: ViewStore) {
      store.table('compacted-test');
    },
    apply(_r: StateRecord) {
      this.seen++;
    },
  };
}

/** Starts a state consumer on the store in `dir`, runs `before` on the store first; returns what the view applied. */
async function run(before: (store: ViewStore) => Promise<void> = async () => {}): Promise<number> {
  const store = await ViewStore.open(dir);
  await before(store);
  const view = compactedView();
  const state = new StateConsumer(kafka, [view], { groupPrefix: uniquePrefix('compacted'), store });
  await state.start();
  await state.stop();
  await store.close();
  return view.seen;
}

t.test('a recent store reads the tail; one last written over 12 hours ago reads the topic again', async (t) => {
  t.equal(await run(), 20, 'a new store reads the whole topic');
  t.equal(await run(), 0, 'a store written moments ago resumes at its offset');
  const aged = async (store: ViewStore) => {
    await store.transaction(() =>
      store.table<number, string>('offsets.written').put('at', Date.now() - COMPACTED_STORE_FRESH_MS - 60_000),
    );
  };
  t.equal(await run(aged), 20, 'a store older than a tombstone is sure to be kept is rebuilt');
  t.equal(await run(), 0, 'and resumes again after that');
});
