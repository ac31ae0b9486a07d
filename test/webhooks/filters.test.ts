import t from 'tap';
import {
  CelCompileError,
  CelMeter,
  compileCel,
  MAX_NODES,
  MAX_SOURCE_BYTES,
} from '../../core/webhooks/filters/cel-program.ts';
import {
  checkFilter,
  compileFilter,
  EVENT_FILTER_BUDGET,
  eventBudget,
  FILTER_COST_BUDGET,
  filterInput,
  runFilter,
} from '../../core/webhooks/filters/endpoint-filter.ts';
import { compiled, filterProgram, filterVerdict } from '../../core/webhooks/filters/filter-cache.ts';
import { SluiceError } from '../../core/errors.ts';

const event = (data: unknown, type = 'order.created') => ({
  id: 'evt_1',
  tenant_id: 'acme',
  type,
  data,
  created_at: Date.UTC(2026, 10, 28, 7),
});

const run = (src: string, data: unknown, type?: string) =>
  runFilter(compileFilter(src), filterInput(event(data, type)), eventBudget());

const refusal = (src: string): CelCompileError => {
  try {
    compileFilter(src);
  } catch (err) {
    if (err instanceof CelCompileError) return err;
    throw err;
  }
  throw new Error(`${src} compiled`);
};

t.test('a filter over type, data and metadata decides on the event', async (t) => {
  const f = 'type == "order.created" && data.total > 100';
  t.same(run(f, { total: 150 }), { matched: true, error: null });
  t.same(run(f, { total: 50 }), { matched: false, error: null });
  t.same(run(f, { total: 150 }, 'order.paid'), { matched: false, error: null });
  t.same(run('data.total == 150 && data.tags.exists(x, x == "vip")', { total: 150, tags: ['a', 'vip'] }).matched, true);
  t.same(run('metadata.id == "evt_1" && metadata.tenant_id == "acme"', {}).matched, true);
  t.same(run('metadata.created_at.startsWith("2026-11-28T07:00:00")', {}).matched, true);
  t.same(run('!has(metadata.ordering_key) && has(data.total)', { total: 1 }).matched, true);
  t.same(run('data == null', undefined).matched, true, 'an event without data has data null');
});

t.test('syntax and type errors are refused with their position', async (t) => {
  const syntax = refusal('type == "a" &&\n  data.x &&& 1');
  t.match(syntax.message, /^line 2, column 10 \(offset 24\): syntax error: found & but/);
  t.same([syntax.line, syntax.column, syntax.offset], [2, 10, 24]);
  t.match(refusal('type == 1').message, /^line 1, column 5 .*'==' cannot take string and int/);
  t.match(refusal('nope > 1').message, /column 1 .*undeclared reference to 'nope'/);
  t.match(refusal('data.total > 1 && frobnicate(data)').message, /column 19 .*unknown function 'frobnicate'/);
  t.match(refusal('"yes"').message, /must be a bool; this one is a string/);
  t.match(refusal('data.a + 1 > 2 && "x" - 1 == 0').message, /'-' cannot take string and int/);
  t.match(refusal('type.foo == "x"').message, /cannot select field 'foo' from a value of type string/);
});

t.test('size, tree and nesting limits are refused when written', async (t) => {
  t.match(refusal(`data.a == "${'x'.repeat(MAX_SOURCE_BYTES)}"`).message, /bytes long; at most 4096/);
  const wide = Array.from({ length: MAX_NODES / 3 }, () => '1==1').join('||');
  t.ok(Buffer.byteLength(wide) <= MAX_SOURCE_BYTES, 'short enough: the node limit refuses it');
  const nodes = refusalOf(() => compileCel(wide, { variables: ['data'] }));
  t.match(nodes.message, /more than 512 nodes/);
  t.match(refusal('data.a.all(x, data.b.exists(y, y == x))').message, /inside another one is not allowed/);
  t.match(refusal('data.a.map(x, data.b.filter(y, y == x)).size() > 0').message, /inside another one/);
  // One comprehension after another is linear: allowed.
  t.ok(compileFilter('data.a.all(x, x > 0) && data.b.exists(y, y == 2)'));
});

function refusalOf(f: () => unknown): CelCompileError {
  try {
    f();
  } catch (err) {
    if (err instanceof CelCompileError) return err;
    throw err;
  }
  throw new Error('compiled');
}

t.test('evaluation errors are no match, with the reason', async (t) => {
  const missing = run('data.missing.x == 1', { total: 1 });
  t.same(missing.matched, false);
  t.match(missing.error, /missing/);
  const mismatch = run('data.total > "a"', { total: 1 });
  t.same(mismatch.matched, false);
  t.match(mismatch.error, /no matching overload/);
  const notBool = run('data.total', { total: 1 });
  t.same(notBool, { matched: false, error: "the filter's result is not a bool (number)" });
  t.same(run('data.total > 1 || data.nope.x', { total: 5 }), { matched: true, error: null }, 'CEL: true || error');
});

