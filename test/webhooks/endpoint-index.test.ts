import t from 'tap';
import { EndpointRegistry } from '../../core/webhooks/endpoint-registry.ts';
import type { EndpointRecord } from '../../core/webhooks/records.ts';
import { ViewStore } from '../../core/store/view-store.ts';

const reg = new EndpointRegistry('t', Buffer.alloc(32));
const store = ViewStore.temporary();
reg.attach(store);
t.teardown(() => store.close());
let offset = 0;
const put = (id: string, tenant: string, events: string[], at = offset) => {
  const rec: EndpointRecord = {
    id,
    tenant_id: tenant,
    url: 'https://x.example/h',
    events,
    metadata: null,
    secret_sealed: '',
    state: 'ACTIVE',
    created_at: at,
    updated_at: at,
    verified_at: at,
  };
  reg.apply({
    topic: 't',
    partition: 0,
    offset: String(offset++),
    key: id,
    value: Buffer.from(JSON.stringify(rec)),
    headers: {},
    timestamp: at,
  });
};
const del = (id: string) =>
  reg.apply({ topic: 't', partition: 0, offset: String(offset++), key: id, value: null, headers: {}, timestamp: 0 });

await store.transaction(() => {
  for (let i = 0; i < 10_000; i++) put(`ep_a${i}`, 'big', i % 2 ? ['inference.completed'] : ['*']);
  put('ep_b1', 'small', ['inference.completed']);
  put('ep_b2', 'small', ['pipeline.failed', 'inference.completed']);
  put('ep_b3', 'small', ['*']);
});

t.test("tenant B's list and match read only B's endpoints, whatever A holds", async (t) => {
  reg.touched = 0;
  t.same(
    [...reg.listTenant('small')].map((e) => e.id),
    ['ep_b1', 'ep_b2', 'ep_b3'],
    'oldest first',
  );
  t.same(
    reg
      .matching('small', 'inference.completed')
      .map((e) => e.id)
      .sort(),
    ['ep_b1', 'ep_b2', 'ep_b3'],
  );
  t.same(
    reg
      .matching('small', 'pipeline.failed')
      .map((e) => e.id)
      .sort(),
    ['ep_b2', 'ep_b3'],
    "'*' takes every kind, once",
  );
  t.ok(reg.touched <= 8, `the three calls read ${reg.touched} records, not ${10_000}`);
  reg.touched = 0;
  t.equal(reg.matching('big', 'pipeline.failed').length, 5000, "A's match reads only the endpoints that take the kind");
  t.equal(reg.touched, 5000);
});

t.test('the indexes follow updates and deletes', async (t) => {
  put('ep_b1', 'small', ['pipeline.failed'], 0);
  t.same(
    reg
      .matching('small', 'inference.completed')
      .map((e) => e.id)
      .sort(),
    ['ep_b2', 'ep_b3'],
    'b1 no longer takes inference.completed',
  );
  t.same(
    reg
      .matching('small', 'pipeline.failed')
      .map((e) => e.id)
      .sort(),
    ['ep_b1', 'ep_b2', 'ep_b3'],
  );
  del('ep_b2');
  t.same(
    [...reg.listTenant('small')].map((e) => e.id),
    ['ep_b1', 'ep_b3'],
  );
  t.same(
    reg
      .matching('small', 'pipeline.failed')
      .map((e) => e.id)
      .sort(),
    ['ep_b1', 'ep_b3'],
  );
  del('ep_b1');
  del('ep_b3');
  t.same([...reg.listTenant('small')], [], 'a tenant with no endpoints left');
  t.same(reg.matching('nobody', 'x.y'), []);
});

t.test('a page from a cursor reads from the cursor on, not the tenant from its start', async (t) => {
  reg.touched = 0;
  const it = reg.listTenant('big', { key: 5000, id: 'ep_a5000' });
  const ids = [0, 1, 2].map(() => it.next().value?.id);
  t.same(ids, ['ep_a5000', 'ep_a5001', 'ep_a5002'], 'from the cursor position, in order');
  t.equal(reg.touched, 3, 'three records read for three yielded');
  t.same(reg.countByState(), { ACTIVE: 10_000 }, 'the gauge counts what is left, by state');
});

t.test('custom types and families: a filter takes its type, its family (order.*) and *', async (t) => {
  await store.transaction(() => {
    put('ep_c1', 'shop', ['order.*']);
    put('ep_c2', 'shop', ['order.created']);
    put('ep_c3', 'shop', ['invoice.paid', 'order.created', 'order.*']);
    put('ep_c4', 'shop', ['*']);
    put('ep_c5', 'shop', ['orders.created']);
  });
  const match = (type: string) =>
    reg
      .matching('shop', type)
      .map((e) => e.id)
      .sort();
  t.same(match('order.created'), ['ep_c1', 'ep_c2', 'ep_c3', 'ep_c4'], 'the type, its family and *; each once');
  t.same(match('order.shipped'), ['ep_c1', 'ep_c3', 'ep_c4'], 'the family takes every type of it');
  t.same(match('invoice.paid'), ['ep_c3', 'ep_c4']);
  t.same(match('orders.created'), ['ep_c4', 'ep_c5'], 'order.* is not a prefix match');
  t.same(match('ping'), ['ep_c4'], 'a kind without a dot matches itself and *');
});

t.test("a small tenant's list, kept in memory, follows every change and pages like the store's", async (t) => {
  const ids = (after: { key: number; id: string } | null = null) => [...reg.listTenant('few', after)].map((e) => e.id);
  t.same(ids(), [], 'none yet');
  await store.transaction(() => {
    put('ep_f1', 'few', ['*'], 10);
    put('ep_f2', 'few', ['*'], 20);
  });
  t.same(ids(), ['ep_f1', 'ep_f2'], 'an endpoint added after a list is in the next one');
  t.same(ids({ key: 20, id: 'ep_f2' }), ['ep_f2'], 'from the cursor position on, as the store reads it');
  t.same(ids({ key: 10, id: 'ep_f1~' }), ['ep_f2'], 'a cursor between two keys');
  await store.transaction(() => {
    put('ep_f0', 'few', ['*'], 5);
    del('ep_f1');
  });
  t.same(ids(), ['ep_f0', 'ep_f2'], 'a delete and an older endpoint are seen at once');
  await store.transaction(() => put('ep_f2', 'few', ['x.y'], 20));
  t.same(
    [...reg.listTenant('few')].map((e) => e.events),
    [['*'], ['x.y']],
    'an updated record is listed as it now is',
  );
  // Past the kept size the list reads the store, with the same answers.
  await store.transaction(() => {
    for (let i = 0; i < 100; i++) put(`ep_m${String(i).padStart(3, '0')}`, 'many', ['*'], 1000 + i);
  });
  const many = [...reg.listTenant('many', { key: 1050, id: 'ep_m050' })].map((e) => e.id);
  t.same([many.length, many[0], many[49]], [50, 'ep_m050', 'ep_m099']);
});
