/**
 * The dispatcher under load: a burst far larger than its concurrency waits in memory (never a
 * rung), a flooding tenant does not stop another's deliveries, a Retry-After is honoured, batch
 * publish answers per item, and two dispatcher processes share one endpoint's backlog.
 */
import t from 'tap';
import type { ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import { spawnDispatcher } from '../../harness/sluice-cli.ts';
import { startTestNode, call, uniquePrefix } from '../helpers/sluice.ts';
import { awaitMarker, receiver, registerEndpoint, type TestReceiver } from './receiver.ts';

const env = {
  SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
  SLUICE_TIME_SCALE: '600',
  SLUICE_DISPATCH_CONCURRENCY: '8',
  SLUICE_DISPATCH_PER_ENDPOINT: '4',
  // What is under test is where a burst waits, not the slow-endpoint rule: a busy CI host stalling the
  // in-process receiver for 2 s (the default) must not make a healthy endpoint slow.
  SLUICE_DISPATCH_SLOW_MS: '10000',
};
const prefix = uniquePrefix('bp');
const node = await startTestNode(env, { dispatcher: true, prefix });
const receivers: TestReceiver[] = [];
const children: ChildProcess[] = [];
t.teardown(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  for (const r of receivers) await r.close();
  await node.close();
});
const rcv = async () => {
  const r = await receiver(200);
  receivers.push(r);
  return r;
};
const tokenFor = async (tenant: string) => node.token(await node.client('admin', tenant));
const deferred = () => node.ctx.metrics.get('sluice_deliveries_total', { outcome: 'deferred' });
const batch = (token: string, events: unknown[]) =>
  call(node.base, 'POST', '/v1/webhooks/events/batch', { token, body: { events } });
const unique = (r: TestReceiver) => new Set(r.events().map((h) => h.body.id)).size;

t.test('a burst of 3,000 to one healthy endpoint (concurrency 8) is delivered with zero deferrals', async (t) => {
  const token = await tokenFor('burst');
  const r = await rcv();
  await registerEndpoint(node, token, r.url, ['inference.completed']);
  const before = await deferred();
  for (let b = 0; b < 3; b++) {
    const res = await batch(
      token,
      Array.from({ length: 1000 }, (_, i) => ({ type: 'inference.completed', data: { n: b * 1000 + i } })),
    );
    t.equal(res.status, 202);
    t.equal(res.json.accepted, 1000);
  }
  await r.until(() => unique(r) >= 3000, 120_000, '3,000 deliveries');
  t.equal(unique(r), 3000, 'every event arrived');
  t.equal((await deferred()) - before, 0, 'no delivery went through a rung');
  t.equal(await node.ctx.metrics.get('sluice_deliveries_total', { outcome: 'retry' }), 0, 'and none was retried');
});

