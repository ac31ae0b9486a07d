/**
 * Every request Sluice sends to a tenant's target outside deliveries (a registration's ping,
 * verify, a PATCH's new URL, a test send) draws from one budget per endpoint and one per tenant
 * (ingress/routes/target-budget.ts): 429 RATE_LIMITED with Retry-After beyond it, and nothing
 * sent. What a failed ping tells the tenant is a class, never the network library's code.
 */
import { createServer as createTcpServer, type Socket } from 'node:net';
import t, { type Test } from 'tap';
import { ENDPOINT_BURST } from '../../ingress/routes/target-budget.ts';
import { failureClass } from '../../outbound/ping.ts';
import { call, freePort, startTestNode } from '../helpers/sluice.ts';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.ts';

// A tenant may have 10 requests sent at once (20 a minute).
const node = await startTestNode({
  SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
  SLUICE_TENANT_TARGET_REQUESTS_PER_MINUTE: '20',
});
const closers: Array<() => Promise<void>> = [];
t.teardown(async () => {
  for (const c of closers) await c();
  await node.close();
});
const receiver = async (status = 200): Promise<Receiver> => {
  const r = await startReceiver(status);
  closers.push(() => r.close());
  return r;
};
const tenant = async (name: string) => node.token(await node.client('admin', name));
const register = (token: string, url: string) =>
  call(node.base, 'POST', '/v1/webhooks/endpoints', { token, body: { url, events: ['inference.completed'] } });
const patch = (token: string, id: string, body: unknown) =>
  call(node.base, 'PATCH', `/v1/webhooks/endpoints/${id}`, { token, body });

function refused(t: Test, res: Awaited<ReturnType<typeof call>>, what: string) {
  t.equal(res.status, 429, `${what}: 429`);
  t.equal(res.json.code, 'RATE_LIMITED');
  t.equal(res.headers.get('content-type'), 'application/problem+json');
  const after = Number(res.headers.get('retry-after'));
  t.ok(Number.isInteger(after) && after >= 1, `${what}: Retry-After ${after}`);
}

t.test('30 sequential PATCHes with a new URL ping at most the endpoint burst; the rest are 429', async (t) => {
  const token = await tenant('budget-seq');
  const r = await receiver();
  const ep = (await register(token, r.url)).json;
  const before = r.received.length;
  const statuses: number[] = [];
  for (let i = 0; i < 30; i++) {
    const res = await patch(token, ep.id, { url: `${r.url}?n=${i}` });
    statuses.push(res.status);
    if (res.status === 429) refused(t, res, `PATCH ${i}`);
  }
  const ok = statuses.filter((s) => s === 200).length;
  t.ok(ok >= 1 && ok <= ENDPOINT_BURST, `${ok} PATCHes went through (burst ${ENDPOINT_BURST})`);
  t.equal(ok + statuses.filter((s) => s === 429).length, 30, 'only 200 and 429');
  t.equal(r.received.length - before, ok, 'a refused PATCH sends no ping');
  const plain = await patch(token, ep.id, { description: 'not a new URL' });
  t.equal(plain.status, 200, 'a PATCH that changes no URL sends nothing and needs no budget');
});

t.test('10 parallel PATCHes with new URLs: at most the burst is pinged', async (t) => {
  const token = await tenant('budget-par');
  const r = await receiver();
  const ep = (await register(token, r.url)).json;
  const before = r.received.length;
  const answers = await Promise.all(
    Array.from({ length: 10 }, (_, i) => patch(token, ep.id, { url: `${r.url}?p=${i}` })),
  );
  const ok = answers.filter((a) => a.status === 200).length;
  t.ok(ok <= ENDPOINT_BURST, `${ok} of 10 pinged`);
  for (const a of answers.filter((a) => a.status !== 200)) refused(t, a, 'parallel PATCH');
  t.equal(r.received.length - before, ok);
});

t.test('verify, test send and a new URL share one endpoint budget', async (t) => {
  const token = await tenant('budget-shared');
  const r = await receiver();
  const ep = (await register(token, r.url)).json;
  for (let i = 0; i < ENDPOINT_BURST; i++)
    t.equal((await call(node.base, 'POST', `/v1/webhooks/endpoints/${ep.id}/verify`, { token })).status, 200);
  const before = r.received.length;
  refused(t, await call(node.base, 'POST', `/v1/webhooks/endpoints/${ep.id}/test`, { token, body: {} }), 'test send');
  refused(t, await patch(token, ep.id, { url: `${r.url}?x=1` }), 'new URL');
  refused(t, await call(node.base, 'POST', `/v1/webhooks/endpoints/${ep.id}/verify`, { token }), 'verify');
  t.equal(r.received.length, before, 'none of them reached the receiver');
});

