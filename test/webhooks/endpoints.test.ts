import t from 'tap';
import { createHmac } from 'node:crypto';
import { assertInvalid, startTestNode, call } from '../helpers/sluice.ts';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.ts';
import { verifyWebhook } from '../../receiver-sdk/verify.ts';

// Receivers listen on 127.0.0.1, which only the development flag lets through.
const node = await startTestNode({ SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true' });
const receivers: Receiver[] = [];
t.teardown(async () => {
  for (const r of receivers) await r.close();
  await node.close();
});
const admin = await node.client('admin', 'acme');
const token = await node.token(admin);

async function receiver(behaviour: number | 'hang' = 200): Promise<Receiver> {
  const r = await startReceiver(behaviour);
  receivers.push(r);
  return r;
}

async function register(url: string, events: string[] = ['inference.completed'], tok = token, metadata?: unknown) {
  return call(node.base, 'POST', '/v1/webhooks/endpoints', {
    token: tok,
    body: { url, events, ...(metadata !== undefined ? { metadata } : {}) },
  });
}

t.test(
  'a receiver answering 200 makes the endpoint ACTIVE; the ping is signed and its headers are exact',
  async (t) => {
    const r = await receiver(200);
    const res = await register(r.url, ['inference.completed', 'pipeline.failed'], token, { team: 'ml' });
    t.equal(res.status, 201);
    t.same(Object.keys(res.json).sort(), [
      'created_at',
      'description',
      'disabled',
      'disabled_at',
      'disabled_reason',
      'events',
      'filter',
      'filter_errors',
      'id',
      'max_in_flight',
      'metadata',
      'ordering',
      'previous_secret_expires_at',
      'rate_limit_per_second',
      'secret',
      'signing',
      'signing_public_key',
      'state',
      'updated_at',
      'url',
      'verified_at',
    ]);
    t.equal(res.json.state, 'ACTIVE');
    t.match(res.json.id, /^ep_[0-9a-f]+$/);
    t.match(res.json.secret, /^whsec_[A-Za-z0-9+/]{43}=$/, 'whsec_ + standard base64 of 32 bytes');
    t.equal(res.json.url, r.url);
    t.same(res.json.events, ['inference.completed', 'pipeline.failed']);
    t.same(res.json.metadata, { team: 'ml' });
    t.equal(res.headers.get('location'), `/v1/webhooks/endpoints/${res.json.id}`);
    t.type(res.json.verified_at, 'string');

    t.equal(r.received.length, 1, 'exactly one ping');
    const ping = r.received[0];
    t.equal(ping.method, 'POST');
    t.equal(ping.path, '/hook');
    t.equal(ping.headers['content-type'], 'application/json');
    const hmac = createHmac('sha256', Buffer.from(res.json.secret, 'utf8')).update(ping.rawBody).digest('hex');
    const expected = `sha256=${hmac}`;
    t.equal(ping.headers['x-service-signature-256'], expected, 'an independent HMAC-SHA256 over the raw body matches');
    const key = Buffer.from(res.json.secret.slice('whsec_'.length), 'base64');
    const standard = createHmac('sha256', key)
      .update(`${ping.headers['webhook-id']}.${ping.headers['webhook-timestamp']}.${ping.rawBody}`)
      .digest('base64');
    t.equal(ping.headers['webhook-signature'], `v1,${standard}`, 'and so does the Standard Webhooks signature');
    const body = JSON.parse(ping.rawBody);
    t.same(Object.keys(body).sort(), ['created_at', 'data', 'id', 'tenant_id', 'timestamp', 'type']);
    t.equal(body.type, 'ping');
    t.equal(body.tenant_id, 'acme');
    t.same(body.data, { endpoint_id: res.json.id });
    t.match(body.id, /^evt_/);
    t.equal(ping.headers['x-service-timestamp'], String(body.timestamp), 'the timestamp header equals body.timestamp');
    t.ok(Number.isInteger(body.timestamp), 'unix seconds');
    t.ok(Math.abs(body.timestamp - Date.now() / 1000) < 300, 'a current timestamp');
    t.equal(ping.headers['x-service-event-id'], body.id);
    t.equal(ping.headers['x-service-event-type'], 'ping');
    t.equal(ping.headers['x-service-delivery-attempt'], '1');
    t.same(
      verifyWebhook(ping.rawBody, ping.headers, res.json.secret),
      body,
      'the receiver-side helper accepts the ping',
    );

    const got = await call(node.base, 'GET', `/v1/webhooks/endpoints/${res.json.id}`, { token });
    t.equal(got.status, 200);
    t.equal(got.json.state, 'ACTIVE');
    t.notOk('secret' in got.json, 'the secret is returned only at registration');
    t.notOk(got.text.includes(res.json.secret));
  },
);

t.test('a receiver answering 500 leaves the endpoint PENDING; a later 200 to verify makes it ACTIVE', async (t) => {
  const r = await receiver(500);
  const res = await register(r.url);
  t.equal(res.status, 201);
  t.equal(res.json.state, 'PENDING');
  t.equal(res.json.verified_at, null);
  t.equal(res.headers.get('sluice-ping-status'), '500');
  t.equal(r.received.length, 1, 'the ping went out');
  const id = res.json.id;

  const still = await call(node.base, 'POST', `/v1/webhooks/endpoints/${id}/verify`, { token });
  t.equal(still.status, 200);
  t.equal(still.json.state, 'PENDING', 'a failed re-verification changes nothing');
  t.equal(r.received.length, 2);

  r.behaviour = 204;
  const ok = await call(node.base, 'POST', `/v1/webhooks/endpoints/${id}/verify`, { token });
  t.equal(ok.status, 200);
  t.equal(ok.json.id, id);
  t.equal(ok.json.state, 'ACTIVE', 'any 2xx verifies');
  t.type(ok.json.verified_at, 'string');
  t.notOk('secret' in ok.json);
  t.equal(r.received.length, 3);
  const first = JSON.parse(r.received[0].rawBody);
  const third = JSON.parse(r.received[2].rawBody);
  t.not(third.id, first.id, 'each ping is a new event');
  t.equal(r.received[2].headers['x-service-event-type'], 'ping');
  const got = await call(node.base, 'GET', `/v1/webhooks/endpoints/${id}`, { token });
  t.equal(got.json.state, 'ACTIVE', 'the new state is in the view');
  t.equal(node.ctx.endpoints.get(id)?.state, 'ACTIVE');
});

t.test('a receiver that never answers: PENDING once the 5-second ping timeout ran out', async (t) => {
  const r = await receiver('hang');
  const res = await register(r.url);
  t.equal(res.status, 201);
  t.equal(res.json.state, 'PENDING');
  t.equal(res.headers.get('sluice-ping-result'), 'failed');
  t.equal(r.received.length, 1);
});

t.test('a receiver that is not listening: PENDING', async (t) => {
  const r = await receiver(200);
  await r.close();
  receivers.splice(receivers.indexOf(r), 1);
  const res = await register(r.url);
  t.equal(res.status, 201);
  t.equal(res.json.state, 'PENDING');
});

t.test('listing is paged with an opaque cursor, oldest first, never with secrets', async (t) => {
  const pager = await node.client('webhook-publisher', 'pager');
  const tok = await node.token(pager);
  const r = await receiver(200);
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    const res = await register(r.url, ['*'], tok);
    t.equal(res.status, 201);
    ids.push(res.json.id);
  }
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const q: string = cursor ? `?limit=2&cursor=${encodeURIComponent(cursor)}` : '?limit=2';
    const page = await call(node.base, 'GET', `/v1/webhooks/endpoints${q}`, { token: tok });
    t.equal(page.status, 200);
    t.same(Object.keys(page.json).sort(), ['data', 'next_cursor']);
    t.ok(page.json.data.length <= 2);
    for (const e of page.json.data) {
      t.notOk('secret' in e);
      t.notOk('secret_sealed' in e);
      seen.push(e.id);
    }
    cursor = page.json.next_cursor;
    pages++;
  } while (cursor !== null && pages < 10);
  t.equal(pages, 3);
  t.same(seen, ids, 'every endpoint once, in creation order');
  const all = await call(node.base, 'GET', '/v1/webhooks/endpoints', { token: tok });
  t.equal(all.json.data.length, 5, 'default limit covers them');
  t.equal(all.json.next_cursor, null);
  const badLimit = await call(node.base, 'GET', '/v1/webhooks/endpoints?limit=0', { token: tok });
  t.equal(badLimit.status, 400);
  t.equal(badLimit.json.errors[0].path, 'query.limit');
  const bigLimit = await call(node.base, 'GET', '/v1/webhooks/endpoints?limit=1001', { token: tok });
  t.equal(bigLimit.status, 400);
  const badCursor = await call(node.base, 'GET', '/v1/webhooks/endpoints?cursor=bm9wZQ', { token: tok });
  t.equal(badCursor.status, 400);
  t.equal(badCursor.json.errors[0].path, 'query.cursor');
});

