/**
 * PATCH /v1/webhooks/endpoints/{id} (#22 item 1: url, events, metadata, description): each field
 * changes and every node sees it; a new URL is checked and pinged like a registration, a failed
 * ping makes the endpoint PENDING, the secret is kept and deliveries follow the URL; the contract
 * refuses what an update cannot change; another tenant's endpoint is 404; audited; an update
 * racing rotations and other updates on two nodes loses nothing.
 */
import t from 'tap';
import { assertInvalid, call, nodePair, until, type TestNode } from '../helpers/sluice.ts';
import { publish, receiver, signatureValid, type TestReceiver } from '../dispatcher/receiver.ts';
import { verifyWebhook } from '../../receiver-sdk/verify.ts';

const env = { SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true' };
const { node, other } = await nodePair(env);
const receivers: TestReceiver[] = [];
t.teardown(async () => {
  for (const r of receivers) await r.close();
  await other.close();
  await node.close();
});

const EP = '/v1/webhooks/endpoints';
const admin = await node.client('admin', 'acme');
const token = await node.token(admin);
/** A tenant of its own per test: what a publish matches is that test's endpoints only. */
const tenantToken = async (tenant: string) => node.token(await node.client('admin', tenant));

async function rcv(): Promise<TestReceiver> {
  const r = await receiver(200);
  receivers.push(r);
  return r;
}

async function register(url: string, events = ['inference.completed'], tok = token) {
  const res = await call(node.base, 'POST', EP, { token: tok, body: { url, events } });
  if (res.status !== 201) throw new Error(`register: ${res.status} ${res.text}`);
  return res.json as { id: string; secret: string; state: string; updated_at: string; verified_at: string | null };
}

const patch = (id: string, body: unknown, tok = token, on: TestNode = node) =>
  call(on.base, 'PATCH', `${EP}/${id}`, { token: tok, body });
const get = (id: string, on: TestNode = node) => call(on.base, 'GET', `${EP}/${id}`, { token });

async function synced(): Promise<void> {
  const topic = node.ctx.topics.endpoints;
  await other.ctx.state.reached(topic, 0, node.ctx.state.position(topic, 0), 10_000);
  await node.ctx.state.reached(topic, 0, other.ctx.state.position(topic, 0), 10_000);
}

t.test('each field changes, shows at once on the node that answered, and on the other node', async (t) => {
  const r = await rcv();
  const ep = await register(r.url);
  const steps: Record<string, unknown>[] = [
    { events: ['inference.completed', 'order.*', 'billing.invoice_paid'] },
    { metadata: { team: 'ml', tier: 2 } },
    { description: 'orders and inference results' },
    { metadata: null, description: null },
    { events: ['*'], description: 'everything' },
  ];
  let updatedAt = Date.parse(ep.updated_at);
  for (const body of steps) {
    const res = await patch(ep.id, body);
    t.equal(res.status, 200, `PATCH ${JSON.stringify(body)}: ${res.text.slice(0, 200)}`);
    for (const [k, v] of Object.entries(body)) t.same(res.json[k], v, `${k} answered`);
    t.notOk('secret' in res.json, 'the secret is not shown');
    t.equal(res.headers.get('sluice-ping-result'), null, 'no ping without a new URL');
    t.ok(Date.parse(res.json.updated_at) > updatedAt, 'updated_at moves on');
    updatedAt = Date.parse(res.json.updated_at);
    const read = await get(ep.id);
    for (const [k, v] of Object.entries(body)) t.same(read.json[k], v, `${k} read back at once`);
    const elsewhere = await until(
      () => get(ep.id, other),
      (g) => Object.entries(body).every(([k, v]) => JSON.stringify(g.json[k]) === JSON.stringify(v)),
      10_000,
      'the other node sees the update',
    );
    t.equal(elsewhere.json.state, 'ACTIVE');
  }
  const same = await patch(ep.id, { url: r.url });
  t.equal(same.status, 200, 'the URL it has already');
  t.equal(same.headers.get('sluice-ping-result'), null, 'sends no ping');
  t.equal(r.hits.length, 1, 'only the registration pinged');
  t.equal(node.ctx.endpoints.secret(ep.id), ep.secret, 'the secret is the one registration answered');
});

t.test('a new filter takes effect for the next publish (custom types and families)', async (t) => {
  const r = await rcv();
  const tok = await tenantToken('filters');
  const ep = await register(r.url, ['inference.completed'], tok);
  const before = await publish(node, tok, { type: 'order.created', data: { n: 0 } });
  t.equal(before.json.matched_endpoints, 0, 'order.created matched nothing before');
  const res = await patch(ep.id, { events: ['order.*'] }, tok);
  t.equal(res.status, 200);
  const after = await publish(node, tok, { type: 'order.created', data: { n: 1 } });
  t.equal(after.status, 202);
  t.equal(after.json.matched_endpoints, 1, 'the family matches right after the answer');
  const [hit] = await r.until((e) => e.length >= 1, 30_000, 'the order.created delivery');
  t.equal(hit.body.type, 'order.created');
  t.same(hit.body.data, { n: 1 });
  t.ok(signatureValid(hit, ep.secret));
  const gone = await publish(node, tok, { type: 'inference.completed', data: {} });
  t.equal(gone.json.matched_endpoints, 0, 'the old filter item no longer matches');
});

t.test('a new URL gets a signed ping at once, keeps the secret, and the deliveries follow it', async (t) => {
  const r1 = await rcv();
  const r2 = await rcv();
  const tok = await tenantToken('mover');
  const ep = await register(r1.url, ['inference.completed'], tok);
  const res = await patch(ep.id, { url: r2.url }, tok);
  t.equal(res.status, 200, res.text.slice(0, 200));
  t.equal(res.json.url, r2.url);
  t.equal(res.json.state, 'ACTIVE');
  t.equal(res.headers.get('sluice-ping-result'), 'ok');
  t.equal(res.headers.get('sluice-ping-status'), '200');
  t.ok(Date.parse(res.json.verified_at) >= Date.parse(ep.verified_at!), 'verified again, at the new URL');
  t.equal(r2.hits.length, 1, 'one ping at the new URL');
  const ping = r2.hits[0];
  t.equal(ping.body.type, 'ping');
  t.same(ping.body.data, { endpoint_id: ep.id });
  t.ok(verifyWebhook(ping.rawBody, ping.headers, ep.secret), 'signed with the secret registration answered');
  t.equal(node.ctx.endpoints.get(ep.id)?.url, r2.url, 'in the view');

  const sent = await publish(node, tok, { type: 'inference.completed', data: { after: 'move' } });
  t.equal(sent.json.matched_endpoints, 1);
  const [hit] = await r2.until((e) => e.length >= 1, 30_000, 'the delivery at the new URL');
  t.same(hit.body.data, { after: 'move' });
  t.ok(verifyWebhook(hit.rawBody, hit.headers, ep.secret), 'the delivery verifies with the same secret');
  t.equal(r1.events().length, 0, 'the old URL gets nothing');
});

t.test('a new URL whose ping fails: PENDING like a new endpoint, the secret kept; verify resumes it', async (t) => {
  const r1 = await rcv();
  const tok = await tenantToken('failing-move');
  const ep = await register(r1.url, ['inference.completed'], tok);
  t.equal(ep.state, 'ACTIVE');
  const r3 = await rcv();
  r3.pingStatus = 500;
  const res = await patch(ep.id, { url: r3.url, description: 'moved' }, tok);
  t.equal(res.status, 200);
  t.equal(res.json.state, 'PENDING');
  t.equal(res.json.verified_at, null, 'the new URL is not verified');
  t.equal(res.json.description, 'moved', 'the other fields are written with it');
  t.equal(res.headers.get('sluice-ping-result'), 'failed');
  t.equal(res.headers.get('sluice-ping-status'), '500');
  t.equal(r3.hits.length, 1);
  t.ok(signatureValid(r3.hits[0], ep.secret), 'the ping was signed with the kept secret');
  t.equal(node.ctx.endpoints.secret(ep.id), ep.secret, 'the secret did not change');

  await publish(node, tok, { type: 'inference.completed', data: { held: true } });
  await new Promise((r) => setTimeout(r, 1500));
  t.equal(r3.events().length, 0, 'a PENDING endpoint gets no delivery');
  t.equal(r1.events().length, 0, 'nor does the old URL');

  r3.pingStatus = 200;
  const verified = await call(node.base, 'POST', `${EP}/${ep.id}/verify`, { token: tok });
  t.equal(verified.json.state, 'ACTIVE');
  const [hit] = await r3.until((e) => e.length >= 1, 30_000, 'the held delivery');
  t.same(hit.body.data, { held: true });
  t.ok(signatureValid(hit, ep.secret));
});

t.test('what an update cannot take is 400 naming the field, and changes nothing', async (t) => {
  const r = await rcv();
  const ep = await register(r.url);
  const before = (await get(ep.id)).json;
  const cases: [string, unknown, string[]][] = [
    ['empty body', {}, ['$']],
    ['not an object', ['x'], ['$']],
    ['unknown field', { secret: 'whsec_mine' }, ['$.secret']],
    ['unknown field beside a valid one', { description: 'x', state: 'ACTIVE' }, ['$.state']],
    ['a pause that is not a boolean', { disabled: 'true' }, ['$.disabled']],
    ['a rate out of range', { rate_limit_per_second: 0 }, ['$.rate_limit_per_second']],
    ['an ordering that does not exist', { ordering: 'fifo' }, ['$.ordering']],
    ['events empty', { events: [] }, ['$.events']],
    ['not an event type', { events: ['nope.happened.twice'] }, ['$.events[0]']],
    ['upper case', { events: ['Order.Created'] }, ['$.events[0]']],
    ['a type listed twice', { events: ['order.created', 'order.created'] }, ['$.events[1]']],
    ['url not a URL', { url: 'hooks.example.com/x' }, ['$.url']],
    ['url null', { url: null }, ['$.url']],
    ['metadata an array', { metadata: ['x'] }, ['$.metadata']],
    ['description too long', { description: 'x'.repeat(257) }, ['$.description']],
    ['description a number', { description: 7 }, ['$.description']],
  ];
  for (const [name, body, paths] of cases) {
    const res = await patch(ep.id, body);
    assertInvalid(t, res, name, paths);
  }
  const unknown = await patch(ep.id, { secret: 'whsec_mine' });
  t.match(unknown.json.errors[0].message, /not a known field/);
  const none = await call(node.base, 'PATCH', `${EP}/${ep.id}`, { token });
  t.equal(none.status, 400, 'no body at all');
  const metadataAddress = await patch(ep.id, { url: 'http://169.254.169.254/latest/meta-data' });
  t.equal(metadataAddress.status, 422, 'a URL the target guard refuses');
  t.equal(metadataAddress.json.code, 'UNPROCESSABLE_TARGET');
  t.equal(metadataAddress.json.errors[0].path, '$.url');
  t.same((await get(ep.id)).json, before, 'nothing changed');
  t.equal(r.hits.length, 1, 'no ping went anywhere');
});

t.test("another tenant's endpoint is 404; a token without webhooks:write is 403", async (t) => {
  const r = await rcv();
  const ep = await register(r.url);
  const globex = await node.token(await node.client('admin', 'globex'));
  const res = await patch(ep.id, { description: 'mine now' }, globex);
  t.equal(res.status, 404);
  t.equal(res.json.code, 'NOT_FOUND');
  const moved = await patch(ep.id, { url: `${r.url}/elsewhere` }, globex);
  t.equal(moved.status, 404);
  const readOnly = await node.token(admin, 'webhooks:read');
  const refused = await patch(ep.id, { description: 'x' }, readOnly);
  t.equal(refused.status, 403);
  t.equal(refused.json.missing_scope, 'webhooks:write');
  const read = (await get(ep.id)).json;
  t.equal(read.description, null, 'nothing changed');
  t.equal(read.url, r.url);
  t.equal(r.hits.length, 1, 'and nothing was pinged');
});

t.test('every update is audited with the fields it changed', async (t) => {
  const r1 = await rcv();
  const r2 = await rcv();
  const ep = await register(r1.url);
  await patch(ep.id, { description: 'audited', metadata: { a: 1 } });
  await patch(ep.id, { url: r2.url });
  const entries = node.ctx.auditView.page('acme', 0, 100_000).data.filter((e) => e.subject === ep.id);
  t.same(
    entries.map((e) => e.action),
    ['endpoint.created', 'endpoint.updated', 'endpoint.updated'],
  );
  t.match(entries[1].reason, /changed metadata, description/);
  t.match(entries[2].reason, /changed url; the new URL answered the ping: ACTIVE/);
  t.ok(
    entries.every((e) => e.actor === admin.client_id),
    'the actor is the calling client',
  );
  const listed = await call(node.base, 'GET', '/v1/audit?limit=1000', { token });
  const updated = (e: { action: string; subject: string }) => e.action === 'endpoint.updated' && e.subject === ep.id;
  t.ok(listed.json.data.some(updated), 'and listed by GET /v1/audit');
});

t.test('updates and a rotation racing on two nodes: all answer 200, none is lost', async (t) => {
  const r = await rcv();
  const ep = await register(r.url);
  await synced();
  const [a, b, c, rotated] = await Promise.all([
    patch(ep.id, { events: ['order.*'] }, token, node),
    patch(ep.id, { description: 'raced' }, token, other),
    patch(ep.id, { metadata: { raced: true } }, token, other),
    call(node.base, 'POST', `${EP}/${ep.id}/rotate-secret`, { token }),
  ]);
  t.same(
    [a.status, b.status, c.status, rotated.status],
    [200, 200, 200, 200],
    `${[a, b, c, rotated].map((x) => x.text.slice(0, 120)).join(' | ')}`,
  );
  await synced();
  for (const on of [node, other]) {
    const read = (await get(ep.id, on)).json;
    t.same(read.events, ['order.*'], 'the first update stands');
    t.equal(read.description, 'raced', 'the second too');
    t.same(read.metadata, { raced: true }, 'and the third');
    t.equal(on.ctx.endpoints.secret(ep.id), rotated.json.secret, 'the rotation too: its secret signs');
  }
  const signing = node.ctx.endpoints.signingSecrets(ep.id, Date.now())!;
  t.equal(signing.previous, ep.secret, 'beside the registration secret, for the overlap');
  t.same(other.ctx.endpoints.get(ep.id), node.ctx.endpoints.get(ep.id), 'both nodes hold the same record');
});
