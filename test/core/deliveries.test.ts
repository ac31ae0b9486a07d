import t from 'tap';
import { deliveryJson, newDelivery, parseDeliveryRecord } from '../../core/webhooks/deliveries.ts';
import { newId } from '../../core/secrets.ts';

t.test('deliveryJson is the JSON of the record, with the event serialised once by the caller', async (t) => {
  const event = {
    id: 'evt_1',
    tenant_id: 'acme',
    type: 'inference.completed',
    data: { a: [1, 'two', { three: null }], s: 'quote " and \\ backslash' },
    created_at: 1700000000000,
  };
  const rec = newDelivery(event, 'ep_1', 1700000000123);
  const text = deliveryJson(rec, JSON.stringify(event));
  t.same(JSON.parse(text), rec, 'parses back to the same record');
  t.same(parseDeliveryRecord(Buffer.from(text)), rec, 'and is a valid delivery record');
});

t.test('ids from the random pool are unique and well-formed across refills', async (t) => {
  const ids = new Set<string>();
  for (let i = 0; i < 2000; i++) ids.add(newId('evt'));
  t.equal(ids.size, 2000, 'no repeats over several pool refills');
  t.ok(
    [...ids].every((id) => /^evt_[0-9a-f]{24}$/.test(id)),
    'evt_ + 24 hex digits',
  );
});

t.test('a DeliverySet is one record for many deliveries, each as the fan-out would have made it', async (t) => {
  const { deliverySetJson, parseDeliveries, DELIVERY_SET_MAX } = await import('../../core/webhooks/deliveries.ts');
  const event = { id: 'evt_1', tenant_id: 'acme', type: 'order.created', data: { n: 1 }, created_at: 1000 };
  const ids = ['ep_a', 'ep_b', 'ep_c'];
  const recs = parseDeliveries(Buffer.from(deliverySetJson(JSON.stringify(event), ids, 2000, 42)))!;
  t.same(
    recs,
    ids.map((id) => ({ ...newDelivery(event, id, 2000), endpoints_at: 42 })),
    'one record per endpoint, with the stable delivery id and the view position',
  );
  t.equal(new Set(recs.map((r) => r.delivery_id)).size, 3, 'three distinct delivery ids');
  const single = newDelivery(event, 'ep_z', 3000);
  t.same(parseDeliveries(Buffer.from(JSON.stringify(single))), [single], 'a single record still parses');
  for (const bad of [
    '{"set":1}',
    '{"set":2,"due_at":1,"endpoint_ids":[],"event":{"id":"e","tenant_id":"t","type":"a.b"}}',
    `{"set":1,"due_at":1,"endpoint_ids":[1],"event":{"id":"e","tenant_id":"t","type":"a.b"}}`,
    JSON.stringify({
      set: 1,
      due_at: 1,
      endpoint_ids: Array(DELIVERY_SET_MAX + 1).fill('x'),
      event: { id: 'e', tenant_id: 't', type: 'a.b' },
    }),
    '{"set":1,"due_at":1,"endpoint_ids":["x"],"event":{"id":"e"}}',
    'not json',
    'null',
  ])
    t.equal(parseDeliveries(Buffer.from(bad)), null, `refused: ${bad.slice(0, 60)}`);
});
