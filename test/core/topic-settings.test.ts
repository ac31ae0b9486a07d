import t from 'tap';
import { createKafka } from '../../core/kafka/client.ts';
import { reconcileTopicConfig, ensureTopics } from '../../core/kafka/topic-admin.ts';
import { loadConfig } from '../../core/config.ts';
import { openContext } from '../../core/context.ts';
import { topicNames } from '../../core/topics.ts';
import { brokers, uniquePrefix } from '../helpers/sluice.ts';

const DAY = 24 * 3600 * 1000;

t.test('reconcileTopicConfig raises retention, never lowers it, never changes cleanup', async (t) => {
  t.same(
    reconcileTopicConfig('x', { 'retention.ms': '1000' }, { 'retention.ms': String(7 * DAY) }, false),
    { 'retention.ms': String(7 * DAY) },
    'a shorter retention is raised',
  );
  t.same(
    reconcileTopicConfig('x', { 'retention.ms': String(7 * DAY) }, { 'retention.ms': '1000' }, false),
    {},
    'a longer one is kept',
  );
  t.same(
    reconcileTopicConfig('x', { 'retention.ms': '-1' }, { 'retention.ms': String(7 * DAY) }, false),
    {},
    'forever is longer than anything',
  );
  t.same(
    reconcileTopicConfig('x', { 'retention.ms': String(7 * DAY) }, { 'retention.ms': '-1' }, false),
    { 'retention.ms': '-1' },
    'and is raised to',
  );
  t.same(
    reconcileTopicConfig('x', {}, { 'retention.ms': '5' }, false),
    { 'retention.ms': '5' },
    'a missing setting is set',
  );
  t.throws(
    () => reconcileTopicConfig('x', { 'cleanup.policy': 'compact' }, { 'cleanup.policy': 'delete' }, false),
    /cleanup.policy=compact/,
    'a different cleanup is refused',
  );
  t.throws(
    () => reconcileTopicConfig('x', { 'retention.ms': String(7 * DAY) }, { 'retention.ms': '1000' }, true),
    /never shortens/,
    'strict (scaled time) refuses a longer retention',
  );
});

t.test('a scaled-time start against real-time topics refuses and leaves them as they are', async (t) => {
  const prefix = uniquePrefix('topics');
  // SLUICE_DATA_DIR: npm test's scratch directory, so the view stores go with it (not into .cache/state).
  const env = {
    KAFKA_BROKERS: brokers().join(','),
    SLUICE_TOPIC_PREFIX: prefix,
    SLUICE_LOG_LEVEL: 'error',
    SLUICE_DATA_DIR: process.env.SLUICE_DATA_DIR,
  };
  const real = await openContext(loadConfig(env), { brokers: brokers() });
  await real.close();
  await t.rejects(
    openContext(loadConfig({ ...env, SLUICE_TIME_SCALE: '500' }), { brokers: brokers() }),
    /never shortens it/,
    'the scaled start refuses with a clear message',
  );
  const kafka = createKafka(brokers(), 'topic-settings-test');
  const admin = kafka.admin();
  await admin.connect();
  t.teardown(() => admin.disconnect());
  const dlq = topicNames(prefix).dlq;
  const read = async () =>
    (
      await admin.describeConfigs({
        includeSynonyms: false,
        resources: [{ type: 2, name: dlq, configNames: ['retention.ms'] }],
      })
    ).resources[0].configEntries[0].configValue;
  t.equal(await read(), String(7 * DAY), 'sluice.dlq still keeps 7 days');
  // A topic with a shorter retention than Sluice's (made by hand) is raised to Sluice's, not left short.
  await admin.alterConfigs({
    validateOnly: false,
    resources: [
      {
        type: 2,
        name: dlq,
        configEntries: [
          { name: 'cleanup.policy', value: 'delete' },
          { name: 'retention.ms', value: '60000' },
        ],
      },
    ],
  });
  await ensureTopics(kafka, [
    { name: dlq, partitions: 1, config: { 'cleanup.policy': 'delete', 'retention.ms': String(7 * DAY) } },
  ]);
  t.equal(await read(), String(7 * DAY), 'a shorter retention is raised to 7 days');
});
