/**
 * The CEL conformance data of @bufbuild/cel-spec (google/cel-spec's simple tests), run through the
 * same compile-and-evaluate wrapper Sluice's filters use (core/webhooks/filters/cel-program.ts,
 * with its checks and a meter), to show that the wrapper keeps the library's semantics: every test
 * that expects a value gets that value, every test that expects an error gets an error. The only
 * departures allowed are refusals when compiling that a Sluice rule explains, each counted below:
 * a nested comprehension; an undeclared variable or unknown function (which could only fail when
 * evaluated, or be skipped by `||`); a protobuf message literal (filters have no message types);
 * operands of known types an operator cannot take (which a checking CEL refuses too).
 */
import t, { type Test } from 'tap';
import type { CelValue } from '@bufbuild/cel';
import { cel } from '../../core/webhooks/filters/cel-lib.ts';
import { getConformanceSuite, type IncrementalTestSuite } from '@bufbuild/cel-spec/testdata/tests.js';
import { CelCompileError, CelMeter, compileCel } from '../../core/webhooks/filters/cel-program.ts';

/** The suites run: the core language a filter uses. */
const SUITES = ['basic', 'comparisons', 'logic', 'fields', 'string', 'lists', 'macros', 'integer_math', 'fp_math'];
/** Failing in @bufbuild/cel itself (its own conformance test leaves them out). */
const LIBRARY_FAILURES = [
  'fields/quoted_map_fields',
  'fields/qualified_identifier_resolution/map_value_repeat_key_heterogeneous',
];

type Value = { kind: { case: string | undefined; value?: unknown } };

/** A conformance Value as input to an evaluation, or undefined when it is a kind the test skips (protos, types). */
function input(v: Value): unknown {
  const k = v.kind;
  switch (k.case) {
    case 'nullValue':
      return null;
    case 'boolValue':
    case 'stringValue':
    case 'doubleValue':
    case 'int64Value':
    case 'bytesValue':
      return k.value;
    case 'uint64Value':
      return cel().celUint(k.value as bigint);
    case 'listValue': {
      const out = (k.value as { values: Value[] }).values.map(input);
      return out.includes(undefined) ? undefined : out;
    }
    case 'mapValue': {
      const m = new Map<unknown, unknown>();
      for (const e of (k.value as { entries: { key?: Value; value?: Value }[] }).entries) {
        const key = e.key && input(e.key);
        const val = e.value && input(e.value);
        if (key === undefined || val === undefined) return undefined;
        m.set(key instanceof Object && cel().isCelUint(key) ? key : key, val);
      }
      return m;
    }
    default:
      return undefined;
  }
}

/** A value in one comparable form: expected (from a Value) and actual (from a CelValue) alike. */
function canon(v: unknown): unknown {
  if (v === null) return null;
  if (typeof v === 'bigint') return { int: v.toString() };
  if (typeof v === 'number') return { double: Number.isNaN(v) ? 'NaN' : Object.is(v, -0) ? '-0' : v };
  if (typeof v === 'string' || typeof v === 'boolean') return v;
  if (v instanceof Uint8Array) return { bytes: Buffer.from(v).toString('hex') };
  if (cel().isCelUint(v)) return { uint: v.value.toString() };
  if (cel().isCelList(v)) return [...v].map(canon);
  if (cel().isCelMap(v))
    return [...v.entries()]
      .map(([k, x]) => [JSON.stringify(canon(k)), canon(x)] as const)
      .sort((a, b) => a[0].localeCompare(b[0]));
  if (Array.isArray(v)) return v.map(canon);
  if (v instanceof Map)
    return [...v.entries()]
      .map(([k, x]) => [JSON.stringify(canon(k)), canon(x)] as const)
      .sort((a, b) => a[0].localeCompare(b[0]));
  return { other: String(v) };
}

interface Tally {
  passed: number;
  /** Refused by a Sluice rule although the suite expects a value: rule → how many. */
  refused: Record<string, number>;
  refusedTypes: string[];
  skipped: number;
}

