/**
 * Concurrent writes of one endpoint lose nothing (#20 item 5). Rotations racing each other, on
 * one node or on two: each either answers 200 with a secret that became the signing secret (the
 * one after it keeps it as the previous secret), or 409 CONFLICT and changes nothing. Underneath,
 * every view applies an endpoint record only on top of the version it was made from.
 */
import t, { type Test } from 'tap';
import { randomUUID } from 'node:crypto';
import { call, nodePair, type TestNode } from '../helpers/sluice.ts';
import { publish, receiver, type TestReceiver } from '../dispatcher/receiver.ts';
import { verifyWebhook } from '../../receiver-sdk/verify.ts';
import { unseal } from '../../core/secrets.ts';
import { recordFailingSince } from '../../core/webhooks/endpoint-service.ts';
import { follows } from '../../core/webhooks/endpoint-registry.ts';
import type { EndpointRecord } from '../../core/webhooks/records.ts';

const env = { SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true' };
const { node, other } = await nodePair(env);
const receivers: TestReceiver[] = [];
t.teardown(async () => {
  for (const r of receivers) await r.close();
  await other.close();
  await node.close();
});

/** Every endpoint record node's view applied, in order: every node applies the same ones. */
const applied: EndpointRecord[] = [];
node.ctx.endpoints.listeners.add((_id, rec) => {
  if (rec) applied.push(rec);
});
const open = (sealed: string | null | undefined) => (sealed ? unseal(node.ctx.config.masterKey, sealed) : null);

async function synced(): Promise<void> {
  const topic = node.ctx.topics.endpoints;
  await other.ctx.state.reached(topic, 0, node.ctx.state.position(topic, 0), 10_000);
  await node.ctx.state.reached(topic, 0, other.ctx.state.position(topic, 0), 10_000);
}

async function setUp(tenant: string) {
  const token = await node.token(await node.client('admin', tenant));
  const r = await receiver(200);
  receivers.push(r);
  const res = await call(node.base, 'POST', '/v1/webhooks/endpoints', {
    token,
    body: { url: r.url, events: ['inference.completed'] },
  });
  if (res.status !== 201 || res.json.state !== 'ACTIVE') throw new Error(`register: ${res.status} ${res.text}`);
  await synced();
  return { token, r, id: res.json.id as string, initial: res.json.secret as string };
}

const rotate = (on: TestNode, token: string, id: string) =>
  call(on.base, 'POST', `/v1/webhooks/endpoints/${id}/rotate-secret`, { token });

/**
 * The secrets the endpoint signed with, in the order the views applied them, and whether each
 * rotation kept the secret before it as its previous one (a lost update does not: it replaced a
 * secret that another rotation had already replaced).
 */
function generations(id: string, initial: string) {
  const gens = [initial];
  const broken: string[] = [];
  for (const rec of applied.filter((r) => r.id === id)) {
    const current = open(rec.secret_sealed)!;
    if (current === gens[gens.length - 1]) continue;
    if (open(rec.previous_secret_sealed) !== gens[gens.length - 1])
      broken.push(`the rotation to …${current.slice(-8)} kept …${open(rec.previous_secret_sealed)?.slice(-8)}`);
    gens.push(current);
  }
  return { gens, broken };
}

function checkRotations(
  t: Test,
  id: string,
  initial: string,
  answers: { status: number; json: any; headers: Headers }[],
) {
  t.same(
    answers.filter((a) => a.status !== 200 && a.status !== 409).map((a) => a.status),
    [],
    `only 200 and 409 (${answers.map((a) => a.status).join(' ')})`,
  );
  const won = answers.filter((a) => a.status === 200).map((a) => a.json.secret as string);
  t.ok(won.length >= 1, `${won.length} rotation(s) answered 200`);
  for (const a of answers.filter((a) => a.status === 409)) {
    t.equal(a.json.code, 'CONFLICT');
    t.equal(a.headers.get('content-type'), 'application/problem+json');
  }
  const { gens, broken } = generations(id, initial);
  t.same(broken, [], 'each rotation replaced the secret in force: none was lost');
  t.same([...gens.slice(1)].sort(), [...won].sort(), 'the secrets answered 200 are exactly the secrets that signed');
  const signing = node.ctx.endpoints.signingSecrets(id, Date.now())!;
  t.equal(signing.current, gens[gens.length - 1], 'the last of them signs');
  t.equal(signing.previous, gens[gens.length - 2], 'beside the one before it, for the overlap');
  return { won, signing };
}

t.test('five concurrent rotations on one node: 200 with a secret that signs, or 409 CONFLICT', async (t) => {
  const { token, r, id, initial } = await setUp('race-one-node');
  const answers = await Promise.all(Array.from({ length: 5 }, () => rotate(node, token, id)));
  const { signing } = checkRotations(t, id, initial, answers);

  await publish(node, token, { type: 'inference.completed', data: { n: 1 } });
  const [hit] = await r.until((e) => e.length >= 1, 30_000, 'the delivery');
  t.ok(verifyWebhook(hit.rawBody, hit.headers, signing.current), 'a delivery verifies with the current secret');
  t.ok(verifyWebhook(hit.rawBody, hit.headers, signing.previous!), 'and with the previous one');
  const audit = (await call(node.base, 'GET', '/v1/audit?limit=1000', { token })).json.data.filter(
    (e: { action: string; subject: string }) => e.action === 'endpoint.secret_rotated' && e.subject === id,
  );
  t.equal(
    audit.length,
    answers.filter((a) => a.status === 200).length,
    'a rotation refused with 409 is not audited as done',
  );
});

t.test('concurrent rotations on two nodes: no lost update, and both views agree', async (t) => {
  const { token, id, initial } = await setUp('race-two-nodes');
  const answers = await Promise.all([
    ...Array.from({ length: 3 }, () => rotate(node, token, id)),
    ...Array.from({ length: 3 }, () => rotate(other, token, id)),
  ]);
  await synced();
  checkRotations(t, id, initial, answers);
  t.same(other.ctx.endpoints.get(id), node.ctx.endpoints.get(id), 'the other node holds the same record');
});

t.test('rotations one after another are no conflict', async (t) => {
  const { token, id, initial } = await setUp('race-sequential');
  const answers = [];
  for (const on of [node, other, node]) {
    answers.push(await rotate(on, token, id));
    await synced();
  }
  t.same(
    answers.map((a) => a.status),
    [200, 200, 200],
  );
  checkRotations(t, id, initial, answers);
});

t.test('a rotation racing a write of another field is made again on top of it, not refused', async (t) => {
  const { token, id } = await setUp('race-other-field');
  const since = Date.now() - 3600_000;
  const [rotated] = await Promise.all([rotate(node, token, id), recordFailingSince(other.ctx, id, since)]);
  t.equal(rotated.status, 200, `rotate: ${rotated.text.slice(0, 200)}`);
  await synced();
  const rec = node.ctx.endpoints.get(id)!;
  t.equal(open(rec.secret_sealed), rotated.json.secret, 'the new secret is in force');
  t.equal(rec.failing_since, since, 'and so is the other write');
  t.same(other.ctx.endpoints.get(id), rec);
});

t.test('through Kafka: of two records made from one version, every view applies the first only', async (t) => {
  const { id } = await setUp('race-raw');
  const base = node.ctx.endpoints.get(id)!;
  const make = (metadata: Record<string, unknown>, version = (base.version ?? 0) + 1): EndpointRecord => ({
    ...base,
    metadata,
    version,
    write_id: randomUUID(),
  });
  const first = make({ writer: 'first' });
  const second = make({ writer: 'second' });
  node.ctx.endpoints.expect(first.write_id!);
  node.ctx.endpoints.expect(second.write_id!);
  // One produce request: the two land next to each other, in this order.
  await node.ctx.producer.send(node.ctx.topics.endpoints, [
    { key: id, value: JSON.stringify(first) },
    { key: id, value: JSON.stringify(second) },
  ]);
  await node.ctx.changes.until(() => node.ctx.endpoints.settled(second.write_id!) !== undefined, 10_000);
  t.equal(node.ctx.endpoints.settled(first.write_id!), true, 'the first is applied');
  t.equal(node.ctx.endpoints.settled(second.write_id!), false, 'the second is refused');
  await synced();
  t.same(node.ctx.endpoints.get(id)?.metadata, { writer: 'first' });
  t.same(other.ctx.endpoints.get(id)?.metadata, { writer: 'first' }, 'on every node');

  // The record in force again (a producer re-sends a request whole): applied as it is.
  const resent = randomUUID();
  node.ctx.endpoints.expect(resent);
  await node.ctx.producer.send(node.ctx.topics.endpoints, [
    { key: id, value: JSON.stringify(first) },
    { key: id, value: JSON.stringify({ ...make({ writer: 'late' }), write_id: resent }) },
  ]);
  await node.ctx.changes.until(() => node.ctx.endpoints.settled(resent) !== undefined, 10_000);
  t.equal(node.ctx.endpoints.settled(resent), false, 'a record made from the old version is still refused after it');
  t.same(node.ctx.endpoints.get(id)?.metadata, { writer: 'first' }, 'the re-sent record stays in force');
  node.ctx.endpoints.forget(resent);
  node.ctx.endpoints.forget(first.write_id!);
  node.ctx.endpoints.forget(second.write_id!);
});

t.test('the rule each view applies', async (t) => {
  const rec = (version?: number, write_id?: string) => ({ version, write_id }) as EndpointRecord;
  t.ok(follows(rec(3, 'a'), rec(4, 'b')), 'one version up: applied');
  t.notOk(follows(rec(4, 'a'), rec(4, 'b')), 'the same version from another write: refused');
  t.ok(follows(rec(4, 'a'), rec(4, 'a')), 'the same write again: applied (a re-send)');
  t.notOk(follows(rec(4, 'a'), rec(3, 'c')), 'an older version: refused');
  t.notOk(follows(rec(4, 'a'), rec(6, 'c')), 'a version made from one this view never held: refused');
  t.ok(follows(rec(undefined), rec(1, 'a')), 'over a record from before versions: applied');
  t.ok(follows(rec(4, 'a'), rec(undefined)), 'a record without a version (written by hand): applied, as before');
});
