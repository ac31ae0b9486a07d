import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startTestNode, brokers, uniquePrefix, call } from '../helpers/sluice.ts';
import { receiver, registerEndpoint, type TestReceiver } from './receiver.ts';

const EVENTS = 800;
const ENDPOINTS = 4; // 3200 deliveries
const root = fileURLToPath(new URL('../..', import.meta.url));
const prefix = uniquePrefix('crash');
const env = { SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true', SLUICE_TIME_SCALE: '600', SLUICE_TOPIC_PARTITIONS: '3' };
const node = await startTestNode(env, { prefix });
const receivers: TestReceiver[] = [];
const children: ChildProcess[] = [];
t.teardown(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const r of receivers) await r.close();
  await node.close();
});

function startDispatcher(): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['bin/sluice.js', 'dispatcher'], {
    cwd: root,
    env: { ...process.env, ...env, KAFKA_BROKERS: brokers().join(','), SLUICE_TOPIC_PREFIX: prefix, SLUICE_LOG_LEVEL: 'error', SLUICE_PORT: '0', SLUICE_ADMIN_PORT: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      if (d.toString().includes('dispatcher running')) resolve(child);
    });
    child.once('exit', (code) => reject(new Error(`dispatcher exited early (${code})`)));
  });
}

t.test('a dispatcher killed with SIGKILL mid-way loses no delivery once another takes over', async (t) => {
  const token = await node.token(await node.client('admin', 'crash'));
  for (let i = 0; i < ENDPOINTS; i++) receivers.push(await receiver(200));
  // One receiver fails every first attempt, so retries are on the rungs when the kill comes.
  receivers[0].answerFor = (h) => (h.headers['x-service-delivery-attempt'] === '1' ? 500 : 200);
  const eps: Array<{ id: string }> = [];
  for (const r of receivers) eps.push(await registerEndpoint(node, token, r.url, ['*']));
  let first = await startDispatcher();

  const ids: string[] = [];
  const created = Date.now();
  for (let i = 0; i < EVENTS; i += 200) {
    const records = [];
    for (let j = i; j < Math.min(EVENTS, i + 200); j++) {
      const id = `crash-${j}`;
      ids.push(id);
      records.push({ key: 'crash', value: JSON.stringify({ id, tenant_id: 'crash', type: 'pipeline.completed', data: { j }, created_at: created }) });
    }
    // Straight onto sluice.events, as a data-plane producer would.
    await node.ctx.producer.send(node.ctx.topics.events, records);
  }
  const total = EVENTS * ENDPOINTS;
  const received = () => receivers.reduce((n, r, i) => n + r.events().filter((h) => !(i === 0 && h.headers['x-service-delivery-attempt'] === '1')).length, 0);
  const deadline = Date.now() + 60_000;
  while (received() < total * 0.25 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  const atKill = received();
  first.kill('SIGKILL');
  await new Promise((r) => first.once('exit', r));
  t.ok(atKill < total, `killed after ${atKill} of ${total} deliveries`);
  first = await startDispatcher();

  const pairs = () => {
    const got = new Map<string, number>();
    receivers.forEach((r, i) => {
      for (const h of r.events()) if (!(i === 0 && h.headers['x-service-delivery-attempt'] === '1')) got.set(`${h.body.id}@${i}`, (got.get(`${h.body.id}@${i}`) ?? 0) + 1);
    });
    return got;
  };
  const dlqIds = async () => new Set(((await call(node.base, 'GET', '/v1/webhooks/dlq?limit=1000', { token })).json.data as Array<{ event_id: string; endpoint_id: string }>).map((e) => `${e.event_id}@${eps.findIndex((x) => x.id === e.endpoint_id)}`));
  const end = Date.now() + 120_000;
  let missing: string[] = [];
  for (;;) {
    const got = pairs();
    const dead = await dlqIds();
    missing = [];
    for (const id of ids) for (let i = 0; i < ENDPOINTS; i++) if (!got.has(`${id}@${i}`) && !dead.has(`${id}@${i}`)) missing.push(`${id}@${i}`);
    if (missing.length === 0 || Date.now() > end) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  t.same(missing.slice(0, 10), [], `every delivery arrived or was dead-lettered (${missing.length} missing)`);
  const got = pairs();
  const duplicates = [...got.values()].reduce((n, c) => n + (c - 1), 0);
  t.comment(`deliveries: ${total}; received ${received()} requests; ${duplicates} duplicates (at-least-once after SIGKILL); ${atKill} had arrived when the first dispatcher was killed`);
  console.log(`# crash test: ${duplicates} duplicate deliveries out of ${total}`);
  first.kill('SIGTERM');
});
