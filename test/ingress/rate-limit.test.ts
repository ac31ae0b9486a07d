import t from 'tap';
import { RateLimiter } from '../../core/rate-limit.ts';
import { startTestNode, call } from '../helpers/sluice.ts';

t.test('RateLimiter: a burst, then one token per 1/rate seconds; keys are independent', async (t) => {
  let now = 0;
  const l = new RateLimiter(2, 3, 100, () => now);
  t.same([l.take('a'), l.take('a'), l.take('a')], [null, null, null], 'the burst passes');
  t.equal(l.take('a'), 1, 'then refused, retry after 1 s');
  t.equal(l.take('b'), null, 'another key has its own bucket');
  now += 500;
  t.equal(l.take('a'), null, 'half a second at 2/s refills one token');
  t.equal(l.take('a'), 1);
  t.equal(new RateLimiter(0, 1).take('x'), null, 'rate 0 is off');
});

t.test('RateLimiter: bounded number of keys, least recently used dropped first', async (t) => {
  const l = new RateLimiter(1, 1, 2, () => 0);
  l.take('a');
  l.take('b');
  l.take('a'); // refused, but touches "a"
  l.take('c'); // evicts "b"
  t.equal(l.take('a'), 1, '"a" kept its empty bucket');
  t.equal(l.take('b'), null, '"b" was dropped and starts full');
});

const node = await startTestNode({
  SLUICE_RATE_LIMIT_PER_CLIENT: '1',
  SLUICE_RATE_LIMIT_BURST: '3',
  SLUICE_AUTH_FAILURE_RATE: '1',
  SLUICE_AUTH_FAILURE_BURST: '3',
});
t.teardown(() => node.close());

t.test('429 RATE_LIMITED with Retry-After once a client spends its burst; other clients unaffected', async (t) => {
  const a = await node.client('webhook-publisher', 'acme');
  const b = await node.client('webhook-publisher', 'acme');
  const ta = await node.token(a);
  const statuses: number[] = [];
  let limited: Awaited<ReturnType<typeof call>> | undefined;
  for (let i = 0; i < 5; i++) {
    const res = await call(node.base, 'GET', '/v1/webhooks/endpoints', { token: ta });
    statuses.push(res.status);
    if (res.status === 429) limited = res;
  }
  t.same(statuses.slice(0, 3), [200, 200, 200], 'the burst passes');
  t.equal(statuses[4], 429, 'then 429');
  t.equal(limited?.json.code, 'RATE_LIMITED');
  t.match(limited?.headers.get('content-type'), /application\/problem\+json/);
  t.ok(Number(limited?.headers.get('retry-after')) >= 1, 'Retry-After in seconds');
  t.equal(
    (await call(node.base, 'GET', '/v1/webhooks/endpoints', { token: await node.token(b) })).status,
    200,
    'another client is not limited',
  );
});

t.test('failed client authentications beyond the budget get 429; the right secret still works', async (t) => {
  const c = await node.client('inference-reader', 'globex');
  const attempt = (secret: string) =>
    call(node.base, 'POST', '/v1/auth/token', {
      body: { grant_type: 'client_credentials', client_id: c.client_id, client_secret: secret },
    });
  const wrong = [];
  for (let i = 0; i < 5; i++) wrong.push(await attempt('sk_wrong'));
  t.same(
    wrong.slice(0, 3).map((r) => r.status),
    [401, 401, 401],
    'the first failures are plain invalid_client',
  );
  t.equal(wrong[4].status, 429, 'then 429');
  t.equal(wrong[4].json.error, 'temporarily_unavailable', 'in the RFC 6749 error shape');
  t.ok(Number(wrong[4].headers.get('retry-after')) >= 1);
  t.equal(wrong[4].headers.get('cache-control'), 'no-store');
  const right = await attempt(c.client_secret);
  t.equal(right.status, 200, 'the right secret is never locked out');
});
