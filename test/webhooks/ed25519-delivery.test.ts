/**
 * `signing: "ed25519"` end to end on a real broker (issue 35): a receiver on 127.0.0.1 verifies
 * `v1a` with the key it fetched from the endpoint's public JWKS route; PATCH to `both` adds `v1`
 * and X-Service-Signature-256 beside it; a rotation's overlap puts both keys in the JWKS and two
 * `v1a` entries on a delivery; the JWKS of an unknown id, or of an hmac endpoint, is the same 404.
 */
import t from 'tap';
import { createJwksVerifier, verifyWebhook } from 'sluice/webhooks';
import { call, startTestNode } from '../helpers/sluice.ts';
import { type Hit, publish, receiver, registerEndpoint, type TestReceiver } from '../dispatcher/receiver.ts';

const node = await startTestNode({ SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true' }, { dispatcher: true });
const receivers: TestReceiver[] = [];
t.teardown(async () => {
  for (const r of receivers) await r.close();
  await node.close();
});
const token = await node.token(await node.client('admin', 'ed25519'));
const r = await receiver(200);
receivers.push(r);

async function deliver(n: number): Promise<Hit> {
  const pub = await publish(node, token, { type: 'order.created', data: { n } });
  const hits = await r.until((e) => e.some((h) => h.body.id === pub.json.id), 30_000, `event ${n}`);
  return hits.find((h) => h.body.id === pub.json.id)!;
}
const headersOf = (hit: Hit) => Object.fromEntries(Object.entries(hit.headers).map(([k, v]) => [k, String(v)]));
const n = (body: { data: unknown }) => (body.data as { n: number }).n;
const entries = (hit: Hit) => String(hit.headers['webhook-signature']).split(' ');

const res = await call(node.base, 'POST', '/v1/webhooks/endpoints', {
  token,
  body: { url: r.url, events: ['order.*'], signing: 'ed25519' },
});
t.equal(res.status, 201, res.text);
const ep = res.json as { id: string; secret: string; signing: string; signing_public_key: string; state: string };
const jwksPath = `/v1/webhooks/endpoints/${ep.id}/jwks`;

t.test('registration: signing ed25519, the whpk_ key once, ACTIVE by a v1a-signed ping', async (t) => {
  t.equal(ep.signing, 'ed25519');
  t.match(ep.signing_public_key, /^whpk_[A-Za-z0-9+/]{43}=$/);
  t.equal(ep.state, 'ACTIVE');
  const ping = r.hits.find((h) => h.body.type === 'ping')!;
  t.equal(verifyWebhook(ping.rawBody, headersOf(ping), ep.signing_public_key).type, 'ping');
  const read = await call(node.base, 'GET', `/v1/webhooks/endpoints/${ep.id}`, { token });
  t.equal(read.json.signing, 'ed25519');
  t.notOk('signing_public_key' in read.json, 'the key is answered at creation, the JWKS publishes it');
  t.notMatch(read.text, /whsk_|signing_key/, 'never the private key');
});

t.test('the JWKS: public, the key as a JWK, a short max-age', async (t) => {
  const got = await call(node.base, 'GET', jwksPath);
  t.equal(got.status, 200, got.text);
  t.match(got.headers.get('cache-control'), /max-age=\d+/);
  t.equal(got.json.keys.length, 1);
  const [jwk] = got.json.keys;
  t.match(jwk, { kty: 'OKP', crv: 'Ed25519', use: 'sig', alg: 'EdDSA', kid: /^[A-Za-z0-9_-]{43}$/ });
  t.equal(Buffer.from(jwk.x, 'base64url').toString('base64'), ep.signing_public_key.slice(5));
});

t.test('a delivery carries v1a only, and verifies with the key from the JWKS route', async (t) => {
  const hit = await deliver(1);
  t.same(
    entries(hit).map((e) => e.split(',')[0]),
    ['v1a'],
  );
  t.notOk(hit.headers['x-service-signature-256'], 'no HMAC secret in use');
  const verifier = createJwksVerifier(`${node.base}${jwksPath}`);
  t.equal(n(await verifier.verify(hit.rawBody, headersOf(hit))), 1);
  await t.rejects(verifier.verify(hit.rawBody.replace('"n":1', '"n":2'), headersOf(hit)), {
    code: 'SIGNATURE_MISMATCH',
  });
});

t.test('PATCH to both: v1 and v1a side by side, and X-Service-Signature-256', async (t) => {
  const patched = await call(node.base, 'PATCH', `/v1/webhooks/endpoints/${ep.id}`, {
    token,
    body: { signing: 'both' },
  });
  t.equal(patched.status, 200, patched.text);
  t.equal(patched.json.signing, 'both');
  const hit = await deliver(2);
  t.same(
    entries(hit).map((e) => e.split(',')[0]),
    ['v1', 'v1a'],
  );
  const h = headersOf(hit);
  t.equal(n(verifyWebhook(hit.rawBody, h, ep.secret, { scheme: 'standard' })), 2, 'v1');
  t.equal(n(verifyWebhook(hit.rawBody, h, ep.secret, { scheme: 'sluice' })), 2, 'X-Service-Signature-256');
  const verifier = createJwksVerifier(`${node.base}${jwksPath}`);
  t.equal(n(await verifier.verify(hit.rawBody, h)), 2, 'v1a with the JWKS key');
  const bad = await call(node.base, 'PATCH', `/v1/webhooks/endpoints/${ep.id}`, { token, body: { signing: 'rsa' } });
  t.equal(bad.status, 400);
  t.match(bad.headers.get('content-type'), /problem\+json/);
});

t.test('rotation: both keys in the JWKS and two v1a entries during the overlap', async (t) => {
  const rotated = await call(node.base, 'POST', `/v1/webhooks/endpoints/${ep.id}/rotate-secret`, {
    token,
    body: { overlap_seconds: 3600 },
  });
  t.equal(rotated.status, 200, rotated.text);
  const newKey = rotated.json.signing_public_key as string;
  t.match(newKey, /^whpk_/);
  t.not(newKey, ep.signing_public_key);
  const got = await call(node.base, 'GET', jwksPath);
  t.equal(got.json.keys.length, 2);
  t.not(got.json.keys[0].kid, got.json.keys[1].kid, 'distinct kids');
  const hit = await deliver(3);
  const kinds = entries(hit).map((e) => e.split(',')[0]);
  t.same(kinds, ['v1', 'v1', 'v1a', 'v1a']);
  const h = headersOf(hit);
  t.equal(n(verifyWebhook(hit.rawBody, h, newKey)), 3, 'the new key verifies');
  t.equal(n(verifyWebhook(hit.rawBody, h, ep.signing_public_key)), 3, 'the previous key verifies');
});

t.test('the JWKS of an unknown id and of an hmac endpoint: the same 404', async (t) => {
  const hmac = await registerEndpoint(node, token, r.url, ['order.*']);
  const unknown = await call(node.base, 'GET', '/v1/webhooks/endpoints/ep_000000000000000000000000/jwks');
  const plain = await call(node.base, 'GET', `/v1/webhooks/endpoints/${hmac.id}/jwks`);
  t.equal(unknown.status, 404);
  t.equal(plain.status, 404);
  t.match(unknown.headers.get('content-type'), /problem\+json/);
  const strip = (j: Record<string, unknown>) => ({ ...j, instance: undefined, trace_id: undefined });
  t.same(strip(plain.json), strip(unknown.json), 'nothing tells one from the other');
  t.equal(plain.json.detail, 'not found', 'says nothing more than "not found"');
});
