/**
 * Kinds Sluice sends itself (`ping`, `credential.*`, `endpoint.*`, `sluice.*`) cannot be published
 * by a tenant, through either publish route: a receiver trusts them as Sluice's own word (a forged
 * `credential.rotated` once pointed receivers at an attacker's `secret_url`). Near misses are
 * ordinary custom kinds and pass.
 */
import t from 'tap';
import { call, startTestNode } from '../helpers/sluice.ts';
import { publish, receiver, registerEndpoint, sleep } from '../dispatcher/receiver.ts';

const node = await startTestNode({ SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true' }, { dispatcher: true });
const r = await receiver(200);
t.teardown(async () => {
  await r.close();
  await node.close();
});
const token = await node.token(await node.client('admin', 'forger'));
await registerEndpoint(node, token, r.url, ['*']);

const RESERVED = [
  'ping',
  'credential.rotated',
  'credential.revoked',
  'credential.created',
  'endpoint.disabled',
  'endpoint.enabled',
  'endpoint.deleted',
  'sluice.anything',
];
const ALLOWED = ['credentials.rotated', 'endpoints.disabled', 'pings.sent', 'sluice_x.y', 'inference.completed'];

t.test('every reserved kind is a 400 naming the reserved families, on the single publish', async (t) => {
  for (const type of RESERVED) {
    const res = await publish(node, token, { type, data: { secret_url: 'https://evil.example/' } });
    t.equal(res.status, 400, `${type}: 400`);
    t.match(res.json.errors?.[0]?.path, /^\$\.type/, `${type}: the error names $.type`);
    t.match(res.text, /reserved/, `${type}: says it is reserved`);
  }
});

t.test('every reserved kind is refused alone in a batch; the rest of the batch goes', async (t) => {
  const events = [...RESERVED, 'order.created'].map((type) => ({
    type,
    data: { secret_url: 'https://evil.example/' },
  }));
  const res = await call(node.base, 'POST', '/v1/webhooks/events/batch', { token, body: { events } });
  t.equal(res.status, 202, res.text.slice(0, 300));
  t.equal(res.json.accepted, 1, 'only the custom kind is accepted');
  for (let i = 0; i < RESERVED.length; i++) {
    t.equal(res.json.results[i].error?.status, 400, `${RESERVED[i]}: refused in the batch`);
    t.match(JSON.stringify(res.json.results[i].error), /reserved/, `${RESERVED[i]}: says it is reserved`);
  }
  const all = await call(node.base, 'POST', '/v1/webhooks/events/batch', {
    token,
    body: { events: RESERVED.map((type) => ({ type, data: {} })) },
  });
  t.equal(all.status, 400, 'a batch of only reserved kinds is a 400');
});

t.test('near misses are ordinary kinds; no reserved kind reached the receiver from a tenant', async (t) => {
  for (const type of ALLOWED) {
    const res = await publish(node, token, { type, data: {} });
    t.equal(res.status, 202, `${type}: 202`);
  }
  await r.until((hits) => ALLOWED.every((k) => hits.some((h) => h.body.type === k)), 30_000, 'the allowed kinds');
  await sleep(300);
  const forged = r.hits.filter((h) => h.body.type !== 'ping' && RESERVED.includes(h.body.type));
  t.same(
    forged.map((h) => h.body.type),
    [],
    'no credential.*, endpoint.* or sluice.* delivery came from a publish',
  );
  t.ok(
    r.hits.filter((h) => h.body.type === 'ping').every((h) => !JSON.stringify(h.body.data).includes('evil')),
    'the only ping is Sluice’s own',
  );
});
