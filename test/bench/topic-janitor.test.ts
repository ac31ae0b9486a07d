import t from 'tap';
import { spawnSync } from 'node:child_process';
import { createKafka } from '../../core/kafka/client.ts';
import { ownedPrefix, ownerOf, startTopicJanitor } from '../../harness/topic-janitor.ts';
import { brokers, uniquePrefix } from '../helpers/sluice.ts';

t.test('a prefix names its owner; other names have none', async (t) => {
  t.equal(ownerOf(`${ownedPrefix('t', 4242)}.deliveries`), 4242);
  t.equal(ownerOf(ownedPrefix('member-group', 17)), 17, 'a group id, dashes in its name');
  t.equal(ownerOf(ownedPrefix('a-1', 99)), 99, 'a name ending in digits');
  t.equal(ownerOf(`${uniquePrefix()}.events`), process.pid, "a test's prefix is its process's");
  t.equal(ownerOf('sluice.deliveries'), null, 'the default prefix');
  t.equal(ownerOf('t-1234abcd.events'), null, 'no pid');
  t.equal(ownerOf('regions-abc.t-1-0123abcd'), null, 'the owned part after a dot is not the prefix');
});

t.test('the janitor deletes the topics of ended processes, and only theirs', async (t) => {
  // A pid that has ended: a process that ran and was reaped.
  const ended = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], {
    encoding: 'utf8',
  });
  const deadPid = Number(ended.stdout);
  const gone = ownedPrefix('janitor', deadPid);
  const kept = uniquePrefix('janitor');
  const other = `janitor-${Date.now().toString(36)}`;
  const names = [`${gone}.a`, `${gone}.b`, `${kept}.a`, `${other}.a`];
  const admin = createKafka(brokers(), 'janitor-test').admin();
  await admin.connect();
  t.teardown(async () => {
    await admin.deleteTopics({ topics: names.slice(2) }).catch(() => {});
    await admin.disconnect();
  });
  await admin.createTopics({ waitForLeaders: true, topics: names.map((topic) => ({ topic, numPartitions: 1 })) });

  // Its own sweeps, not the one at stop, find them.
  const janitor = startTopicJanitor(brokers(), { everyMs: 200 });
  let left = new Set(await admin.listTopics());
  for (let i = 0; i < 100 && (left.has(`${gone}.a`) || left.has(`${gone}.b`)); i++) {
    await new Promise((r) => setTimeout(r, 100));
    left = new Set(await admin.listTopics());
  }
  const deleted = await janitor.stop({ sweep: false });
  t.notOk(left.has(`${gone}.a`) || left.has(`${gone}.b`), "the ended process's topics are deleted");
  t.ok(left.has(`${kept}.a`), "this live process's topic stays");
  t.ok(left.has(`${other}.a`), 'a topic with no owner stays');
  t.ok(deleted >= 2, `${deleted} deleted (the two, and any other ended test's)`);
});
