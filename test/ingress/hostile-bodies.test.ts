import t from 'tap';
import { startTestNode, call } from '../helpers/sluice.ts';

const node = await startTestNode();
t.teardown(() => node.close());
const admin = await node.client('admin', 'acme');
const token = await node.token(admin);

const nest = (n: number) => '['.repeat(n) + ']'.repeat(n);
const deepData = (n: number) =>
  JSON.stringify({ type: 'inference.completed', data: { v: JSON.parse(nest(1)) } }).replace('[]', nest(n));

t.test('malformed and deep bodies are 400 with the path of the fault on every JSON route, never 500', async (t) => {
  const routes: [string, string, boolean][] = [
    ['POST', '/v1/auth/token', false],
    ['POST', '/v1/webhooks/events', true],
    ['POST', '/v1/webhooks/endpoints', true],
    ['POST', '/v1/auth/revocations', true],
  ];
  const bodies: [string, string][] = [
    ['an invalid escape in a key', '{"\\q":1}'],
    ['an invalid escape in a value', '{"a":"\\x"}'],
    ['a short \\u escape', '{"a":"\\u12"}'],
    ['10,000 unclosed [', '['.repeat(10_000)],
    ['10,000 nested arrays', nest(10_000)],
    ['data nested 4,100 levels', deepData(4_100)],
    ['data nested 65 levels', deepData(65)],
  ];
  for (const [method, path, auth] of routes) {
    for (const [name, raw] of bodies) {
      const res = await call(node.base, method, path, {
        raw,
        headers: { 'content-type': 'application/json' },
        token: auth ? token : undefined,
      });
      t.equal(res.status, 400, `${path}, ${name}: 400`);
    }
  }
  const res = await call(node.base, 'POST', '/v1/webhooks/events', {
    raw: deepData(100),
    headers: { 'content-type': 'application/json' },
    token,
  });
  t.match(res.json.errors[0].message, /nested deeper than 64 levels/, 'the depth limit is named');
  t.match(res.json.errors[0].path, /^\$\.data\.v/, 'at the path of the too-deep value');
  const ok = await call(node.base, 'POST', '/v1/webhooks/events', {
    raw: deepData(20),
    headers: { 'content-type': 'application/json' },
    token,
  });
  t.equal(ok.status, 202, 'data nested 20 levels is accepted');
});