t.test('get and delete; a deleted endpoint is gone; both are audited', async (t) => {
  const r = await receiver(200);
  const res = await register(r.url);
  const id = res.json.id;
  const got = await call(node.base, 'GET', `/v1/webhooks/endpoints/${id}`, { token });
  t.equal(got.status, 200);
  t.same(Object.keys(got.json).sort(), [
    'created_at',
    'description',
    'disabled',
    'disabled_at',
    'disabled_reason',
    'events',
    'filter',
    'filter_errors',
    'id',
    'max_in_flight',
    'metadata',
    'ordering',
    'previous_secret_expires_at',
    'rate_limit_per_second',
    'signing',
    'state',
    'updated_at',
    'url',
    'verified_at',
  ]);
  t.equal(got.json.metadata, null);
  const del = await call(node.base, 'DELETE', `/v1/webhooks/endpoints/${id}`, { token });
  t.equal(del.status, 204);
  t.equal(del.text, '');
  t.equal(node.ctx.endpoints.get(id), undefined, 'tombstoned in the view');
  const after = await call(node.base, 'GET', `/v1/webhooks/endpoints/${id}`, { token });
  t.equal(after.status, 404);
  t.equal(after.json.code, 'NOT_FOUND');
  const again = await call(node.base, 'DELETE', `/v1/webhooks/endpoints/${id}`, { token });
  t.equal(again.status, 404);
  const verify = await call(node.base, 'POST', `/v1/webhooks/endpoints/${id}/verify`, { token });
  t.equal(verify.status, 404);
  const list = await call(node.base, 'GET', '/v1/webhooks/endpoints?limit=1000', { token });
  t.notOk(list.json.data.some((e: { id: string }) => e.id === id));

  const audit = node.ctx.auditView.page('acme', 0, 1000).data.filter((e) => e.subject === id);
  t.same(
    audit.map((e) => e.action),
    ['endpoint.created', 'endpoint.deleted'],
  );
  t.ok(
    audit.every((e) => e.actor === admin.client_id),
    'the actor is the calling client',
  );
});

