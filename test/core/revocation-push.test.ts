/**
 * The revocation push between regions (core/clients/revocation-push.ts) over real HTTP on
 * 127.0.0.1: a signed push holds the client revoked until its Kafka record arrives or 5 minutes
 * pass (by the node's clock); anything unsigned, signed by another cluster, stale or malformed is
 * refused with a problem+json answer and changes nothing.
 */
import t from 'tap';
import { createHmac } from 'node:crypto';
import { ManualClock } from '../../core/clock.ts';
import { createLogger } from '../../core/log.ts';
import { RevocationList, REVOCATION_REACH_MS } from '../../core/clients/revocation-list.ts';
import {
  PROVISIONAL_TTL_MS,
  pushRevocation,
  startPeerServer,
  type PeerServerDeps,
} from '../../core/clients/revocation-push.ts';
import type { Config } from '../../core/config.ts';

const MASTER = Buffer.alloc(32, 7);
const clock = new ManualClock(Date.UTC(2026, 10, 24, 12));
const logged: string[] = [];

/** What the push and the peer port use of a node's context, with a real revocation list. */
function node(peers: string[] = [], masterKey = MASTER) {
  const revocations = new RevocationList('revocations', clock);
  const ctx: PeerServerDeps = {
    config: { masterKey, peers } as Partial<Config> as Config,
    clock,
    revocations,
    log: createLogger('warn', 'test', (line) => logged.push(line)),
  };
  return { ctx, revocations };
}

const receiving = node();
const peer = await startPeerServer(receiving.ctx, '127.0.0.1', 0);
t.teardown(() => peer.close());
const url = `http://127.0.0.1:${peer.port}`;

/** Bytes as a sender with `key` would sign them. */
function signedText(text: string, key = MASTER) {
  const pushKey = createHmac('sha256', key).update('sluice revocation push v1').digest();
  return { text, signature: createHmac('sha256', pushKey).update(text).digest('hex') };
}
const signed = (body: object, key = MASTER) => signedText(JSON.stringify(body), key);

async function post(text: string, signature?: string, path = '/revocations') {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(signature ? { 'x-sluice-signature': signature } : {}) },
    body: text,
  });
  const body = await res.text();
  return { status: res.status, type: res.headers.get('content-type'), json: body ? JSON.parse(body) : null };
}

const iat = (ms: number) => Math.floor(ms / 1000);

t.test('a push from a peer holds the client revoked until its Kafka record, or 5 minutes', async (t) => {
  const revokedAt = clock.now();
  const sender = node([url]);
  await pushRevocation(sender.ctx, { client_id: 'cl_pushed', revoked_at: revokedAt });
  const list = receiving.revocations;
  t.ok(list.refuses('cl_pushed', iat(revokedAt - 60_000)), 'a token issued before the revocation is refused');
  t.notOk(list.refuses('cl_pushed', iat(revokedAt + 2000)), 'one issued after it is not');
  t.notOk(list.refuses('cl_other', iat(revokedAt - 60_000)), 'another client is untouched');

  clock.advance(PROVISIONAL_TTL_MS - 1000);
  t.ok(list.refuses('cl_pushed', iat(revokedAt - 60_000)), 'still held just before the 5 minutes');
  clock.advance(2000);
  t.notOk(list.refuses('cl_pushed', iat(revokedAt - 60_000)), 'without its Kafka record it lapses after 5 minutes');

  // A push, then the Kafka record: the record decides from then on (here: a re-enable, a tombstone).
  await pushRevocation(sender.ctx, { client_id: 'cl_recorded', revoked_at: clock.now() });
  t.ok(list.refuses('cl_recorded', iat(clock.now() - 1000)), 'held by the push');
  list.apply({ topic: 'revocations', partition: 0, offset: 0n, key: 'cl_recorded', value: null } as never);
  t.notOk(list.refuses('cl_recorded', iat(clock.now() - 1000)), 'the Kafka record replaces the push');
});

t.test(
  'a Kafka record also refuses tokens minted before a node read it (up to a minute after revoked_at)',
  async (t) => {
    const list = new RevocationList('revocations', clock);
    const revokedAt = clock.now();
    const record = { revocation_id: 'rev_1', client_id: 'cl_gap', tenant_id: 'acme', reason: 'leak', actor: 'x' };
    const value = Buffer.from(JSON.stringify({ ...record, revoked_at: revokedAt, audit_entry_id: 'aud_1' }));
    list.apply({ topic: 'revocations', partition: 0, offset: '1', key: 'cl_gap', value, headers: {}, timestamp: 0 });
    t.ok(list.refuses('cl_gap', iat(revokedAt - 60_000)), 'a token issued before the revocation is refused');
    t.ok(list.refuses('cl_gap', iat(revokedAt + 2000)), 'so is one a node minted 2 s later, before it read the record');
    t.ok(list.refuses('cl_gap', iat(revokedAt + REVOCATION_REACH_MS)), 'up to REVOCATION_REACH_MS');
    t.notOk(list.refuses('cl_gap', iat(revokedAt + REVOCATION_REACH_MS + 1000)), 'and no further');
    list.apply({
      topic: 'revocations',
      partition: 0,
      offset: '2',
      key: 'cl_gap',
      value: null,
      headers: {},
      timestamp: 0,
    });
    t.notOk(list.refuses('cl_gap', iat(revokedAt + 2000)), 'a re-enable (the tombstone) lifts it');
  },
);

