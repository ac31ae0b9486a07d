/**
 * Real deliveries, verified by the official `standardwebhooks` package (written elsewhere) and by
 * our verifyWebhook (both schemes), before, during and after a secret rotation; a delivery changed
 * by one byte fails every verifier. Rotation is audited and in the contract (test/contracts).
 */
import t from 'tap';
import { Webhook } from 'standardwebhooks';
import { verifyWebhook } from 'sluice/webhooks';
import { call, startTestNode } from '../helpers/sluice.ts';
import { publish, receiver, registerEndpoint, sleep, type Hit, type TestReceiver } from '../dispatcher/receiver.ts';

const node = await startTestNode({ SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true' }, { dispatcher: true });
const receivers: TestReceiver[] = [];
t.teardown(async () => {
  for (const r of receivers) await r.close();
  await node.close();
});
const token = await node.token(await node.client('admin', 'rotating'));
const r = await receiver(200);
receivers.push(r);
const ep = await registerEndpoint(node, token, r.url, ['inference.completed']);

/** Publishes one event and returns its delivery as the receiver got it. */
async function deliver(n: number): Promise<Hit> {
  const pub = await publish(node, token, { type: 'inference.completed', data: { n } });
  const hits = await r.until((e) => e.some((h) => h.body.id === pub.json.id), 30_000, `event ${n}`);
  return hits.find((h) => h.body.id === pub.json.id)!;
}

function headersOf(hit: Hit): Record<string, string> {
  return Object.fromEntries(Object.entries(hit.headers).map(([k, v]) => [k, String(v)]));
}

/** Which verifiers accept the delivery with `secret`: the official library, ours (standard), ours (Sluice's). */
function verdicts(
  hit: Hit,
  secret: string,
  rawBody = hit.rawBody,
): { official: boolean; standard: boolean; sluice: boolean } {
  const headers = headersOf(hit);
  const attempt = (fn: () => unknown) => {
    try {
      fn();
      return true;
    } catch {
      return false;
    }
  };
  return {
    official: attempt(() => new Webhook(secret).verify(rawBody, headers)),
    standard: attempt(() => verifyWebhook(rawBody, headers, secret, { scheme: 'standard' })),
    sluice: attempt(() => verifyWebhook(rawBody, headers, secret, { scheme: 'sluice' })),
  };
}

const ALL = { official: true, standard: true, sluice: true };
const NONE = { official: false, standard: false, sluice: false };

async function rotate(body?: unknown) {
  const res = await call(node.base, 'POST', `/v1/webhooks/endpoints/${ep.id}/rotate-secret`, {
    token,
    ...(body === undefined ? {} : { body }),
  });
  t.equal(res.status, 200, `rotate-secret: ${res.text.slice(0, 200)}`);
  return res;
}

t.test('before, during and after a rotation, both verifiers agree; one changed byte fails them all', async (t) => {
  const secretA = ep.secret;
  const before = await deliver(1);
  t.same(verdicts(before, secretA), ALL, 'before: secret A verifies with the official library and ours');
  t.match(before.headers['webhook-signature'], /^v1,[A-Za-z0-9+/]{43}=$/, 'one v1 entry');
  t.equal(before.headers['webhook-id'], before.body.id, 'webhook-id is the event id');
  t.equal(before.headers['webhook-timestamp'], before.headers['x-service-timestamp']);

  const first = await rotate();
  const secretB: string = first.json.secret;
  t.not(secretB, secretA, 'a new secret');
  t.match(secretB, /^whsec_[A-Za-z0-9+/]{43}=$/);
  t.equal(first.headers.get('cache-control'), 'no-store');
  const overlap = Date.parse(first.json.previous_secret_expires_at) - Date.now();
  t.ok(
    overlap > 23.9 * 3600_000 && overlap <= 24 * 3600_000,
    `the default overlap is 24 h (${(overlap / 3600_000).toFixed(3)} h)`,
  );

  const during = await deliver(2);
  t.match(during.headers['webhook-signature'], /^v1,\S+ v1,\S+$/, 'during: two v1 entries');
  t.ok(
    during.headers['x-service-signature-256-previous'],
    'during: the previous secret signs in X-Service-Signature-256-Previous',
  );
  t.same(verdicts(during, secretB), ALL, 'during: the new secret verifies');
  t.same(verdicts(during, secretA), ALL, 'during: the old secret still verifies');

  // A second rotation drops A at once (two secrets at most) and keeps B for 2 seconds.
  const second = await rotate({ overlap_seconds: 2 });
  const secretC: string = second.json.secret;
  const overlapping = await deliver(3);
  t.same(verdicts(overlapping, secretC), ALL, 'second rotation: the newest secret verifies');
  t.same(verdicts(overlapping, secretB), ALL, 'second rotation: the one before it still verifies');
  t.same(verdicts(overlapping, secretA), NONE, 'second rotation: the first secret is gone');

  await sleep(Math.max(0, Date.parse(second.json.previous_secret_expires_at) - Date.now()) + 200);
  const after = await deliver(4);
  t.match(after.headers['webhook-signature'], /^v1,[A-Za-z0-9+/]{43}=$/, 'after the overlap: one v1 entry');
  t.notOk(after.headers['x-service-signature-256-previous'], 'after the overlap: no previous signature');
  t.same(verdicts(after, secretC), ALL, 'after: the new secret verifies');
  t.same(verdicts(after, secretB), NONE, 'after: the old secret no longer does');

  // One byte of the body changed (a digit of the data), headers untouched.
  const tampered = after.rawBody.replace('"n":4', '"n":5');
  t.equal(tampered.length, after.rawBody.length);
  t.not(tampered, after.rawBody);
  t.same(verdicts(after, secretC, tampered), NONE, 'a one-byte change fails the official library and ours');

  const got = await call(node.base, 'GET', `/v1/webhooks/endpoints/${ep.id}`, { token });
  t.equal(got.json.previous_secret_expires_at, null, 'the endpoint shows no overlap once it ended');
  t.notOk(JSON.stringify(got.json).includes(secretC), 'the secret is never shown again');
  const audit = await call(node.base, 'GET', `/v1/audit?subject=${ep.id}`, { token });
  const rotations = (audit.json?.data ?? []).filter((e: { action: string }) => e.action === 'endpoint.secret_rotated');
  t.equal(rotations.length, 2, 'both rotations are audited');
});

t.test("rotate-secret refuses a bad overlap and another tenant's endpoint", async (t) => {
  const bad = await call(node.base, 'POST', `/v1/webhooks/endpoints/${ep.id}/rotate-secret`, {
    token,
    body: { overlap_seconds: -5 },
  });
  t.equal(bad.status, 400);
  t.equal(bad.json.code, 'INVALID_REQUEST');
  const unknown = await call(node.base, 'POST', `/v1/webhooks/endpoints/${ep.id}/rotate-secret`, {
    token,
    body: { overlap: 5 },
  });
  t.equal(unknown.status, 400);
  const other = await node.token(await node.client('admin', 'someone-else'));
  const foreign = await call(node.base, 'POST', `/v1/webhooks/endpoints/${ep.id}/rotate-secret`, { token: other });
  t.equal(foreign.status, 404);
});
