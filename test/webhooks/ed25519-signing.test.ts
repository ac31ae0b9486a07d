/**
 * `v1a` (ed25519) signing of a delivery (issue 35): each mode's headers, verified by plain
 * node:crypto and by the receiver package (a `whpk_` key, or a JWKS URL with its refresh on an
 * unknown key), two `v1a` entries during a rotation's overlap, and a changed byte refused.
 */
import { createPublicKey, verify } from 'node:crypto';
import t from 'tap';
import { createJwksVerifier, verifyWebhook, WebhookVerificationError } from 'sluice/webhooks';
import type { EventRecord } from '../../core/webhooks/records.ts';
import { newEndpointSecret, signDelivery, type SignedDelivery } from '../../outbound/signing.ts';
import { jwkOf, newSigningKeyPair } from '../../core/webhooks/signing-keys.ts';
import { endpointJwks } from '../../core/webhooks/endpoint-jwks.ts';

const event = (): EventRecord => ({
  id: 'evt_ed',
  type: 'order.created',
  tenant_id: 'acme',
  data: { total: 120, note: 'x'.repeat(900) },
  created_at: Date.now(),
});
const secret = newEndpointSecret();
const pair = newSigningKeyPair();
const older = newSigningKeyPair();

/** The `v1a` entries of the delivery, verified one by one with node:crypto against `whpk`. */
function nodeVerifies(d: SignedDelivery, whpk: string): boolean[] {
  const key = createPublicKey({
    key: Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), Buffer.from(whpk.slice(5), 'base64')]),
    format: 'der',
    type: 'spki',
  });
  const content = Buffer.from(`${d.headers['webhook-id']}.${d.headers['webhook-timestamp']}.${d.rawBody}`);
  return d.headers['webhook-signature']
    .split(' ')
    .filter((e) => e.startsWith('v1a,'))
    .map((e) => verify(null, content, key, Buffer.from(e.slice(4), 'base64')));
}

t.test('ed25519: one v1a entry, no HMAC headers, verified by node:crypto and the package', async (t) => {
  const d = signDelivery({ current: secret, signing: 'ed25519', keys: [pair.privateKey] }, event(), 1, Date.now());
  t.match(pair.publicKey, /^whpk_[A-Za-z0-9+/]{43}=$/);
  t.match(d.headers['webhook-signature'], /^v1a,[A-Za-z0-9+/]{86}==$/, 'one v1a entry only');
  t.notOk('x-service-signature-256' in d.headers, 'no HMAC secret in use: no X-Service-Signature-256');
  t.same(nodeVerifies(d, pair.publicKey), [true]);
  t.equal(verifyWebhook(d.rawBody, d.headers, pair.publicKey).id, 'evt_ed');
  t.throws(() => verifyWebhook(d.rawBody, d.headers, older.publicKey), { code: 'SIGNATURE_MISMATCH' });
  t.throws(() => verifyWebhook(d.rawBody.replace('120', '121'), d.headers, pair.publicKey), {
    code: 'SIGNATURE_MISMATCH',
  });
  t.throws(() => verifyWebhook(d.rawBody, d.headers, secret), 'the HMAC secret verifies nothing here');
  t.throws(() => verifyWebhook(d.rawBody, d.headers, pair.publicKey, { now: Date.now() + 301_000 }), {
    code: 'TIMESTAMP_OUT_OF_WINDOW',
  });
});

t.test('both: v1 then v1a side by side, and X-Service-Signature-256', async (t) => {
  const d = signDelivery({ current: secret, signing: 'both', keys: [pair.privateKey] }, event(), 1, Date.now());
  t.match(d.headers['webhook-signature'], /^v1,[A-Za-z0-9+/]{43}= v1a,[A-Za-z0-9+/]{86}==$/);
  t.match(d.headers['x-service-signature-256'], /^sha256=[0-9a-f]{64}$/);
  t.equal(verifyWebhook(d.rawBody, d.headers, secret, { scheme: 'standard' }).id, 'evt_ed', 'v1 verifies');
  t.equal(verifyWebhook(d.rawBody, d.headers, secret).id, 'evt_ed', "Sluice's header verifies");
  t.equal(verifyWebhook(d.rawBody, d.headers, pair.publicKey).id, 'evt_ed', 'v1a verifies');
  t.same(nodeVerifies(d, pair.publicKey), [true]);
});

