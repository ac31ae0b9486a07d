/**
 * A stopping process does not wait on idle fetches it has no use for. A view consumer's client is
 * let go once the views stop (core/kafka/client.ts `releasableKafka`): its sockets no longer keep
 * the process alive while the leave behind a fetch in flight goes on. A stopping rotation leader
 * writes a record nothing reads to the lease topic (core/rotation/leader-lease.ts), which ends its
 * own fetch in flight so its leave goes at once; a follower, which fetches nothing, writes none.
 */
import t from 'tap';
import kafkajs from 'kafkajs';
import { releasableKafka } from '../../core/kafka/client.ts';
import { LeaderLease } from '../../core/rotation/leader-lease.ts';
import { ensureTopics } from '../../core/kafka/topic-admin.ts';
import { brokers, uniquePrefix, until } from '../helpers/sluice.ts';

const liveSockets = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;

t.test("a released client's sockets keep the process alive no longer", async (t) => {
  const before = liveSockets();
  const { kafka, release } = releasableKafka(brokers(), 'releasable-test');
  const admin = kafka.admin();
  await admin.connect();
  await admin.listTopics();
  const open = liveSockets();
  t.ok(open > before, `its connections count as live until released (${before} → ${open})`);
  release();
  t.equal(liveSockets(), before, 'released: none of them keeps the process alive');
  // One opened after the release is let go from the start. (The test holds the process alive
  // itself meanwhile: with nothing else, awaiting a released socket ends the process.)
  const hold = setInterval(() => {}, 1000);
  t.teardown(() => clearInterval(hold));
  const later = kafka.admin();
  await later.connect();
  await later.listTopics();
  t.equal(liveSockets(), before, 'nor one opened after it (a second admin of the client)');
  await later.disconnect();
  await admin.disconnect();
});

t.test('a stopping leader wakes its own fetch with a record no view reads; a follower writes nothing', async (t) => {
  const topic = `${uniquePrefix('lease')}.control`;
  const { Kafka, logLevel } = kafkajs;
  const kafka = new Kafka({ clientId: 'lease-test', brokers: brokers(), logLevel: logLevel.NOTHING });
  await ensureTopics(kafka, [{ name: topic, partitions: 1, config: {} }]);
  const producer = kafka.producer();
  await producer.connect();
  t.teardown(() => producer.disconnect());
  const wakes: string[] = [];
  const wake = (who: string) => async () => {
    wakes.push(who);
    await producer.send({ topic, messages: [{ key: 'rotation-leader:stopping', value: null }] });
  };
  const group = uniquePrefix('lease-group');
  const first = new LeaderLease(kafka, topic, group, 3000, wake('first'));
  await first.start();
  await until(() => first.isLeader, Boolean, 30_000, 'the first candidate leads');
  const second = new LeaderLease(kafka, topic, group, 3000, wake('second'));
  await second.start();
  await until(() => first.isLeader !== second.isLeader, Boolean, 30_000, 'one of the two leads');
  const [leader, follower] = first.isLeader ? [first, second] : [second, first];
  const leaderName = leader === first ? 'first' : 'second';
  await follower.stop();
  t.same(wakes, [], 'the follower stopped without a write');
  await leader.stop();
  t.same(wakes, [leaderName], 'the leader wrote its one record as it stopped');
  const admin = kafka.admin();
  await admin.connect();
  const [end] = await admin.fetchTopicOffsets(topic);
  await admin.disconnect();
  t.equal(end.high, '1', 'the record is on the lease topic');
});