t.test("a tenant's budget bounds its registrations; another tenant's is its own", async (t) => {
  const token = await tenant('budget-tenant');
  const r = await receiver();
  const statuses: number[] = [];
  for (let i = 0; i < 13; i++) {
    const res = await register(token, r.url);
    statuses.push(res.status);
    if (res.status === 429) refused(t, res, `registration ${i}`);
  }
  t.same(statuses.slice(0, 10), Array(10).fill(201), 'half the minute (10) at once');
  t.ok(
    statuses.slice(10).every((s) => s === 429),
    `then 429 (${statuses.join(' ')})`,
  );
  t.equal(r.received.length, 10, 'only the registrations taken were pinged');
  const other = await tenant('budget-other');
  t.equal((await register(other, r.url)).status, 201, 'another tenant registers');
});

t.test('a failed ping is told as a class, never as the library code', async (t) => {
  const token = await tenant('budget-classes');
  const ok = await receiver();
  const notFound = await receiver(404);
  const closed = await freePort();
  const sockets = new Set<Socket>();
  const banner = createTcpServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.resume(); // reads (and drops) the request, so the client's close is seen
    s.end('SSH-2.0-OpenSSH_9.2\r\n');
  });
  await new Promise<void>((res) => banner.listen(0, '127.0.0.1', res));
  closers.push(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((res) => banner.close(() => res()));
  });
  const bannerPort = (banner.address() as { port: number }).port;
  const cases: Array<[string, string]> = [
    [`http://127.0.0.1:${closed}/hook`, 'connection refused'],
    [`http://127.0.0.1:${bannerPort}/hook`, 'no HTTP answer'],
    [notFound.url, 'HTTP 404'],
  ];
  for (const [url, expected] of cases) {
    const ep = (await register(token, ok.url)).json;
    const res = await patch(token, ep.id, { url });
    t.equal(res.status, 200);
    t.equal(res.headers.get('sluice-ping-result'), 'failed');
    t.equal(res.headers.get('sluice-ping-error'), expected, url);
    t.equal(res.json.state, 'PENDING');
  }
  await new Promise((r) => setTimeout(r, 300));
  t.equal(sockets.size, 0, 'Sluice closed its connection to the non-HTTP server');
  const audit = await call(node.base, 'GET', '/v1/audit?limit=100', { token });
  const reasons = JSON.stringify(audit.json.data);
  for (const code of ['ECONNREFUSED', 'UND_ERR', 'ECONNRESET', 'HPE_'])
    t.notOk(reasons.includes(code), `the audit log does not say ${code}`);
  t.match(reasons, /the ping to the new URL failed \(connection refused\)/);
});

t.test('failureClass maps every kind of failure to a few classes', async (t) => {
  const f = (error: string | null, status: number | null = null) => failureClass({ ok: false, status, error });
  t.equal(failureClass({ ok: true, status: 200, error: null }), null);
  t.equal(f(null, 500), 'HTTP 500');
  t.equal(f('HTTP 429, Retry-After 3 s', 429), 'HTTP 429');
  t.equal(f('ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:1'), 'connection refused');
  t.equal(f('no full response within 5000 ms'), 'timed out');
  t.equal(f('UND_ERR_SOCKET: other side closed'), 'no HTTP answer');
  t.equal(f('HPE_INVALID_CONSTANT: Expected HTTP/'), 'no HTTP answer');
  t.equal(f('ECONNRESET: read ECONNRESET'), 'no HTTP answer');
  t.equal(f('ERR_TLS_CERT_ALTNAME_INVALID: Hostname/IP does not match'), 'TLS failed');
  t.equal(f('DEPTH_ZERO_SELF_SIGNED_CERT: self-signed certificate'), 'TLS failed');
  t.equal(f('ENOTFOUND: getaddrinfo ENOTFOUND nowhere.invalid'), 'name not resolved');
  t.equal(f('UNPROCESSABLE_TARGET: the target host x resolves to an address that is not public'), 'target not allowed');
});