t.test("another tenant's endpoints do not exist for the caller (404, not 403)", async (t) => {
  const r = await receiver(200);
  const mine = await register(r.url);
  const other = await node.client('admin', 'globex');
  const otherToken = await node.token(other);
  for (const [method, path] of [
    ['GET', `/v1/webhooks/endpoints/${mine.json.id}`],
    ['DELETE', `/v1/webhooks/endpoints/${mine.json.id}`],
    ['POST', `/v1/webhooks/endpoints/${mine.json.id}/verify`],
  ] as const) {
    const res = await call(node.base, method, path, { token: otherToken });
    t.equal(res.status, 404, `${method} ${path}`);
    t.equal(res.json.code, 'NOT_FOUND');
  }
  const list = await call(node.base, 'GET', '/v1/webhooks/endpoints', { token: otherToken });
  t.same(list.json.data, []);
  t.equal(r.received.length, 1, 'the other tenant triggered no ping');
  const still = await call(node.base, 'GET', `/v1/webhooks/endpoints/${mine.json.id}`, { token });
  t.equal(still.status, 200, 'and deleted nothing');
});

t.test('invalid registrations are 400 INVALID_REQUEST with the JSON path of every fault', async (t) => {
  const r = await receiver(200);
  const cases: [string, unknown, string[]][] = [
    ['not an object', [1, 2], ['$']],
    ['nothing', {}, ['$.url', '$.events']],
    ['unknown field', { url: r.url, events: ['ping'], secret: 'mine' }, ['$.secret']],
    ['url not a string', { url: 42, events: ['ping'] }, ['$.url']],
    ['url not a URL', { url: 'hooks.example.com/x', events: ['ping'] }, ['$.url']],
    ['events empty', { url: r.url, events: [] }, ['$.events']],
    ['events not an array', { url: r.url, events: 'ping' }, ['$.events']],
    [
      'not an event type and a duplicate',
      { url: r.url, events: ['nope.happened.twice', 'ping', 'ping'] },
      ['$.events[0]', '$.events[2]'],
    ],
    ['a non-string kind', { url: r.url, events: ['ping', 7] }, ['$.events[1]']],
    ['too many kinds', { url: r.url, events: Array.from({ length: 65 }, (_, i) => `k${i}`) }, ['$.events']],
    ['metadata an array', { url: r.url, events: ['ping'], metadata: ['x'] }, ['$.metadata']],
    ['metadata too large', { url: r.url, events: ['ping'], metadata: { blob: 'x'.repeat(5000) } }, ['$.metadata']],
  ];
  for (const [name, body, paths] of cases) {
    const res = await call(node.base, 'POST', '/v1/webhooks/endpoints', { token, body });
    assertInvalid(t, res, name, paths);
  }
  const malformed = await call(node.base, 'POST', '/v1/webhooks/endpoints', {
    token,
    raw: '{"url": "x", "events": [',
    headers: { 'content-type': 'application/json' },
  });
  t.equal(malformed.status, 400);
  t.equal(r.received.length, 0, 'no ping for a refused registration');
  t.same(
    [...node.ctx.endpoints.listTenant('acme')].filter((e) => e.url === r.url),
    [],
    'nothing written',
  );
});

