import t from 'tap';
import { newDelivery } from '../../core/webhooks/deliveries.ts';
import { RecentAttempts } from '../../dispatcher/recent-attempts.ts';

const event = { id: 'evt_1', tenant_id: 'acme', type: 'a.b', data: {}, created_at: 0 };
const rec = (attempt: number, endpoint = 'ep_1') => ({ ...newDelivery(event, endpoint, 0), attempt });

t.test('a copy of an attempt made here repeats it; the next attempt does not', async (t) => {
  const r = new RecentAttempts();
  t.notOk(r.repeats(rec(1)), 'nothing attempted yet');
  (await r.claim(rec(1)))!('failed');
  t.ok(r.repeats(rec(1)), 'attempt 1 again: a copy');
  t.notOk(r.repeats(rec(2)), 'attempt 2 (its retry): not a copy');
  t.notOk(r.repeats(rec(1, 'ep_2')), 'another endpoint: another delivery');
  (await r.claim(rec(2)))!('delivered');
  t.ok(r.repeats(rec(5)), 'once delivered, any later attempt of it is a copy');
});

t.test('an attempt not made after all is not remembered', async (t) => {
  const r = new RecentAttempts();
  (await r.claim(rec(3)))!('not-made');
  t.notOk(r.repeats(rec(3)), 're-queued with its attempt number, it is tried when it comes back');
});

t.test('a copy claimed while the first is under way waits for it, then reads as a copy', async (t) => {
  const r = new RecentAttempts();
  const [first, second] = [r.claim(rec(1)), r.claim(rec(1))];
  const end = await first;
  t.type(end, 'function', 'the first claims the attempt');
  let waited = false;
  void second.then(() => (waited = true));
  await new Promise((res) => setImmediate(res));
  t.notOk(waited, 'the second waits while the first is under way');
  end!('failed');
  t.equal(await second, null, 'then it repeats the attempt made: no second attempt');
  t.type(await r.claim(rec(1, 'ep_9')), 'function', 'another delivery is claimed at once');
});

t.test('the memory is bounded: the oldest deliveries are forgotten', async (t) => {
  const r = new RecentAttempts(4);
  for (let i = 0; i < 20; i++) (await r.claim(rec(1, `ep_${i}`)))!('delivered');
  t.ok(r.repeats(rec(1, 'ep_19')), 'the latest is remembered');
  t.notOk(r.repeats(rec(1, 'ep_0')), 'the first is forgotten');
});

t.test('an event id published again after its window is a new event: not a copy', async (t) => {
  const r = new RecentAttempts();
  (await r.claim(rec(1)))!('delivered');
  const again = { ...rec(1), event: { ...event, created_at: 86_400_001 } };
  t.notOk(r.repeats(again), 'same delivery id, a later event: delivered again');
});