t.test('hmac (and a mode without keys) carries no v1a entry', async (t) => {
  for (const signing of ['hmac', 'ed25519'] as const) {
    const keys = signing === 'hmac' ? [pair.privateKey] : [];
    const d = signDelivery({ current: secret, signing, keys }, event(), 1, Date.now());
    t.notMatch(d.headers['webhook-signature'], /v1a,/, signing);
    t.match(d.headers['x-service-signature-256'], /^sha256=/, signing);
  }
});

t.test("a rotation's overlap: two v1a entries, each key verifies", async (t) => {
  const d = signDelivery(
    { current: secret, signing: 'ed25519', keys: [pair.privateKey, older.privateKey] },
    event(),
    1,
    Date.now(),
  );
  t.equal(d.headers['webhook-signature'].split(' ').length, 2);
  t.same(nodeVerifies(d, pair.publicKey), [true, false]);
  t.same(nodeVerifies(d, older.publicKey), [false, true]);
  t.equal(verifyWebhook(d.rawBody, d.headers, older.publicKey).id, 'evt_ed');
  t.equal(verifyWebhook(d.rawBody, d.headers, pair.publicKey).id, 'evt_ed');
});

t.test('the endpoint JWKS: the current key, the previous one during the overlap only', async (t) => {
  const now = Date.now();
  const rec = {
    id: 'ep_1',
    tenant_id: 'acme',
    url: 'https://x.example/',
    events: ['*'],
    metadata: null,
    secret_sealed: 's',
    state: 'ACTIVE' as const,
    created_at: now,
    updated_at: now,
    verified_at: now,
    signing: 'ed25519' as const,
    signing_public_key: pair.publicKey,
    previous_signing_public_key: older.publicKey,
    previous_secret_until: now + 1000,
  };
  const during = endpointJwks(rec, now)!;
  t.same(
    during.keys.map((k) => k.kid),
    [jwkOf(pair.publicKey).kid, jwkOf(older.publicKey).kid],
  );
  t.not(during.keys[0].kid, during.keys[1].kid, 'distinct kids');
  t.match(during.keys[0], { kty: 'OKP', crv: 'Ed25519', use: 'sig', alg: 'EdDSA' });
  t.equal(Buffer.from(during.keys[0].x, 'base64url').toString('base64'), pair.publicKey.slice(5));
  t.equal(endpointJwks(rec, now + 1000)!.keys.length, 1, 'after the overlap: the new key only');
  t.equal(endpointJwks({ ...rec, signing: 'hmac' }, now), undefined, 'hmac: no key set');
  t.equal(endpointJwks(undefined, now), undefined);
});

t.test('the JWKS verifier: fetched once, refetched (rate-limited) when no cached key verifies', async (t) => {
  let clock = Date.now();
  let served = [jwkOf(older.publicKey)];
  const fetched: number[] = [];
  const fetch = async () => {
    fetched.push(clock);
    return new Response(JSON.stringify({ keys: served }), { headers: { 'content-type': 'application/json' } });
  };
  const verifier = createJwksVerifier('http://sluice.test/jwks', { fetch, now: () => clock });
  const signed = (keys: string[]) => signDelivery({ current: secret, signing: 'ed25519', keys }, event(), 1, clock);

  const a = signed([older.privateKey]);
  t.equal((await verifier.verify(a.rawBody, a.headers)).id, 'evt_ed');
  t.equal((await verifier.verify(a.rawBody, a.headers)).id, 'evt_ed');
  t.equal(fetched.length, 1, 'the key set is cached');

  // A rotation: Sluice now signs with the new key; the verifier learns it on the first miss...
  served = [jwkOf(pair.publicKey), jwkOf(older.publicKey)];
  clock += 61_000;
  const b = signed([pair.privateKey]);
  t.equal((await verifier.verify(b.rawBody, b.headers)).id, 'evt_ed', 'a new key is fetched and verifies');
  t.equal(fetched.length, 2);

  // ...and a signature by an unknown key does not refetch again within the interval.
  const stranger = newSigningKeyPair();
  const c = signed([stranger.privateKey]);
  await t.rejects(verifier.verify(c.rawBody, c.headers), WebhookVerificationError);
  t.equal(fetched.length, 2, 'at most one fetch per interval');
  clock += 61_000;
  await t.rejects(verifier.verify(c.rawBody, c.headers), { code: 'SIGNATURE_MISMATCH' });
  t.equal(fetched.length, 3, 'after the interval a miss fetches again');
});
