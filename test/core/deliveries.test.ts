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