t.test('a tenant flooding its endpoint does not stop another tenant’s deliveries while the flood drains', async (t) => {
  const flood = await tokenFor('flood');
  const quiet = await tokenFor('quiet');
  // The flood's receiver answers nothing until the quiet tenant's events are all in: the flood's
  // backlog stays whole for as long as the quiet tenant needs (an order, not a race against a drain).
  let quietIn = () => {};
  const quietArrived = new Promise<void>((r) => (quietIn = r));
  const slowPort = await new Promise<{ url: string; count: () => number; close(): void }>((resolve) => {
    let n = 0;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const ping = JSON.parse(Buffer.concat(chunks).toString()).type === 'ping';
        if (ping) return void res.writeHead(200).end();
        void quietArrived.then(() => {
          n++;
          res.writeHead(204).end();
        });
      });
    });
    server.listen(0, '127.0.0.1', () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`,
        count: () => n,
        close: () => server.close(),
      }),
    );
  });
  t.teardown(() => slowPort.close());
  await registerEndpoint(node, flood, slowPort.url, ['inference.completed']);
  const q = await rcv();
  await registerEndpoint(node, quiet, q.url, ['inference.completed']);
  for (let b = 0; b < 3; b++)
    await batch(
      flood,
      Array.from({ length: 1000 }, (_, i) => ({ type: 'inference.completed', data: { n: b * 1000 + i } })),
    );
  await batch(
    quiet,
    Array.from({ length: 20 }, (_, i) => ({ type: 'inference.completed', data: { n: i } })),
  );
  await q.until(() => unique(q) >= 20, 60_000, "the quiet tenant's 20");
  t.equal(slowPort.count(), 0, "the quiet tenant's 20 arrived while all 3,000 of the flood were still waiting");
  quietIn();
  for (let i = 0; i < 600 && slowPort.count() === 0; i++) await new Promise((r) => setTimeout(r, 50));
  t.ok(slowPort.count() > 0, 'then the flood drains');
});

t.test(
  '503 with Retry-After: the next attempt waits at least that long, and it counts as a failed attempt',
  async (t) => {
    const token = await tokenFor('retry-after');
    const attempts: number[] = [];
    const attemptHeaders: string[] = [];
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        if (JSON.parse(Buffer.concat(chunks).toString()).type === 'ping') return void res.writeHead(200).end();
        attempts.push(Date.now());
        attemptHeaders.push(String(req.headers['x-service-delivery-attempt']));
        if (attempts.length === 1) res.writeHead(503, { 'retry-after': '2' }).end();
        else res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    t.teardown(() => server.close());
    await registerEndpoint(node, token, `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`, [
      'inference.completed',
    ]);
    await call(node.base, 'POST', '/v1/webhooks/events', { token, body: { type: 'inference.completed', data: {} } });
    for (let i = 0; i < 200 && attempts.length < 2; i++) await new Promise((r) => setTimeout(r, 50));
    t.equal(attempts.length, 2, 'attempted twice');
    t.ok(
      attempts[1] - attempts[0] >= 2000,
      `the second attempt came ${attempts[1] - attempts[0]} ms later ` +
        '(Retry-After: 2; the scaled backoff alone is 50 ms)',
    );
    t.same(attemptHeaders, ['1', '2'], 'the 503 counted as a failed attempt: the next one is attempt 2');
  },
);

t.test('batch publish: mixed valid and invalid items, repeated ids, limits', async (t) => {
  const token = await tokenFor('batch');
  const r = await rcv();
  await registerEndpoint(node, token, r.url, ['*']);
  const res = await batch(token, [
    { type: 'inference.completed', data: { n: 0 }, id: 'order-1' },
    { type: 'ping', data: null },
    { type: 'pipeline.failed', data: { n: 2 } },
    { type: 'inference.completed', data: { n: 3 }, id: 'order-1' },
    { data: 1 },
    { type: 'inference.completed', data: { n: 5 }, id: 'order-2' },
  ]);
  t.equal(res.status, 202);
  t.equal(res.json.accepted, 4);
  t.equal(res.json.rejected, 2);
  t.same(
    res.json.results.map((x: { index: number }) => x.index),
    [0, 1, 2, 3, 4, 5],
    'one result per item, in order',
  );
  t.equal(res.json.results[1].error.code, 'INVALID_REQUEST');
  t.match(res.json.results[1].error.errors[0].path, /^\$\.events\[1\]\.type/, 'the error path names the item');
  t.match(res.json.results[4].error.errors[0].path, /^\$\.events\[4\]\.type/);
  t.equal(res.json.results[0].id, 'order-1');
  t.equal(res.json.results[3].id, 'order-1', 'a repeated id answers its first occurrence');
  t.equal(res.json.results[0].matched_endpoints, 1);
  await r.until((e) => e.length >= 3, 30_000);
  // A marker published after the batch reaches the endpoint after anything the batch caused.
  t.same(
    (await awaitMarker(node, token, r, 'inference.completed'))
      .map((h) => h.body.id)
      .filter((id) => id.startsWith('order'))
      .sort(),
    ['order-1', 'order-2'],
    'order-1 delivered once',
  );
  const again = await batch(token, [{ type: 'inference.completed', data: { n: 9 }, id: 'order-2' }]);
  t.equal(again.json.results[0].id, 'order-2', 'an id published by an earlier batch is idempotent too');
  const afterAgain = await awaitMarker(node, token, r, 'inference.completed');
  t.equal(afterAgain.filter((h) => h.body.id === 'order-2').length, 1, 'and is not delivered again');

  t.equal((await batch(token, [{ type: 'ping', data: null }])).status, 400, 'every item invalid: 400');
  t.equal((await batch(token, [])).status, 400, 'no items: 400');
  t.equal(
    (
      await batch(
        token,
        Array.from({ length: 1001 }, () => ({ type: 'inference.completed', data: null })),
      )
    ).status,
    400,
    '1,001 items: 400',
  );
  const big = await batch(
    token,
    Array.from({ length: 5 }, () => ({ type: 'inference.completed', data: 'x'.repeat(250_000) })),
  );
  t.equal(big.status, 413, 'more than 1 MiB: 413');
  const narrow = await node.token(await node.client('webhook-publisher', 'batch'), 'webhooks:read');
  t.equal((await batch(narrow, [{ type: 'inference.completed', data: null }])).status, 403, 'needs events:publish');
});

const startDispatcher = () => spawnDispatcher(prefix, env, (c) => children.push(c));

t.test('two sluice dispatcher processes share one endpoint’s backlog and deliver every event', async (t) => {
  // The in-process dispatcher leaves, so only the two processes consume.
  await node.workers.dispatcher.stop();
  delete node.workers.dispatcher;
  const [a, b] = await Promise.all([startDispatcher(), startDispatcher()]);
  const token = await tokenFor('shared');
  const r = await rcv();
  await registerEndpoint(node, token, r.url, ['inference.completed']);
  for (let k = 0; k < 2; k++)
    await batch(
      token,
      Array.from({ length: 1000 }, (_, i) => ({ type: 'inference.completed', data: { n: k * 1000 + i } })),
    );
  await r.until(() => unique(r) >= 2000, 120_000, '2,000 deliveries');
  t.equal(unique(r), 2000, 'every event arrived');
  const delivered = async (url: string) =>
    Number(/sluice_deliveries_total\{outcome="delivered"\} (\d+)/.exec(await (await fetch(url)).text())?.[1] ?? 0);
  const [da, db] = [await delivered(a.metrics), await delivered(b.metrics)];
  t.ok(da > 0 && db > 0, `both processes delivered part of the one endpoint's backlog (${da} + ${db})`);
  t.ok(da + db >= 2000, 'between them, all of it');
});
