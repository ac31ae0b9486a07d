/**
 * How often a node's views talk to Kafka while nothing happens: a node that serves the API fails
 * closed when its views lose Kafka, so its views' first member fetches every
 * SLUICE_STATE_FETCH_WAIT_MS and heartbeats every second; a dispatcher-only node waits as long as
 * its delivery groups and heartbeats every 3 s, and still reads every change (a record ends a wait).
 */
import t from 'tap';
import { startNode } from '../../cli/assemble.ts';
import { loadConfig } from '../../core/config.ts';
import { brokers, startTestNode, uniquePrefix, until } from '../helpers/sluice.ts';

const serving = await startTestNode();
t.teardown(() => serving.close());

t.test('a serving node keeps its views in contact every second', async (t) => {
  t.same(serving.ctx.state.contact, { fetchWaitMs: serving.config.stateFetchWaitMs, heartbeatMs: 1000 });
});

t.test('a dispatcher-only node waits like its delivery groups, and still reads a change', async (t) => {
  const config = loadConfig({
    SLUICE_TOPIC_PREFIX: serving.config.topicPrefix,
    SLUICE_ADMIN_PORT: '0',
    SLUICE_LOG_LEVEL: 'error',
    SLUICE_HOST: '127.0.0.1',
    KAFKA_BROKERS: brokers().join(','),
    ...(process.env.SLUICE_DATA_DIR ? { SLUICE_DATA_DIR: process.env.SLUICE_DATA_DIR } : {}),
  });
  const node = await startNode(config, { brokers: brokers(), ingress: false, dispatcher: true });
  t.teardown(() => node.close());
  t.same(node.ctx.state.contact, { fetchWaitMs: 3000, heartbeatMs: 3000 });
  const client = await serving.client('admin', uniquePrefix('vc'));
  const seen = await until(
    () => node.ctx.clients.get(client.client_id) !== undefined,
    (v) => v,
    10_000,
    'the dispatcher-only node reads the new client',
  );
  t.ok(seen);
});
