/**
 * POST /v1/auth/token is limited per client id (SLUICE_TOKEN_RATE_PER_MINUTE, SLUICE_TOKEN_RATE_BURST),
 * counting failed authentications of that client id as well, answered 429 with Retry-After in the
 * OAuth error shape. The token bucket runs on the node's clock (a ManualClock here), so refills are
 * stepped by hand, never waited for.
 */
import t from 'tap';
import { startTestNode, call } from '../helpers/sluice.ts';
import { ManualClock } from '../../core/clock.ts';

const clock = new ManualClock();
const node = await startTestNode(
  {
    SLUICE_TOKEN_RATE_PER_MINUTE: '1',
    SLUICE_TOKEN_RATE_BURST: '5',
    SLUICE_AUTH_FAILURE_RATE: '1',
    SLUICE_AUTH_FAILURE_BURST: '3',
  },
  { clock },
);
t.teardown(() => node.close());

const grant = (c: { client_id: string }, secret: string) =>
  call(node.base, 'POST', '/v1/auth/token', {
    body: { grant_type: 'client_credentials', client_id: c.client_id, client_secret: secret },
  });

t.test('a client gets its burst of tokens, then 429 with Retry-After in the OAuth shape', async (t) => {
  const c = await node.client('inference-reader', 'acme');
  const other = await node.client('inference-reader', 'acme');
  const statuses: number[] = [];
  for (let i = 0; i < 5; i++) statuses.push((await grant(c, c.client_secret)).status);
  t.same(statuses, [200, 200, 200, 200, 200], 'the burst passes');
  const basic = await call(node.base, 'POST', '/v1/auth/token', {
    raw: 'grant_type=client_credentials',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${c.client_id}:${c.client_secret}`).toString('base64')}`,
    },
  });
  t.equal(basic.status, 429, 'then 429, whichever way the client authenticates');
  t.equal(basic.json.error, 'temporarily_unavailable', 'RFC 6749 error shape');
  t.match(basic.json.error_description, /token rate/);
  t.same(Object.keys(basic.json).sort(), ['error', 'error_description'], 'and nothing else in the body');
  t.equal(basic.headers.get('cache-control'), 'no-store');
  t.match(basic.headers.get('content-type'), /^application\/json/);
  const retryAfter = Number(basic.headers.get('retry-after'));
  t.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter} s: when the next token is due at 1/min`);
  t.equal((await grant(c, c.client_secret)).status, 429, 'still refused');
  t.equal((await grant(other, other.client_secret)).status, 200, 'another client of the tenant is not limited');

  clock.advance(60_000);
  t.equal((await grant(c, c.client_secret)).status, 200, 'a minute later one more token');
  t.equal((await grant(c, c.client_secret)).status, 429, 'and only one');
});

t.test("failed authentications count against the client id's token rate", async (t) => {
  const c = await node.client('inference-reader', 'acme');
  for (let i = 0; i < 3; i++) t.equal((await grant(c, c.client_secret)).status, 200, `token ${i + 1} of 5`);
  const wrong1 = await grant(c, 'sk_wrong');
  const wrong2 = await grant(c, 'sk_wrong');
  t.same([wrong1.status, wrong2.status], [401, 401], 'two failures: plain invalid_client, and they spend the rest');
  const wrong3 = await grant(c, 'sk_wrong');
  t.equal(wrong3.status, 429, 'a third failure finds the bucket empty: 429');
  t.match(wrong3.json.error_description, /too many token requests for this client/, 'refused by the token rate');
  t.ok(Number(wrong3.headers.get('retry-after')) >= 1, 'with Retry-After');
  t.equal((await grant(c, c.client_secret)).status, 429, 'the right secret waits too: the budget is the client id’s');
  clock.advance(60_000);
  t.equal((await grant(c, c.client_secret)).status, 200, 'until the bucket refills');
});

t.test('a guesser takes no more than the failure budget from the owner', async (t) => {
  // The failure budget (3, then 1/s, per client id and per address) is full again after a minute.
  clock.advance(60_000);
  const c = await node.client('inference-reader', 'globex');
  const guesses = [];
  for (let i = 0; i < 12; i++) guesses.push((await grant(c, `sk_guess_${i}`)).status);
  const counted = guesses.filter((s) => s === 401).length;
  t.equal(counted, 3, 'the failure budget lets 3 of 12 guesses be tried: the rest got 429');
  t.ok(
    guesses.every((s) => s === 401 || s === 429),
    'every guess is refused',
  );
  const owner: number[] = [];
  for (let i = 0; i < 6; i++) owner.push((await grant(c, c.client_secret)).status);
  t.same(owner, [200, 200, 429, 429, 429, 429], 'the owner gets the burst less the 3 guesses tried, then 429');
});