t.test('without webhooks:write: 403 SCOPE_VIOLATION naming the missing scope', async (t) => {
  const r = await receiver(200);
  const readOnly = await node.token(admin, 'webhooks:read');
  const res = await register(r.url, ['ping'], readOnly);
  t.equal(res.status, 403);
  t.equal(res.json.code, 'SCOPE_VIOLATION');
  t.equal(res.json.missing_scope, 'webhooks:write');
  t.match(res.headers.get('www-authenticate'), /insufficient_scope/);
  const existing = await register(r.url);
  for (const [method, path] of [
    ['DELETE', `/v1/webhooks/endpoints/${existing.json.id}`],
    ['POST', `/v1/webhooks/endpoints/${existing.json.id}/verify`],
  ] as const) {
    const refused = await call(node.base, method, path, { token: readOnly });
    t.equal(refused.status, 403, `${method} ${path}`);
    t.equal(refused.json.missing_scope, 'webhooks:write');
  }
  const list = await call(node.base, 'GET', '/v1/webhooks/endpoints', { token: readOnly });
  t.equal(list.status, 200, 'webhooks:read lists');
  const noRead = await node.token(admin, 'events:publish');
  const listRefused = await call(node.base, 'GET', '/v1/webhooks/endpoints', { token: noRead });
  t.equal(listRefused.status, 403);
  t.equal(listRefused.json.missing_scope, 'webhooks:read');
  t.equal(r.received.length, 1, 'only the permitted registration pinged');
});
