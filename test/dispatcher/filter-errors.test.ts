import t from 'tap';
import { FilterErrorReports } from '../../dispatcher/filter-errors.ts';

type Write = { id: string; filter: string; count: number; last: { at: number; error: string } };

function reports(fail = false) {
  const writes: Write[] = [];
  const warnings: string[] = [];
  let now = 1_000_000;
  const r = new FilterErrorReports(
    async (id, filter, count, last) => {
      writes.push({ id, filter, count, last });
      if (fail) throw new Error('no broker');
    },
    { warn: (msg: string) => warnings.push(msg) },
    10_000,
    () => now,
  );
  return { r, writes, warnings, advance: (ms: number) => (now += ms) };
}

const ep = (id: string, filter: string | null = 'data.x == 1') => ({ id, filter });

t.test("an endpoint's first failure is written at once; later ones are gathered until the next flush", async (t) => {
  const { r, writes, advance } = reports();
  r.note(ep('ep_1'), 'field not found: x', 1);
  t.same(writes, [{ id: 'ep_1', filter: 'data.x == 1', count: 1, last: { at: 1, error: 'field not found: x' } }]);
  r.note(ep('ep_1'), 'field not found: x', 2);
  r.note(ep('ep_1'), 'no such overload', 3);
  t.equal(writes.length, 1, 'within the interval: held');
  r.note(ep('ep_2'), 'boom', 4);
  t.equal(writes.length, 2, 'another endpoint has its own first write');
  r.flush();
  t.same(writes[2], { id: 'ep_1', filter: 'data.x == 1', count: 2, last: { at: 3, error: 'no such overload' } });
  t.equal(writes.length, 3, 'nothing more was held');
  advance(10_000);
  r.flush(); // forgets endpoints written an interval ago
  r.note(ep('ep_1'), 'again', 5);
  t.equal(writes.length, 4, 'an interval later, the next failure is written at once again');
  await r.stop();
});

t.test('a changed filter starts its own count; an endpoint without a filter is not noted', async (t) => {
  const { r, writes } = reports();
  r.note(ep('ep_1', 'a'), 'e1', 1);
  r.note(ep('ep_1', 'a'), 'e2', 2);
  r.note(ep('ep_1', 'b'), 'e3', 3);
  r.note(ep('ep_3', null), 'e4', 4);
  await r.stop();
  t.same(
    writes.map((w) => [w.id, w.filter, w.count]),
    [
      ['ep_1', 'a', 1],
      ['ep_1', 'b', 1],
    ],
    "the old filter's held count is dropped, the new filter's is written at stop",
  );
});

t.test('a write that fails is logged, never thrown', async (t) => {
  const { r, warnings } = reports(true);
  r.note(ep('ep_1'), 'e', 1);
  await r.stop();
  t.equal(warnings.length, 1);
  t.match(warnings[0], /could not be written/);
});
