import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLocalKafka } from '../../core/kafka/local-broker.ts';
import { loadConfig } from '../../core/config.ts';
import { startNode } from '../../cli/assemble.ts';
import { createClient } from '../../core/clients/provisioning.ts';
import { call, freePort, uniquePrefix } from '../helpers/sluice.ts';
import { freePorts } from '../../core/net/free-port.ts';
import { orNullAfter } from '../../core/deadline.ts';

// A broker of this test's own, so that stopping it harms nobody else.
const kafkaPort = await freePorts(2);
const dataDir = mkdtempSync(join(tmpdir(), 'sluice-failclosed-'));
const config = loadConfig({
  SLUICE_TOPIC_PREFIX: uniquePrefix('fc'),
  SLUICE_LOG_LEVEL: 'error',
  SLUICE_KAFKA_STALE_MS: '1000',
  SLUICE_HOST: '127.0.0.1',
  SLUICE_DATA_DIR: process.env.SLUICE_DATA_DIR,
});
const kafka = await startLocalKafka({ cacheDir: config.cacheDir, port: kafkaPort, dataDir, fresh: true, heapMb: 384 });
const node = await startNode(config, {
  brokers: kafka.brokers,
  ingress: true,
  port: await freePort(),
  adminPort: await freePort(),
});
const base = `http://127.0.0.1:${node.ingress!.port}`;
const admin = `http://127.0.0.1:${node.ingress!.adminPort}`;
t.teardown(async () => {
  await orNullAfter(node.close(), 5000);
  await kafka.stop();
  rmSync(dataDir, { recursive: true, force: true });
  // kafkajs keeps retrying the dead broker forever; once the report is out, leave.
  setTimeout(() => process.exit(), 1000).unref();
});

async function eventually(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

t.test('a node that lost Kafka refuses tokens with 503 and says so on /readyz', async (t) => {
  const c = await createClient(node.ctx, { tenant: 'acme', role: 'inference-reader' });
  const grant = () =>
    call(base, 'POST', '/v1/auth/token', {
      body: { grant_type: 'client_credentials', client_id: c.client_id, client_secret: c.client_secret },
    });
  const token = (await grant()).json.access_token as string;
  t.type(token, 'string');
  const before = await call(base, 'GET', '/v1/inference/models', { token });
  // Accepted and in scope: proxied, and with no upstream configured that is 502 UPSTREAM_UNAVAILABLE.
  t.same(
    { status: before.status, code: before.json?.code },
    { status: 502, code: 'UPSTREAM_UNAVAILABLE' },
    'tokens accepted while Kafka answers',
  );
  t.equal((await fetch(`${admin}/readyz`)).status, 200);

  await kafka.stop();

  t.ok(
    await eventually(async () => (await call(base, 'GET', '/v1/inference/models', { token })).status === 503, 30_000),
    'the token is refused once the bound passed',
  );
  const res = await call(base, 'GET', '/v1/inference/models', { token });
  t.equal(res.json.code, 'UNAVAILABLE');
  t.match(res.json.detail, /fail closed/);
  t.equal(res.headers.get('retry-after'), '1');
  const ready = await fetch(`${admin}/readyz`);
  t.equal(ready.status, 503, '/readyz says unavailable');
  const body = (await ready.json()) as { problem: string; kafka_staleness_ms: number };
  t.match(body.problem, /not heard from Kafka/);
  t.ok(body.kafka_staleness_ms > 1000);
  t.equal((await grant()).status, 503, 'no new tokens either');
});
