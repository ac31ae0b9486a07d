/**
 * The heartbeat (core/kafka/heartbeat.ts) against a real broker: written with acks=all to the
 * revocations topic and read back through the node's own revocation view, it reports each of its
 * own records once read, ignores other nodes' and never enters the revocation list; stopping it
 * leaves a tombstone. A node with SLUICE_KAFKA_RACK keeps its contact time from heartbeats alone.
 */
import t from 'tap';
import { Heartbeat, HEARTBEAT_PREFIX } from '../../core/kafka/heartbeat.ts';
import { startTestNode, until } from '../helpers/sluice.ts';

const node = await startTestNode();
t.teardown(() => node.close());
const topic = node.ctx.topics.revocations;

/** Every heartbeat record the revocation view reads, and what the heartbeats under test heard. */
const seen: { key: string; value: string | null }[] = [];
const heard: Record<string, number[]> = { ours: [], theirs: [] };
const ours = new Heartbeat(node.ctx.producer, topic, 'ours', 100, (at) => heard.ours.push(at));
const theirs = new Heartbeat(node.ctx.producer, topic, 'theirs', 100, (at) => heard.theirs.push(at));
node.ctx.revocations.onHeartbeat = (key, value) => {
  seen.push({ key, value: value === null ? null : value.toString() });
  ours.read(key, value);
  theirs.read(key, value);
};

/** Waits until `check` holds (work that happens elsewhere: a write read back). */
const waitFor = (check: () => boolean, what: string) => until(check, (ok) => ok, 15_000, what, 20);

t.test('each heartbeat is heard once read back, by its own node only', async (t) => {
  const started = Date.now();
  ours.start();
  theirs.start();
  await waitFor(() => heard.ours.length >= 3 && heard.theirs.length >= 3, 'three heartbeats of each read back');
  t.ok(
    heard.ours.every((at, i) => at >= started && (i === 0 || at > heard.ours[i - 1])),
    `each heard time is a later send time (${heard.ours.length} heard)`,
  );
  t.equal(ours.readBack, heard.ours.length, 'every read-back counted once');
  const sentAtsOf = (node: string) =>
    seen.filter((r) => r.key === `${HEARTBEAT_PREFIX}${node}` && r.value).map((r) => JSON.parse(r.value!).sent_at);
  t.same(heard.ours, sentAtsOf('ours'), 'heard: the send time of each of its own records, in the order read');
  t.same(heard.theirs, sentAtsOf('theirs'), 'and the other heartbeat heard only its own');
  const keys = new Set(seen.map((s) => s.key));
  t.same([...keys].sort(), [`${HEARTBEAT_PREFIX}ours`, `${HEARTBEAT_PREFIX}theirs`], 'both keys on the topic');
  t.equal(node.ctx.revocations.get(`${HEARTBEAT_PREFIX}ours`), undefined, 'a heartbeat is never a revocation');
  t.notOk(node.ctx.revocations.refuses(`${HEARTBEAT_PREFIX}ours`, 0), 'nor refuses anything');
});

t.test('a record that is not a heartbeat of ours is ignored', async (t) => {
  const before = heard.ours.length;
  ours.read(`${HEARTBEAT_PREFIX}ours`, Buffer.from('not json'));
  ours.read(`${HEARTBEAT_PREFIX}ours`, Buffer.from('{"sent_at":"soon"}'));
  ours.read(`${HEARTBEAT_PREFIX}ours`, null);
  ours.read(`${HEARTBEAT_PREFIX}theirs`, Buffer.from(JSON.stringify({ sent_at: Date.now() })));
  t.equal(heard.ours.length, before, 'nothing heard from a bad value, a tombstone or another node');
});

t.test('stop leaves a tombstone and ends the beats', async (t) => {
  await ours.stop();
  await theirs.stop();
  await waitFor(
    () => seen.some((s) => s.key === `${HEARTBEAT_PREFIX}ours` && s.value === null),
    'the tombstone of ours read back',
  );
  const after = ours.sent;
  await new Promise((res) => setTimeout(res, 400));
  t.equal(ours.sent, after, 'no heartbeat sent after stop');
});

t.test('a node in a rack counts its contact with Kafka from its heartbeats, not from fetches', async (t) => {
  const racked = await startTestNode({ SLUICE_KAFKA_RACK: 'r1', SLUICE_KAFKA_STALE_MS: '2000' });
  t.teardown(() => racked.close());
  const sentAts: number[] = [];
  const own = racked.ctx.revocations.onHeartbeat!;
  racked.ctx.revocations.onHeartbeat = (key, value) => {
    if (key.startsWith(`${HEARTBEAT_PREFIX}r1-`) && value) sentAts.push(JSON.parse(value.toString()).sent_at);
    own(key, value);
  };
  const state = racked.ctx.state;
  const first = state.lastContactAt;
  // Heartbeats every 500 ms (a quarter of the stale time): the contact time moves with them.
  await waitFor(() => state.lastContactAt > first && sentAts.length > 0, 'the contact time advanced');
  const second = state.lastContactAt;
  await waitFor(() => state.lastContactAt > second, 'and again');
  t.ok(sentAts.length >= 2, `the node wrote its own heartbeats (${sentAts.length} read back)`);
  t.ok(sentAts.includes(state.lastContactAt), 'its contact time is the send time of a heartbeat read back');
  // Its heartbeats keep it serving: a token is issued, not refused as by a stale node (503).
  const client = await racked.client('admin', 'acme');
  t.ok(await racked.token(client), 'the node issues tokens');
});
