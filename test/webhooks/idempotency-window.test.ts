/**
 * The 24-hour idempotency window of `POST /v1/webhooks/events` with an `id` (core/webhooks/idempotency.ts,
 * publish.ts), on a ManualClock: a repeat a minute before the window ends answers the first publish's
 * 202 and publishes nothing (the endpoint gets no second delivery); a minute after it ends, the same
 * id is a new event and is delivered again.
 */
import t from 'tap';
import { Kafka, logLevel } from 'kafkajs';
import { ManualClock } from '../../core/clock.ts';
import { brokers, startTestNode } from '../helpers/sluice.ts';
import { awaitMarker, publish, receiver, registerEndpoint } from '../dispatcher/receiver.ts';

const MIN = 60_000;
// Written out, not imported: the test must not move with the product's constant.
const DAY = 24 * 3600_000;
const clock = new ManualClock();
// The rotation scheduler stays out of the way: the test moves the clock by a day.
const node = await startTestNode(
  { SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true', SLUICE_ROTATION_CHECK_MS: '3600000' },
  { clock, dispatcher: true },
);
const r = await receiver(200);
const admin = new Kafka({
  clientId: 'idempotency-window-test',
  brokers: brokers(),
  logLevel: logLevel.NOTHING,
}).admin();
await admin.connect();
t.teardown(async () => {
  await admin.disconnect();
  await r.close();
  await node.close();
});

/** Records on the events topic so far (a publish is answered only once Kafka acknowledged it). */
async function eventsWritten(): Promise<number> {
  const offsets = await admin.fetchTopicOffsets(node.ctx.topics.events);
  return offsets.reduce((n, o) => n + Number(o.high), 0);
}

t.test('a repeated id is one event for 24 h, and a new one after', async (t) => {
  const acme = await node.client('admin', 'acme');
  let token = await node.token(acme);
  await registerEndpoint(node, token, r.url, ['pipeline.completed', 'pipeline.failed']);
  const body = { type: 'pipeline.completed', id: 'order-42', data: { run: 1 } };
  const ofId = () => r.events().filter((h) => h.body.id === 'order-42');

  const before = await eventsWritten();
  const first = await publish(node, token, body);
  t.same({ status: first.status, json: first.json }, { status: 202, json: { id: 'order-42', matched_endpoints: 1 } });
  t.equal(await eventsWritten(), before + 1, 'the first publish writes one event');
  await r.until((e) => e.some((h) => h.body.id === 'order-42'), 30_000, 'the first delivery');
  const firstCreated = ofId()[0].body.created_at;

  clock.advance(DAY - MIN);
  token = await node.token(acme); // tokens live 15 minutes of the node's clock
  const written = await eventsWritten();
  const repeat = await publish(node, token, { ...body, data: { run: 2 } });
  t.same({ status: repeat.status, json: repeat.json }, { status: 202, json: first.json }, '23 h 59 min: same answer');
  t.equal(await eventsWritten(), written, 'and no event written');
  await awaitMarker(node, token, r, 'pipeline.failed');
  t.equal(ofId().length, 1, 'nor delivered');

  clock.advance(2 * MIN);
  token = await node.token(acme);
  const writtenBefore = await eventsWritten();
  const again = await publish(node, token, { ...body, data: { run: 3 } });
  t.same({ status: again.status, json: again.json }, { status: 202, json: first.json }, '24 h 1 min: accepted');
  t.equal(await eventsWritten(), writtenBefore + 1, 'as a new event');
  const hits = await r.until((e) => e.filter((h) => h.body.id === 'order-42').length >= 2, 15_000, 'a new delivery');
  const fresh = hits.filter((h) => h.body.id === 'order-42')[1];
  t.same(fresh.body.data, { run: 3 }, 'a new event: the data of the publish after the window');
  t.ok(Date.parse(fresh.body.created_at) > Date.parse(firstCreated), 'created after the first one');
  await awaitMarker(node, token, r, 'pipeline.failed');
  t.equal(ofId().length, 2, 'published once more, not twice');
});
