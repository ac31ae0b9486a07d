import t from 'tap';
import { findJsonFault, parseJsonBody, depthExceededAt, MAX_JSON_DEPTH } from '../../core/json.ts';
import { SluiceError } from '../../core/errors.ts';
import { throttled } from '../../core/log.ts';

t.test('findJsonFault names the path and position of the first fault', async (t) => {
  t.same(findJsonFault('{"url": "x", "events": ["a", "b", ]}'), {
    path: '$.events[2]',
    position: 34,
    message: "unexpected character ']'",
  });
  t.equal(findJsonFault('{"metadata": {"k": }}')!.path, '$.metadata.k');
  t.equal(findJsonFault('[1, 2, {"a": [x')!.path, '$[2].a[0]');
  t.equal(findJsonFault('{"a": 1 "b": 2}')!.message, "expected ',' or '}' but found '\"'");
  t.equal(findJsonFault('{"a": 1}')!, null, 'valid JSON has no fault');
  t.equal(findJsonFault('{"a": 1} x')!.message, "unexpected 'x' after the JSON value");
});

t.test('parseJsonBody throws 400 INVALID_REQUEST with the path of the fault', async (t) => {
  try {
    parseJsonBody('{"events": ["a", }');
    t.fail('should throw');
  } catch (err) {
    t.ok(err instanceof SluiceError);
    const e = err as SluiceError;
    t.equal(e.status, 400);
    t.equal(e.code, 'INVALID_REQUEST');
    const errors = e.extra.errors as { path: string; message: string }[];
    t.equal(errors[0].path, '$.events[1]');
    t.match(errors[0].message, /position 17/);
  }
  t.throws(() => parseJsonBody('   '), { code: 'INVALID_REQUEST' });
  t.same(parseJsonBody('{"a":1}'), { a: 1 });
});

t.test('invalid escapes are faults of the text, never a thrown SyntaxError', async (t) => {
  for (const text of ['{"\\q":1}', '{"a":"\\x41"}', '["\\u12"]', '["\\u12zz"]', '["\\', '{"a\\']) {
    const fault = findJsonFault(text);
    t.ok(fault, `${JSON.stringify(text)} has a fault`);
    t.throws(() => parseJsonBody(text), { code: 'INVALID_REQUEST' }, `${JSON.stringify(text)}: 400`);
  }
  t.match(findJsonFault('{"\\q":1}')!.message, /invalid escape/);
  t.same(parseJsonBody('{"a":"\\u0041\\n\\/"}'), { a: 'A\n/' }, 'valid escapes still parse');
});

t.test('nesting is bounded at MAX_JSON_DEPTH, with the path of the too-deep value', async (t) => {
  const nest = (n: number) => '['.repeat(n) + ']'.repeat(n);
  t.ok(parseJsonBody(nest(MAX_JSON_DEPTH)), `${MAX_JSON_DEPTH} levels parse`);
  t.throws(() => parseJsonBody(nest(MAX_JSON_DEPTH + 1)), { code: 'INVALID_REQUEST' }, 'one more is a 400');
  t.throws(() => parseJsonBody('['.repeat(10_000)), { code: 'INVALID_REQUEST' }, '10,000 unclosed [ is a 400');
  t.throws(
    () => parseJsonBody(nest(100_000)),
    { code: 'INVALID_REQUEST' },
    '100,000 levels is a 400, not a stack overflow',
  );
  const deepObject = `{"data":${'{"a":'.repeat(70)}1${'}'.repeat(71)}`;
  try {
    parseJsonBody(deepObject);
    t.fail('should throw');
  } catch (err) {
    const e = (err as SluiceError).extra.errors as { path: string; message: string }[];
    t.match(e[0].message, /nested deeper than 64/);
    t.match(e[0].path, /^\$\.data(\.a)+$/, 'the path points into data');
  }
  t.equal(depthExceededAt('["[[[[[[[[[[[[[[[[[["]', 2), -1, 'brackets inside strings do not count');
  t.equal(depthExceededAt('[["\\"[[["]]', 2), -1, 'nor after an escaped quote');
  t.equal(depthExceededAt('[[[]]]', 2), 2);
});

t.test('throttled logging writes at most the limit per window and counts the rest', async (t) => {
  const lines: string[] = [];
  let now = 0;
  const log = throttled(
    (msg, f) => lines.push(`${msg}${f?.suppressed ? ` ${f.suppressed}` : ''}`),
    3,
    1000,
    () => now,
  );
  for (let i = 0; i < 100; i++) log('boom');
  t.same(lines, ['boom', 'boom', 'boom']);
  now = 1000;
  log('boom');
  t.same(lines.slice(3), ['log lines suppressed by the throttle 97', 'boom']);
});
