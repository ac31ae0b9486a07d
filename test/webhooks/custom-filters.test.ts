/**
 * A filter names custom types too: `order.created` itself, the family `order.*`, or `*`. Events a
 * filter takes are delivered; the others are not matched.
 */
import t from 'tap';
import { startTestNode } from '../helpers/sluice.ts';
import { publish, receiver, registerEndpoint, sleep } from '../dispatcher/receiver.ts';

const node = await startTestNode({ SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true' }, { dispatcher: true });
const family = await receiver(200);
const exact = await receiver(200);
t.teardown(async () => {
  await family.close();
  await exact.close();
  await node.close();
});
const token = await node.token(await node.client('admin', 'shop'));
await registerEndpoint(node, token, family.url, ['order.*']);
await registerEndpoint(node, token, exact.url, ['order.created', 'invoice.paid']);

t.test('a family and a custom type are delivered what they name, and nothing else', async (t) => {
  const created = await publish(node, token, { type: 'order.created', data: { n: 1 } });
  t.equal(created.json.matched_endpoints, 2, 'order.created: the family and the exact filter');
  const shipped = await publish(node, token, { type: 'order.shipped', data: { n: 2 } });
  t.equal(shipped.json.matched_endpoints, 1, 'order.shipped: the family only');
  const other = await publish(node, token, { type: 'orders.created', data: { n: 3 } });
  t.equal(other.json.matched_endpoints, 0, 'orders.created: no filter takes it');
  await family.until((h) => h.filter((x) => x.body.type !== 'ping').length >= 2, 30_000, 'the family');
  await exact.until((h) => h.some((x) => x.body.type === 'order.created'), 30_000, 'the exact filter');
  await sleep(300);
  t.same(
    family
      .events()
      .map((h) => h.body.type)
      .sort(),
    ['order.created', 'order.shipped'],
  );
  t.same(
    exact.events().map((h) => h.body.type),
    ['order.created'],
  );
});
