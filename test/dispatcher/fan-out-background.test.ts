/**
 * A fan-out batch that writes more than DETACH_AT records (dispatcher/fan-out.ts) is written in
 * the background, its partition paused meanwhile: every event is still delivered exactly once,
 * the partition reads on afterwards, and a stop commits the batch, so the group's offset reaches
 * the end of the topic and the next member repeats nothing.
 */
import t from 'tap';
import type { EachBatchPayload } from '../../core/kafka/client.ts';
import type { OutRecord } from '../../core/kafka/producers.ts';
import { DETACH_AT } from '../../dispatcher/fan-out.ts';
import { call, startTestNode } from '../helpers/sluice.ts';
import { fanOutOffsets } from './fan-out-offsets.ts';
import { nOf, publish, receiver, registerEndpoint } from './receiver.ts';

const node = await startTestNode(
  { SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true', SLUICE_TOPIC_PARTITIONS: '1' },
  { dispatcher: true },
);
let closed = false;
t.teardown(() => (closed ? undefined : node.close()));
const r = await receiver();
t.teardown(() => r.close());

// The sizes of the fan-out's writes to the deliveries topic (the publishes write elsewhere), and
// when the last one ended.
const writes: number[] = [];
let lastWriteEnded = 0;
const producer = node.ctx.producer;
const send = producer.send.bind(producer);
producer.send = async (topic: string, records: OutRecord[], opts?: { timeoutMs?: number }) => {
  await send(topic, records, opts);
  if (topic === node.ctx.topics.deliveries) {
    writes.push(records.length);
    lastWriteEnded = performance.now();
  }
};
// When the fan-out's handler of the big batch returned to kafkajs.
type Handler = (payload: EachBatchPayload, member: unknown) => Promise<void>;
const fanOut = (node.workers.dispatcher as unknown as { fanOut: { opts: { eachBatch: Handler } } }).fanOut;
const eachBatch = fanOut.opts.eachBatch;
let bigBatchReturned = 0;
fanOut.opts.eachBatch = async (payload, member) => {
  await eachBatch(payload, member);
  if (payload.batch.messages.length > DETACH_AT) bigBatchReturned = performance.now();
};

t.test('a batch of more than DETACH_AT records is written in the background, whole and once', async (t) => {
  const token = await node.token(await node.client('admin', 'acme'));
  const ep = await registerEndpoint(node, token, r.url, ['order.created']);
  t.equal(ep.state, 'ACTIVE');
  const n = 2 * DETACH_AT;
  // One request, one Kafka write: one fan-out batch of n events, one delivery record each.
  const events = Array.from({ length: n }, (_, i) => ({ type: 'order.created', data: { n: i } }));
  const res = await call(node.base, 'POST', '/v1/webhooks/events/batch', { token, body: { events } });
  t.equal(res.status, 202);
  await r.until((hits) => hits.length >= n, 60_000, `${n} events delivered`);
  t.ok(writes.reduce((a, b) => a + b, 0) >= n, `every event of the batch was written (${writes.join(', ')})`);
  // In the background: kafkajs had the batch back while its writes went on (inline, the handler
  // returns only after its last write).
  t.ok(bigBatchReturned > 0, 'the big batch was handled');
  t.ok(bigBatchReturned < lastWriteEnded, "the batch's handler returned before its writes ended");

  // The partition was resumed: an event published after the batch is fanned out too.
  const after = await publish(node, token, { type: 'order.created', data: { n } });
  t.equal(after.status, 202);
  const hits = await r.until((h) => h.length >= n + 1, 30_000, 'the next event delivered');
  const ns = hits.map(nOf).sort((a, b) => a - b);
  t.same(
    ns,
    Array.from({ length: n + 1 }, (_, i) => i),
    'each event delivered exactly once',
  );

  await node.close();
  closed = true;
  const [p] = await fanOutOffsets(node.config.topicPrefix);
  t.equal(p.committed, p.end, 'the fan-out committed to the end of the topic');
});
