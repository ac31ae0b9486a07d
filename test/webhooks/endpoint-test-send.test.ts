/**
 * POST /v1/webhooks/endpoints/{id}/test (#22 item 5): a signed ping, or an event of a given type
 * and data, sent at once outside the queue; the answer carries the receiver's status, latency and
 * the first 1 KiB of its body (content-length and chunked), or the network error within 12 s.
 * Reserved kinds are refused, sends are rate limited per endpoint, another tenant's endpoint is
 * 404, and each send is audited.
 */
import t from 'tap';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import { call, startTestNode } from '../helpers/sluice.ts';
import { verifyWebhook } from '../../receiver-sdk/verify.ts';

const node = await startTestNode({ SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true' });
const EP = '/v1/webhooks/endpoints';
const admin = await node.client('admin', 'acme');
const token = await node.token(admin);

/** 5 KiB the receiver answers with: the test send returns its first 1 KiB. */
const BIG = Array.from({ length: 5 * 64 }, (_, i) => `${String(i).padStart(15, '0')}|`).join('');

type Mode = 'big' | 'chunked' | 'fail' | 'empty' | 'hang';
interface Hit {
  headers: IncomingHttpHeaders;
  rawBody: string;
  body: { id: string; type: string; data: unknown };
}
interface BodyReceiver {
  url: string;
  hits: Hit[];
  mode: Mode;
  close(): Promise<void>;
}

const receivers: BodyReceiver[] = [];
t.teardown(async () => {
  for (const r of receivers) await r.close();
  await node.close();
});

/** A receiver that answers every request as its mode says (a registration's ping included). */
async function bodyReceiver(mode: Mode = 'big'): Promise<BodyReceiver> {
  const hits: Hit[] = [];
  const hanging = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks).toString('utf8');
      hits.push({ headers: req.headers, rawBody, body: JSON.parse(rawBody) });
      if (r.mode === 'hang') return void hanging.add(res);
      if (r.mode === 'big') return void res.writeHead(200, { 'content-type': 'text/plain' }).end(BIG);
      if (r.mode === 'empty') return void res.writeHead(204).end();
      if (r.mode === 'fail') return void res.writeHead(500, { 'content-type': 'text/plain' }).end('nope, not today');
      // Chunked (no content-length): three writes of 2,000 bytes each.
      res.writeHead(202, { 'content-type': 'text/plain' });
      for (let i = 0; i < 3; i++) res.write(BIG.slice(i * 2000, (i + 1) * 2000));
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const r: BodyReceiver = {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`,
    hits,
    mode,
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  receivers.push(r);
  return r;
}

async function register(url: string, tok = token) {
  const res = await call(node.base, 'POST', EP, { token: tok, body: { url, events: ['inference.completed'] } });
  if (res.status !== 201) throw new Error(`register: ${res.status} ${res.text}`);
  return res.json as { id: string; secret: string; updated_at: string };
}

const testSend = (id: string, body?: unknown, tok = token) =>
  call(node.base, 'POST', `${EP}/${id}/test`, { token: tok, ...(body === undefined ? {} : { body }) });

t.test("a ping to a 200 receiver: ok, status, latency and the first 1 KiB of the receiver's body", async (t) => {
  const r = await bodyReceiver('big');
  const ep = await register(r.url);
  t.equal(r.hits.length, 1, 'the registration ping');
  const res = await testSend(ep.id);
  t.equal(res.status, 200, res.text.slice(0, 200));
  t.same(Object.keys(res.json).sort(), ['body', 'error', 'latency_ms', 'ok', 'status']);
  t.equal(res.json.ok, true);
  t.equal(res.json.status, 200);
  t.ok(Number.isInteger(res.json.latency_ms) && res.json.latency_ms >= 0, `latency_ms ${res.json.latency_ms}`);
  t.equal(res.json.body, BIG.slice(0, 1024), 'the first 1,024 bytes of the 5 KiB body');
  t.equal(res.json.error, null);

  t.equal(r.hits.length, 2, 'one more request reached the receiver');
  const hit = r.hits[1];
  t.equal(hit.body.type, 'ping');
  t.same(hit.body.data, { endpoint_id: ep.id });
  t.not(hit.body.id, r.hits[0].body.id, 'a new event id');
  t.equal(hit.headers['x-service-delivery-attempt'], '1');
  t.same(verifyWebhook(hit.rawBody, hit.headers, ep.secret), hit.body, 'signed with the endpoint secret');

  const read = await call(node.base, 'GET', `${EP}/${ep.id}`, { token });
  t.equal(read.json.updated_at, ep.updated_at, 'the endpoint did not change');
});

t.test('a chunked body is cut at 1 KiB too; an empty one is ""', async (t) => {
  const r = await bodyReceiver('big');
  const ep = await register(r.url);
  r.mode = 'chunked';
  const chunked = await testSend(ep.id, {});
  t.equal(chunked.json.ok, true);
  t.equal(chunked.json.status, 202);
  t.equal(chunked.json.body, BIG.slice(0, 1024));
  r.mode = 'empty';
  const empty = await testSend(ep.id);
  t.equal(empty.json.ok, true);
  t.equal(empty.json.status, 204);
  t.equal(empty.json.body, '');
});

t.test('a custom type with data arrives signed; an error status is reported with its body', async (t) => {
  const r = await bodyReceiver('big');
  const ep = await register(r.url);
  const data = { order_id: 'o-123', lines: [1, 2, 3], note: 'naïve ☃' };
  const res = await testSend(ep.id, { type: 'order.created', data });
  t.equal(res.status, 200);
  t.equal(res.json.ok, true);
  const hit = r.hits[r.hits.length - 1];
  t.equal(hit.body.type, 'order.created');
  t.same(hit.body.data, data);
  t.equal(hit.headers['x-service-event-type'], 'order.created');
  t.equal(hit.headers['x-service-event-id'], hit.body.id);
  t.same(verifyWebhook(hit.rawBody, hit.headers, ep.secret), hit.body, 'the signature verifies');

  const known = await testSend(ep.id, { type: 'inference.completed' });
  t.equal(known.json.ok, true, 'a known kind, without data');
  t.equal(r.hits[r.hits.length - 1].body.data, null, 'data defaults to null');

  r.mode = 'fail';
  const failed = await testSend(ep.id, { type: 'ping' });
  t.equal(failed.status, 200, 'the test send itself succeeded');
  t.same(failed.json, {
    ok: false,
    status: 500,
    latency_ms: failed.json.latency_ms,
    body: 'nope, not today',
    error: 'HTTP 500',
  });
});

t.test('a reserved type, an unknown field or a malformed type is 400 and nothing is sent', async (t) => {
  const r = await bodyReceiver('big');
  const ep = await register(r.url);
  for (const type of ['endpoint.disabled', 'credential.rotated', 'credential.revoked', 'sluice.anything']) {
    const res = await testSend(ep.id, { type, data: { secret_url: 'https://evil.example/' } });
    t.equal(res.status, 400, `${type}: 400`);
    t.equal(res.json.code, 'INVALID_REQUEST');
    t.equal(res.json.errors[0].path, '$.type', `${type}: names $.type`);
    t.match(res.text, /reserved/, `${type}: says it is reserved`);
  }
  for (const [body, path] of [
    [{ type: 'Order.Created' }, '$.type'],
    [{ type: 'order' }, '$.type'],
    [{ type: 7 }, '$.type'],
    [{ kind: 'ping' }, '$.kind'],
  ] as const) {
    const res = await testSend(ep.id, body);
    t.equal(res.status, 400, `${JSON.stringify(body)}: 400`);
    t.equal(res.json.errors[0].path, path);
  }
  t.equal(r.hits.length, 1, 'only the registration ping reached the receiver');
});

t.test('a receiver that never answers: ok false with the timeout, not before the 10 s', async (t) => {
  const r = await bodyReceiver('big');
  const ep = await register(r.url);
  r.mode = 'hang';
  const started = Date.now();
  const res = await testSend(ep.id);
  const took = Date.now() - started;
  t.equal(res.status, 200);
  t.equal(res.json.ok, false);
  t.equal(res.json.status, null);
  t.equal(res.json.body, null);
  t.equal(res.json.error, 'timed out', 'told as a class');
  // Never early; how late a busy machine answers is no property of Sluice (the timeout's class is).
  t.ok(took >= 9_500, `after the 10-second attempt timeout (answered in ${took} ms)`);
  t.equal(r.hits.length, 2, 'the request reached the receiver');
});

t.test('a receiver that is not listening: ok false with the connection error', async (t) => {
  const r = await bodyReceiver('big');
  const ep = await register(r.url);
  await r.close();
  receivers.splice(receivers.indexOf(r), 1);
  const res = await testSend(ep.id);
  t.equal(res.status, 200);
  t.equal(res.json.ok, false);
  t.equal(res.json.status, null);
  t.equal(res.json.error, 'connection refused', 'told as a class, not as ECONNREFUSED');
});

t.test('rate limited per endpoint: 429 with Retry-After after 3 at once, nothing sent', async (t) => {
  const r = await bodyReceiver('big');
  const ep = await register(r.url);
  const answers = [];
  for (let i = 0; i < 3; i++) answers.push(await testSend(ep.id));
  t.same(
    answers.map((a) => a.status),
    [200, 200, 200],
  );
  const limited = await testSend(ep.id);
  t.equal(limited.status, 429);
  t.equal(limited.json.code, 'RATE_LIMITED');
  t.ok(Number(limited.headers.get('retry-after')) >= 1, `Retry-After ${limited.headers.get('retry-after')}`);
  t.equal(r.hits.length, 4, 'the ping and three test sends; the refused one sent nothing');
  const another = await register(r.url);
  t.equal((await testSend(another.id)).status, 200, 'another endpoint has its own budget');
  const verify = await call(node.base, 'POST', `${EP}/${ep.id}/verify`, { token });
  t.equal(verify.status, 429, 'verify draws from the same endpoint budget (ingress/routes/target-budget.ts)');
});

t.test("another tenant's endpoint is 404; without webhooks:write 403; both send nothing", async (t) => {
  const r = await bodyReceiver('big');
  const ep = await register(r.url);
  const globex = await node.token(await node.client('admin', 'globex'));
  const res = await testSend(ep.id, undefined, globex);
  t.equal(res.status, 404);
  t.equal(res.json.code, 'NOT_FOUND');
  const readOnly = await node.token(admin, 'webhooks:read');
  const refused = await testSend(ep.id, undefined, readOnly);
  t.equal(refused.status, 403);
  t.equal(refused.json.missing_scope, 'webhooks:write');
  t.equal(r.hits.length, 1, 'only the registration ping');
});

t.test('each test send is audited with its type and event id', async (t) => {
  const r = await bodyReceiver('big');
  const ep = await register(r.url);
  await testSend(ep.id);
  await testSend(ep.id, { type: 'order.created', data: { n: 1 } });
  const entries = node.ctx.auditView.page('acme', 0, 100_000).data.filter((e) => e.subject === ep.id);
  t.same(
    entries.map((e) => e.action),
    ['endpoint.created', 'endpoint.test_sent', 'endpoint.test_sent'],
  );
  t.match(entries[1].reason, new RegExp(`a signed ping event ${r.hits[1].body.id}`));
  t.match(entries[2].reason, new RegExp(`a signed order.created event ${r.hits[2].body.id}`));
  t.ok(entries.every((e) => e.actor === admin.client_id));
});