t.test('pushes that are not signed by this cluster, stale or malformed change nothing', async (t) => {
  const list = receiving.revocations;
  const now = clock.now();
  const valid = { client_id: 'cl_x', revoked_at: now, sent_at: now };
  const cases: [string, { text: string; signature?: string }, number][] = [
    ['no signature', { text: JSON.stringify(valid) }, 401],
    ['signed by another master key', signed(valid, Buffer.alloc(32, 8)), 401],
    [
      'a signature of other bytes',
      { text: JSON.stringify(valid), signature: signed({ ...valid, x: 1 }).signature },
      401,
    ],
    ["sent 61 s ago by the sender's clock", signed({ ...valid, sent_at: now - 61_000 }), 400],
    ['sent 61 s ahead of this clock', signed({ ...valid, sent_at: now + 61_000 }), 400],
    ['no sent_at', signed({ client_id: 'cl_x', revoked_at: now }), 400],
    ['revoked_at not a number', signed({ ...valid, revoked_at: 'now' }), 400],
    ['an empty client id', signed({ ...valid, client_id: '' }), 400],
    ['not JSON', signedText('{'), 400],
    ['JSON null', signedText('null'), 400],
  ];
  for (const [name, push, status] of cases) {
    const res = await post(push.text, push.signature);
    t.equal(res.status, status, `${name}: ${status}`);
    t.equal(res.type, 'application/problem+json', `${name}: a problem+json answer`);
    t.equal(res.json?.status, status, `${name}: its body names the status (${res.json?.detail})`);
  }
  t.notOk(list.refuses('cl_x', iat(now - 60_000)), 'none of them revoked the client');

  const wrongPath = await post(signed(valid).text, signed(valid).signature, '/anything');
  t.equal(wrongPath.status, 404, 'the peer port serves POST /revocations only');
  const big = signed({ ...valid, pad: 'x'.repeat(5000) });
  const tooBig = await post(big.text, big.signature).catch((err: Error) => ({ status: 0, error: err.message }));
  t.equal(tooBig.status, 0, 'a body over 4 KiB is cut off, not read');
  t.notOk(list.refuses('cl_x', iat(now - 60_000)), 'still not revoked');
});

t.test('a push to a peer that is down or refuses is logged, never thrown', async (t) => {
  logged.length = 0;
  const otherCluster = node([url], Buffer.alloc(32, 9));
  const down = node(['http://127.0.0.1:1']);
  await t.resolves(pushRevocation(otherCluster.ctx, { client_id: 'cl_y', revoked_at: clock.now() }));
  await t.resolves(pushRevocation(down.ctx, { client_id: 'cl_y', revoked_at: clock.now() }));
  t.match(logged.join('\n'), /"status":401,"msg":"revocation push refused"/, 'the refusal is logged with its status');
  t.match(logged.join('\n'), /revocation push failed/, 'the unreachable peer is logged');
  t.notOk(receiving.revocations.refuses('cl_y', iat(clock.now() - 1000)), 'the refused push changed nothing');
});

t.test('a push counts once: the same bytes again are refused (409) and change nothing more', async (t) => {
  const list = receiving.revocations;
  const now = clock.now();
  const push = signed({ client_id: 'cl_replayed', revoked_at: now, sent_at: now, from: 'test' });
  t.equal((await post(push.text, push.signature)).status, 204, 'applied once');
  list.apply({ topic: 'revocations', partition: 0, offset: 1n, key: 'cl_replayed', value: null } as never);
  t.notOk(list.refuses('cl_replayed', iat(now - 1000)), 'its Kafka record (a re-enable) decided');
  clock.advance(20_000);
  const again = await post(push.text, push.signature);
  t.equal(again.status, 409, 'the captured push replayed 20 s later: 409');
  t.equal(again.type, 'application/problem+json');
  t.notOk(list.refuses('cl_replayed', iat(now - 1000)), 'the replay revoked nothing');
});

t.test('a push revokes nothing issued after it was sent, whatever its revoked_at says', async (t) => {
  const list = receiving.revocations;
  const now = clock.now();
  const tenYears = 10 * 365 * 24 * 3600_000;
  const push = signed({ client_id: 'cl_future', revoked_at: now + tenYears, sent_at: now });
  t.equal((await post(push.text, push.signature)).status, 204);
  t.ok(list.refuses('cl_future', iat(now - 1000)), 'a token issued before the push is refused');
  t.notOk(list.refuses('cl_future', iat(now + 2000)), 'one issued after it (a new token) is not');
});