t.test('a budget bounds an evaluation: big lists, growing strings', async (t) => {
  const items = Array.from({ length: 20_000 }, (_, i) => i);
  const walked = run('data.items.exists(x, x == -1)', { items });
  t.same(walked.matched, false);
  t.match(walked.error, /cost budget of 10000 units exceeded/);
  const unwalked = run('data.items.exists(x, x == 3)', { items });
  t.match(
    unwalked.error,
    /cost budget/,
    'a walk is charged its length before it starts, even one that would stop early',
  );
  t.same(
    run('data.items.exists(x, x == 3)', { items: items.slice(0, 5000) }).matched,
    true,
    'a shorter list is walked',
  );
  t.match(run('data.items.size() == 20000 && 19999 in data.items', { items }).error, /cost budget/, 'in is charged');
  t.same(run('data.items.size() == 20000', { items }).matched, true, 'size() is not charged the length');
  const s = 'x'.repeat(200_000);
  const grown = run('(data.s + data.s + data.s + data.s).size() > 0', { s });
  t.match(grown.error, /cost budget/);
  const mapped = run('data.items.map(x, data.s + "y").size() > 0', { items: items.slice(0, 100), s });
  t.match(mapped.error, /cost budget/, 'strings made inside a comprehension are charged each time');
  t.same(run('data.items.map(x, data.s).size() == 100', { items: items.slice(0, 100), s }).matched, true, 'not copied');
  // The budget ends an error inside a `||` that would otherwise be skipped.
  const or = run('data.items.exists(x, x == -1) || true', { items });
  t.same(or.matched, false);
  t.match(or.error, /cost budget/);
});

t.test("an event's filters share one budget", async (t) => {
  const items = Array.from({ length: 3000 }, (_, i) => i); // 3,000 for the range, 6,000 for the steps
  const p = compileFilter('data.items.exists(x, x == -1)');
  const input = filterInput(event({ items }));
  const budget = eventBudget();
  let decided = 0;
  let refused = 0;
  for (let i = 0; i < 20; i++) {
    const v = runFilter(p, input, budget);
    if (v.error === null) decided++;
    else refused++;
  }
  t.ok(decided >= 1 && decided <= EVENT_FILTER_BUDGET / 9000, `${decided} decided before the event's budget ran out`);
  t.equal(decided + refused, 20);
  t.ok(budget.spent <= EVENT_FILTER_BUDGET + FILTER_COST_BUDGET);
  const after = runFilter(compileFilter('true'), input, budget);
  t.match(after.error, /the event's filter budget of 100000 units is spent/);
});

t.test('a meter used by several programs counts them all', async (t) => {
  const p = compileCel('a + b == 3', { variables: ['a', 'b'] });
  const m = new CelMeter(5);
  t.same(p.evaluate({ a: 1n, b: 2n }, m), { value: true });
  t.equal(m.spent, 2);
  t.same(p.evaluate({ a: 1n, b: 2n }, m), { value: true });
  t.match(p.evaluate({ a: 1n, b: 2n }, m), { budgetExceeded: true });
});

t.test('checkFilter answers 400 INVALID_REQUEST at $.filter with the position', async (t) => {
  t.doesNotThrow(() => checkFilter(null));
  t.doesNotThrow(() => checkFilter('type == "a"'));
  try {
    checkFilter('type ==');
    t.fail('compiled');
  } catch (err) {
    t.ok(err instanceof SluiceError);
    const e = err as SluiceError;
    t.equal(e.code, 'INVALID_REQUEST');
    t.equal(e.status, 400);
    t.match(e.message, /^\$\.filter: the filter does not compile: line 1, column 6 \(offset 5\): syntax error/);
    t.match(e.extra, { errors: [{ path: '$.filter' }], filter_error: { line: 1, column: 6, offset: 5 } });
  }
});

t.test('programs are cached per endpoint id and filter text', async (t) => {
  const before = compiled.count;
  const a = filterProgram({ id: 'ep_cache_1', filter: 'data.x == 1' });
  t.equal(filterProgram({ id: 'ep_cache_1', filter: 'data.x == 1' }), a, 'the same program again');
  t.equal(compiled.count, before + 1);
  const b = filterProgram({ id: 'ep_cache_1', filter: 'data.x == 2' });
  t.not(b, a, 'a changed filter is compiled anew');
  filterProgram({ id: 'ep_cache_2', filter: 'data.x == 1' });
  t.equal(compiled.count, before + 3, 'another endpoint has its own');
  t.equal(filterProgram({ id: 'ep_cache_3', filter: null }), null);
  let built = 0;
  const input = () => {
    built++;
    return filterInput(event({ x: 1 }));
  };
  t.same(filterVerdict({ id: 'ep_cache_1', filter: 'data.x == 1' }, input, eventBudget()), {
    matched: true,
    error: null,
  });
  t.same(filterVerdict({ id: 'ep_none', filter: null }, input, eventBudget()), { matched: true, error: null });
  t.equal(built, 1, 'the input is made only for an endpoint with a filter');
  const stale = filterVerdict({ id: 'ep_cache_4', filter: 'type ==' }, input, eventBudget());
  t.same(stale.matched, false);
  t.match(stale.error, /does not compile/, 'a stored filter that no longer compiles matches nothing');
});
