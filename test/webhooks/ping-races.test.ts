/**
 * An answer says something only of the URL it came from (issue 31 item 2): a verify whose ping
 * went to the endpoint's old URL does not mark a new URL verified, and a 410 or an outage at the
 * old URL does not disable or mark failing the endpoint once it has a new one.
 */
import { createServer } from 'node:http';
import t from 'tap';
import { disableEndpoint, recordFailingSince } from '../../core/webhooks/endpoint-service.ts';
import { call, freePort, startTestNode } from '../helpers/sluice.ts';
import { startReceiver } from '../helpers/webhook-receiver.ts';

const node = await startTestNode({ SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true' });
const closers: Array<() => Promise<void>> = [];
t.teardown(async () => {
  for (const c of closers) await c();
  await node.close();
});
const token = await node.token(await node.client('admin', 'ping-races'));
const register = (url: string) =>
  call(node.base, 'POST', '/v1/webhooks/endpoints', { token, body: { url, events: ['inference.completed'] } });

/** A receiver that answers 200, after `delayMs` once `slow` is set. */
async function slowReceiver() {
  const state = { slow: false, pinged: 0 };
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      state.pinged++;
      setTimeout(() => res.end('ok'), state.slow ? 1500 : 0);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return { state, url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook` };
}

t.test('a verify of the old URL, answered after a PATCH moved the endpoint, verifies nothing', async (t) => {
  const old = await slowReceiver();
  const ep = (await register(old.url)).json;
  t.equal(ep.state, 'ACTIVE');
  old.state.slow = true;
  const before = old.state.pinged;
  const verifying = call(node.base, 'POST', `/v1/webhooks/endpoints/${ep.id}/verify`, { token });
  while (old.state.pinged === before) await new Promise((r) => setTimeout(r, 10));
  // The old URL has the ping and answers in 1.5 s; meanwhile the URL moves to one that refuses.
  const refusing = `http://127.0.0.1:${await freePort()}/hook`;
  const moved = await call(node.base, 'PATCH', `/v1/webhooks/endpoints/${ep.id}`, { token, body: { url: refusing } });
  t.equal(moved.status, 200);
  t.equal(moved.json.state, 'PENDING', 'the new URL refused its ping: PENDING');
  const verified = await verifying;
  t.equal(verified.status, 200);
  t.equal(verified.headers.get('sluice-ping-result'), 'ok', 'the old URL did answer');
  t.equal(verified.json.state, 'PENDING', 'but that says nothing of the new URL');
  const now = node.ctx.endpoints.get(ep.id)!;
  t.equal(now.url, refusing);
  t.equal(now.state, 'PENDING');
  t.equal(now.verified_at, null, 'never marked verified');
  const audit = await call(node.base, 'GET', '/v1/audit?limit=100', { token });
  const actions = (audit.json.data as { action: string; subject: string }[]).filter((e) => e.subject === ep.id);
  t.notOk(
    actions.some((e) => e.action === 'endpoint.enabled'),
    'nothing audited as enabled',
  );
});

t.test("the old URL's 410 or outage changes nothing once the endpoint has a new URL", async (t) => {
  const a = await startReceiver(200);
  const b = await startReceiver(200);
  closers.push(
    () => a.close(),
    () => b.close(),
  );
  const ep = (await register(a.url)).json;
  const moved = await call(node.base, 'PATCH', `/v1/webhooks/endpoints/${ep.id}`, { token, body: { url: b.url } });
  t.equal(moved.json.state, 'ACTIVE');
  // What the dispatcher writes after an attempt that went to the old URL a.
  t.equal(
    (await disableEndpoint(node.ctx, ep.id, 'the receiver answered 410 Gone', undefined, a.url))?.state,
    'ACTIVE',
  );
  await recordFailingSince(node.ctx, ep.id, 1_000, a.url);
  t.equal(node.ctx.endpoints.get(ep.id)?.failing_since ?? null, null, 'not marked failing');
  t.equal(node.ctx.endpoints.get(ep.id)?.state, 'ACTIVE', 'not disabled');
  // The same answers from the URL it has do count.
  await recordFailingSince(node.ctx, ep.id, 1_000, b.url);
  t.equal(node.ctx.endpoints.get(ep.id)?.failing_since, 1_000);
  t.equal(
    (await disableEndpoint(node.ctx, ep.id, 'the receiver answered 410 Gone', undefined, b.url))?.state,
    'DISABLED',
  );
});
