/**
 * How often a node's views talk to Kafka while nothing happens: a node that serves the API fails
 * closed when its views lose Kafka, so its views' first member fetches every
 * SLUICE_STATE_FETCH_WAIT_MS and heartbeats every second; a dispatcher-only node's first member
 * waits and beats like the member apart, and still reads every change (a record ends a wait).
 */
import t from 'tap';
import { APART_WAIT_MS } from '../../core/kafka/state-consumer.ts';
import { startDispatcherNode, startTestNode, uniquePrefix, until } from '../helpers/sluice.ts';

const serving = await startTestNode();
t.teardown(() => serving.close());

t.test('a serving node keeps its views in contact every second', async (t) => {
  t.same(serving.ctx.state.contact, { fetchWaitMs: serving.config.stateFetchWaitMs, heartbeatMs: 1000 });
});

t.test('a dispatcher-only node waits like the member apart, and still reads a change', async (t) => {
  const node = await startDispatcherNode({ SLUICE_TOPIC_PREFIX: serving.config.topicPrefix });
  t.teardown(() => node.close());
  t.same(node.ctx.state.contact, { fetchWaitMs: APART_WAIT_MS, heartbeatMs: 3000 });
  const client = await serving.client('admin', uniquePrefix('vc'));
  const seen = await until(
    () => node.ctx.clients.get(client.client_id) !== undefined,
    (v) => v,
    10_000,
    'the dispatcher-only node reads the new client',
  );
  t.ok(seen);
});
