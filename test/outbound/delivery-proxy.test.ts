/**
 * SLUICE_DELIVERY_PROXY (issue 32 item 2): pings, deliveries and test sends go through the
 * operator's HTTP CONNECT proxy, a real proxy process here (test/helpers/connect-proxy.ts) that asks
 * for credentials; the target rules still hold for the target, and a proxy that refuses fails the
 * attempt as a class of its own.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import t from 'tap';
import { loadConfig } from '../../core/config.ts';
import { ConfigError } from '../../core/errors.ts';
import { attemptDelivery, createDeliveryAgent } from '../../outbound/attempt.ts';
import { failureClass } from '../../outbound/ping.ts';
import { guardedLookup } from '../../outbound/target-guard.ts';
import { call, startTestNode } from '../helpers/sluice.ts';
import { publish, receiver, registerEndpoint } from '../dispatcher/receiver.ts';

/** Starts the proxy process; resolves with its port and the CONNECT lines it printed so far. */
async function startProxy(credentials: string): Promise<{ port: number; lines: string[]; child: ChildProcess }> {
  const child = spawn(process.execPath, ['bin/run-ts.js', 'test/helpers/connect-proxy.ts', credentials], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines: string[] = [];
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const m = /^listening (\d+)$/.exec(line);
      if (m) resolve(Number(m[1]));
      else lines.push(line);
    });
    child.once('exit', (code) => reject(new Error(`the proxy exited (${code})`)));
  });
  return { port, lines, child };
}

const proxy = await startProxy('sluice:s3cret');
const node = await startTestNode(
  {
    SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
    SLUICE_DELIVERY_PROXY: `http://sluice:s3cret@127.0.0.1:${proxy.port}`,
  },
  { dispatcher: true },
);
const r = await receiver(200);
t.teardown(async () => {
  await r.close();
  await node.close();
  proxy.child.kill();
});
const target = `127.0.0.1:${new URL(r.url).port}`;
const tunnels = () => proxy.lines.filter((l) => l === `CONNECT ${target} 200`).length;

t.test('the ping, deliveries and a test send go through the proxy', async (t) => {
  const token = await node.token(await node.client('admin', 'proxied'));
  const ep = await registerEndpoint(node, token, r.url, ['inference.completed']);
  t.equal(ep.state, 'ACTIVE', 'the ping arrived through the proxy');
  t.ok(tunnels() >= 1, `the proxy opened a tunnel to the receiver (${proxy.lines.join('; ')})`);
  const before = tunnels();
  for (let i = 0; i < 3; i++)
    t.equal((await publish(node, token, { type: 'inference.completed', data: { i } })).status, 202);
  await r.until((e) => e.filter((h) => h.body.type === 'inference.completed').length >= 3, 30_000, 'the deliveries');
  t.ok(tunnels() > before, 'the dispatcher opened its own tunnel');
  const sent = await call(node.base, 'POST', `/v1/webhooks/endpoints/${ep.id}/test`, { token, body: {} });
  t.equal(sent.status, 200);
  t.equal(sent.json.ok, true, 'the test send went through it too');
  t.ok(
    proxy.lines.every((l) => l.startsWith('CONNECT ')),
    'nothing but CONNECT tunnels',
  );
});

t.test('the target rules hold for the target behind the proxy', async (t) => {
  const config = loadConfig({ SLUICE_DELIVERY_PROXY: `http://sluice:s3cret@127.0.0.1:${proxy.port}` });
  const agent = createDeliveryAgent(1, guardedLookup({ allowInsecure: false }), null, config.deliveryProxy);
  t.teardown(() => agent.destroy());
  const before = proxy.lines.length;
  const out = await attemptDelivery(
    `http://localhost:${new URL(r.url).port}/hook`,
    '{}',
    {},
    {
      timeoutMs: 3000,
      dispatcher: agent,
    },
  );
  t.equal(out.ok, false);
  t.match(out.error, /UNPROCESSABLE_TARGET/, 'a name that resolves to loopback is refused before any tunnel');
  t.equal(proxy.lines.length, before, 'the proxy was never asked');
});

t.test('a proxy that refuses the tunnel fails the attempt, told as such', async (t) => {
  const config = loadConfig({ SLUICE_DELIVERY_PROXY: `http://sluice:wrong@127.0.0.1:${proxy.port}` });
  const agent = createDeliveryAgent(1, undefined, null, config.deliveryProxy);
  t.teardown(() => agent.destroy());
  const out = await attemptDelivery(r.url, '{}', {}, { timeoutMs: 3000, dispatcher: agent });
  t.equal(out.ok, false);
  t.match(out.error, /PROXY_REFUSED.*407/);
  t.equal(failureClass(out), 'delivery proxy failed');
  // The proxy's own log line comes from another process: read until it is there.
  const deadline = Date.now() + 5000;
  while (!proxy.lines.includes(`CONNECT ${target} 407`) && Date.now() < deadline)
    await new Promise((res) => setTimeout(res, 20));
  t.ok(proxy.lines.includes(`CONNECT ${target} 407`), 'the proxy asked for credentials');
});

t.test('SLUICE_DELIVERY_PROXY is checked at start', async (t) => {
  t.equal(loadConfig({}).deliveryProxy, null);
  t.same(loadConfig({ SLUICE_DELIVERY_PROXY: 'http://10.0.0.1:3128' }).deliveryProxy, {
    host: '10.0.0.1',
    port: 3128,
    authorization: null,
  });
  t.equal(
    loadConfig({ SLUICE_DELIVERY_PROXY: 'http://u%40x:p@proxy' }).deliveryProxy?.authorization,
    `Basic ${Buffer.from('u@x:p').toString('base64')}`,
  );
  for (const bad of ['proxy:3128', 'https://proxy:3128', 'http://proxy:3128/path', 'socks5://proxy:1080'])
    t.throws(() => loadConfig({ SLUICE_DELIVERY_PROXY: bad }), ConfigError, bad);
});
