/**
 * An operator command opens only the views it reads: `sluice admin create-client` against a
 * cluster whose DLQ holds entries materialises the audit chain (it appends to it) but never the
 * DLQ, and a context opened without the webhook views refuses to be read as if it had them.
 */
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { Kafka, logLevel } from 'kafkajs';
import { startTestNode, brokers, uniquePrefix } from '../helpers/sluice.ts';
import { cliEnv, runCli } from '../../harness/sluice-cli.ts';
import { ViewStore } from '../../core/store/view-store.ts';
import { openContext } from '../../core/context.ts';
import { SluiceError } from '../../core/errors.ts';

const prefix = uniquePrefix('adminviews');
const node = await startTestNode({}, { prefix });
const dataDir = mkdtempSync(join(tmpdir(), 'sluice-admin-views-'));
t.teardown(async () => {
  await node.close();
  rmSync(dataDir, { recursive: true, force: true });
});

// Three dead letters of tenant acme, straight onto the DLQ topic.
const kafka = new Kafka({ clientId: 'admin-views-test', brokers: brokers(), logLevel: logLevel.NOTHING });
const producer = kafka.producer();
await producer.connect();
const now = Date.now();
await producer.send({
  topic: node.ctx.topics.dlq,
  messages: [0, 1, 2].map((i) => ({
    key: 'acme',
    value: JSON.stringify({
      id: `dlq_${i}`,
      tenant_id: 'acme',
      endpoint_id: 'ep_1',
      event_type: 'a.b',
      event_id: `evt_${i}`,
      dead_lettered_at: new Date(now).toISOString(),
      expires_at: new Date(now + 86400_000).toISOString(),
      attempts: 17,
    }),
  })),
});
await producer.disconnect();

t.test('admin create-client appends to the audit chain without building the DLQ view', async (t) => {
  const r = await runCli(
    ['admin', 'create-client', '--tenant', 'acme', '--role', 'admin', '--json'],
    cliEnv(node.config, { SLUICE_DATA_DIR: dataDir }),
  );
  t.equal(r.code, 0, r.stderr);
  t.match(JSON.parse(r.stdout), { tenant_id: 'acme', role: 'admin' });
  const store = await ViewStore.open(join(dataDir, prefix, 'admin'));
  t.teardown(() => store.close());
  t.ok(store.offset(node.ctx.topics.audit, 0) > 0n, 'the audit view was read (the chain tail is needed to append)');
  t.equal(store.offset(node.ctx.topics.dlq, 0), 0n, 'nothing of the DLQ topic was applied');
});

t.test('a context without the webhook views says so when one is used', async (t) => {
  const opts = { brokers: brokers(), component: 'no-webhooks', views: 'admin' } as const;
  const ctx = await openContext({ ...node.config, dataDir }, opts);
  t.teardown(() => ctx.close());
  t.same(ctx.state.viewsOf(ctx.topics.dlq), [], 'no view consumes the DLQ topic');
  t.throws(() => ctx.dlq.count('acme', {}, Date.now()), SluiceError);
  t.throws(() => ctx.endpoints.get('ep_1'), /the endpoints view is not open/);
});
