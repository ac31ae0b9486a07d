/**
 * Sluice's own events have an id namespace of their own (#20 item 6). A publisher once kept the
 * `endpoint.disabled` notice from going out by publishing, beforehand, an event under the id Sluice
 * derives for it (`endpoint.disabled:<endpoint>:<verified_at ms>`): Sluice's publish then answered
 * as a repeat and wrote nothing. Now no id a tenant names reaches the key of one of Sluice's, and
 * Sluice's ids cannot be known beforehand: the notice's is random (issue 31 item 4: derived with
 * the master key, it was known to anyone under the development key).
 */
import t from 'tap';
import { call, startTestNode } from '../helpers/sluice.ts';
import { publish, receiver, registerEndpoint, type TestReceiver } from '../dispatcher/receiver.ts';
import { createHmac } from 'node:crypto';
import { disableEndpoint } from '../../core/webhooks/endpoint-service.ts';
import { eventIdKey } from '../../core/webhooks/idempotency.ts';
import { TENANT_PATTERN } from '../../core/clients/client-registry.ts';

const node = await startTestNode({ SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true' }, { dispatcher: true });
const receivers: TestReceiver[] = [];
t.teardown(async () => {
  for (const r of receivers) await r.close();
  await node.close();
});

async function setUp(tenant: string) {
  const token = await node.token(await node.client('admin', tenant));
  const watcher = await receiver(200); // hears endpoint.disabled
  const target = await receiver(200); // the endpoint that gets disabled
  const other = await receiver(200); // an ordinary inference.completed endpoint
  receivers.push(watcher, target, other);
  await registerEndpoint(node, token, watcher.url, ['endpoint.disabled']);
  const victim = await registerEndpoint(node, token, target.url, ['inference.completed']);
  await registerEndpoint(node, token, other.url, ['inference.completed']);
  const rec = node.ctx.endpoints.get(victim.id)!;
  return { token, watcher, other, victim: rec };
}

const notices = (r: TestReceiver, endpointId: string) =>
  r.events().filter((h) => h.body.type === 'endpoint.disabled' && (h.body.data as any)?.endpoint_id === endpointId);

t.test('publishing the id Sluice used to derive does not suppress endpoint.disabled', async (t) => {
  const { token, watcher, victim } = await setUp('quiet-derived');
  const forged = `endpoint.disabled:${victim.id}:${victim.verified_at ?? victim.created_at}`;
  const res = await publish(node, token, { type: 'inference.completed', id: forged, data: {} });
  t.equal(res.status, 202, 'the publisher may use that id for its own event');
  await disableEndpoint(node.ctx, victim.id, 'the receiver answered 410 Gone');
  const got = await watcher.until((e) => e.some((h) => h.body.type === 'endpoint.disabled'), 30_000, 'the notice');
  t.equal(notices(watcher, victim.id).length, 1, 'the notice reached the tenant, once');
  t.not(got[0].body.id, forged, 'under an id of its own');
  t.match(got[0].body.id, /^evt_[0-9a-f]{24}$/);
});

t.test("the notice's id cannot be known beforehand, even under the development key", async (t) => {
  const { token, watcher, other, victim } = await setUp('quiet-known');
  // What the id used to be: derived from the endpoint and its verification time with the master
  // key, which anyone can compute when that key is the public development key.
  const derivedFrom = `endpoint.disabled:${victim.id}:${victim.verified_at ?? victim.created_at}`;
  const mac = createHmac('sha256', node.ctx.config.masterKey).update(`sluice-event-id\0${derivedFrom}`);
  const derived = `evt_${mac.digest('hex').slice(0, 24)}`;
  const res = await publish(node, token, { type: 'inference.completed', id: derived, data: { decoy: true } });
  t.equal(res.status, 202);
  await other.until((e) => e.some((h) => h.body.id === derived), 30_000, 'the decoy');
  const rec = await disableEndpoint(node.ctx, victim.id, 'the receiver answered 410 Gone');
  await watcher.until(() => notices(watcher, victim.id).length > 0, 30_000, 'the notice');
  const notice = notices(watcher, victim.id)[0];
  t.not(notice.body.id, derived, 'not the id a decoy could be sent under');
  t.equal(notice.body.id, rec?.disabled_event_id, 'the random id its disabling recorded');
  t.match(notice.body.id, /^evt_[0-9a-f]{24}$/);

  // And the other way round: Sluice's event does not hold the id in the tenant's namespace.
  const again = await publish(node, token, { type: 'inference.completed', id: notice.body.id, data: { n: 2 } });
  t.equal(again.status, 202);
  await other.until((e) => e.some((h) => h.body.id === notice.body.id), 30_000, "a publish of the notice's id");
});

t.test('two writers disabling the same endpoint still send one notice', async (t) => {
  const { token, watcher, victim } = await setUp('quiet-twice');
  await Promise.all([
    disableEndpoint(node.ctx, victim.id, 'the receiver answered 410 Gone'),
    disableEndpoint(node.ctx, victim.id, 'the receiver answered 410 Gone'),
  ]);
  await watcher.until(() => notices(watcher, victim.id).length > 0, 30_000, 'the notice');
  const audit = (await call(node.base, 'GET', '/v1/audit?limit=1000', { token })).json.data.filter(
    (e: { action: string; subject: string }) => e.action === 'endpoint.disabled' && e.subject === victim.id,
  );
  t.equal(audit.length, 1, 'one disable, audited once');
  t.equal(node.ctx.endpoints.get(victim.id)?.state, 'DISABLED');
});

t.test("no tenant's (tenant, id) makes the key of one of Sluice's event ids", async (t) => {
  const ids = ['endpoint.disabled:ep_1:2', 'x', 'a:b:c', 'sluice:acme:x', '!sluice:acme:x'];
  for (const tenant of ['acme', 'a', 'sluice']) {
    for (const id of ids) {
      const key = eventIdKey(tenant, id, 'sluice');
      t.not(key, eventIdKey(tenant, id), `${tenant}/${id}: not the tenant's own key`);
      // A tenant's key is evt:<tenant>:<id>, the tenant ending at the first ':' after evt:.
      const asTenant = key.slice('evt:'.length).split(':')[0];
      t.notOk(TENANT_PATTERN.test(asTenant), `${key}: read as a tenant's key, "${asTenant}" is no tenant`);
    }
  }
});
