/**
 * A signing-key rotation seen by a second node, over HTTP: nodes A and B share the topics (and a
 * ManualClock). The rotation step runs on A (`rotateKeys`, what A's rotation scheduler runs when it
 * leads) a day before A's key stops signing; B's `GET /v1/auth/jwks` lists the successor before it
 * signs, and once it signs, B accepts a token A issued with it, on a route and by a plain JOSE
 * verification against B's JWKS. rotation.test.ts covers the plan itself, on one node.
 */
import t from 'tap';
import * as jose from 'jose';
import { ManualClock } from '../../core/clock.ts';
import { DAY_MS } from '../../core/context.ts';
import { rotateKeys } from '../../core/rotation/key-rotation.ts';
import { call, startTestNode, until, type TestNode } from '../helpers/sluice.ts';

const MIN = 60_000;
const clock = new ManualClock();
// The schedulers stay out of the way: the rotation runs when the test says, on A.
const env = { SLUICE_ROTATION_CHECK_MS: '3600000', SLUICE_KEY_ROTATION_DAYS: '30' };
const a = await startTestNode(env, { clock });
const b = await startTestNode(env, { clock, prefix: a.config.topicPrefix });
t.teardown(async () => {
  await b.close();
  await a.close();
});

const jwksOf = async (node: TestNode) => {
  const res = await call(node.base, 'GET', '/v1/auth/jwks');
  if (res.status !== 200) throw new Error(`jwks: ${res.status} ${res.text}`);
  return res.json as jose.JSONWebKeySet;
};
const kidsOf = async (node: TestNode) => (await jwksOf(node)).keys.map((k) => k.kid);
const kidOf = (token: string) => jose.decodeProtectedHeader(token).kid;
const endpointsOn = (node: TestNode, token: string) => call(node.base, 'GET', '/v1/webhooks/endpoints', { token });

t.test("B publishes A's new key and accepts A's tokens signed with it", async (t) => {
  const client = await a.client('admin', 'acme');
  const before = await a.token(client);
  const k1 = kidOf(before);
  t.same(await kidsOf(b), [k1], "B's JWKS lists A's one key");
  t.equal((await endpointsOn(b, before)).status, 200, "B accepts A's token");

  clock.advance(30 * DAY_MS - DAY_MS / 2); // half a day before the key stops signing
  const { created } = await rotateKeys(a.ctx);
  t.equal(created.length, 1, 'the rotation on A writes a successor');
  const k2 = created[0];
  t.not(k2, k1);
  await until(
    () => kidsOf(b),
    (kids) => kids.includes(k2),
    20_000,
    "the successor in B's JWKS",
  );
  t.same(await kidsOf(b), [k1, k2], "B's JWKS lists both, the successor before it signs");
  t.equal(kidOf(await a.token(client)), k1, 'A still signs with the old key');

  clock.advance(DAY_MS / 2 + MIN);
  const after = await a.token(client);
  t.equal(kidOf(after), k2, 'A signs with the successor once its window opens');
  const res = await endpointsOn(b, after);
  t.equal(res.status, 200, "B accepts A's token signed with the new key");
  const verified = await jose.jwtVerify(after, jose.createLocalJWKSet(await jwksOf(b)), {
    currentDate: new Date(clock.now()),
  });
  t.equal(verified.protectedHeader.kid, k2, "and it verifies against B's JWKS alone");
  t.equal(verified.payload.client_id, client.client_id);
  t.same((await kidsOf(b)).includes(k1), true, 'the old key stays published while its tokens live');

  const [head, body, sig] = after.split('.');
  const forged = `${head}.${body}.${sig.slice(0, -4)}${sig.slice(-4) === 'AAAA' ? 'BBBB' : 'AAAA'}`;
  t.equal((await endpointsOn(b, forged)).status, 401, 'while a bad signature under the new kid is refused on B');
});