const RULES: [string, RegExp][] = [
  ['nested comprehension', /inside another one is not allowed/],
  ['undeclared', /undeclared reference|unknown function/],
  ['message type', /message types .* are not available/],
];

function count(tally: Tally, rule: string): true {
  tally.refused[rule] = (tally.refused[rule] ?? 0) + 1;
  return true;
}

function runSuite(t: Test, suite: IncrementalTestSuite, path: string, tally: Tally): void {
  for (const sub of suite.suites) runSuite(t, sub, `${path}/${sub.name}`, tally);
  for (const test of suite.tests) {
    const name = `${path}/${test.name}`;
    if (LIBRARY_FAILURES.some((f) => name.startsWith(f))) {
      tally.skipped++;
      continue;
    }
    const o = test.original;
    const matcher = o.resultMatcher;
    const bindings: Record<string, unknown> = {};
    let usable = o.container === '' && !o.disableMacros && !o.checkOnly;
    for (const [k, ev] of Object.entries(o.bindings)) {
      const value = ev.kind.case === 'value' ? input(ev.kind.value as Value) : undefined;
      if (value === undefined) usable = false;
      bindings[k] = value;
    }
    const expected =
      matcher.case === 'value' ? input(matcher.value as Value) : matcher.case === undefined ? true : undefined;
    const expectsError = matcher.case === 'evalError' || matcher.case === 'anyEvalErrors';
    if (!usable || (expected === undefined && !expectsError)) {
      tally.skipped++;
      continue;
    }
    const variables = [...new Set([...Object.keys(bindings), ...o.typeEnv.map((d) => d.name)])];
    let program: ReturnType<typeof compileCel>;
    try {
      program = compileCel(o.expr, { variables, maxNodes: 100_000 });
    } catch (err) {
      if (!(err instanceof CelCompileError)) throw err;
      if (expectsError) tally.passed++;
      else if (RULES.some(([rule, re]) => re.test(err.message) && count(tally, rule))) continue;
      else if (/cannot take|cannot select/.test(err.message) && o.disableCheck) tally.refusedTypes.push(name);
      else t.fail(`${name}: ${o.expr} was refused: ${err.message}`);
      continue;
    }
    const out = program.evaluate(bindings as Record<string, never>, new CelMeter(1_000_000));
    if ('error' in out) {
      t.notOk(out.budgetExceeded, `${name}: within the budget`);
      if (expectsError) tally.passed++;
      else t.fail(`${name}: ${o.expr} failed: ${out.error}`);
      continue;
    }
    if (expectsError) {
      t.fail(`${name}: ${o.expr} gave ${String(out.value)}, expected an error`);
      continue;
    }
    const same = JSON.stringify(canon(out.value as CelValue)) === JSON.stringify(canon(expected));
    if (same) tally.passed++;
    else t.same(canon(out.value as CelValue), canon(expected), `${name}: ${o.expr}`);
  }
}

t.test('the conformance suites keep their results through the filter wrapper', async (t) => {
  const all = getConformanceSuite();
  const tally: Tally = { passed: 0, refused: {}, refusedTypes: [], skipped: 0 };
  for (const name of SUITES) {
    const suite = all.suites.find((s) => s.name === name);
    if (!suite) throw new Error(`no suite ${name}`);
    runSuite(t, suite, name, tally);
  }
  t.comment(
    `${tally.passed} passed, refused by Sluice's rules: ${JSON.stringify(tally.refused)}, ` +
      `${tally.refusedTypes.length} refused for types (unchecked in the suite: ${tally.refusedTypes.join(', ')}), ` +
      `${tally.skipped} skipped (protobuf values, containers)`,
  );
  t.ok(tally.passed >= 600, `${tally.passed} conformance tests passed`);
  t.ok(tally.refusedTypes.length <= 20, `type refusals: ${tally.refusedTypes.join(', ')}`);
  t.ok((tally.refused['nested comprehension'] ?? 0) <= 5, 'few nested comprehensions in these suites');
});
