import t, { type Test } from 'tap';
import { createHmac, randomBytes } from 'node:crypto';
import { verifyWebhook, WebhookVerificationError, type WebhookVerificationCode } from '../../receiver-sdk/index.ts';
import { verifyWebhook as fromSubpath } from 'sluice/webhooks';
import { newEndpointSecret, signDelivery } from '../../outbound/signing.ts';
import type { EventRecord } from '../../core/webhooks/records.ts';

const secret = 'whsec_test-secret-0123456789abcdefghijklmnopqrstuv';
const now = 1_760_000_000_000; // ms
const event: EventRecord = {
  id: 'evt_1',
  type: 'inference.completed',
  tenant_id: 'acme',
  data: { model: 'm1', ok: true },
  created_at: now - 60_000,
};
const signed = signDelivery(secret, event, 1, now);

function expectCode(t: Test, fn: () => unknown, code: WebhookVerificationCode, name: string): void {
  try {
    fn();
    t.fail(`${name}: accepted`);
  } catch (err) {
    t.ok(err instanceof WebhookVerificationError, `${name}: a WebhookVerificationError`);
    t.equal((err as WebhookVerificationError).code, code, `${name}: ${(err as Error).message}`);
  }
}

/** Signs an arbitrary raw body the way Sluice does, for cases signDelivery cannot produce. */
function sign(rawBody: string, key = secret): string {
  return `sha256=${createHmac('sha256', key).update(rawBody).digest('hex')}`;
}

t.test('a genuine delivery verifies from a string, a Buffer, a header record or a Headers object', async (t) => {
  const body = verifyWebhook(signed.rawBody, signed.headers, secret, { now });
  t.same(body, {
    id: 'evt_1',
    type: 'inference.completed',
    tenant_id: 'acme',
    created_at: new Date(event.created_at).toISOString(),
    timestamp: now / 1000,
    data: { model: 'm1', ok: true },
  });
  t.same(verifyWebhook(Buffer.from(signed.rawBody), signed.headers, secret, { now }), body);
  t.same(verifyWebhook(signed.rawBody, new Headers(signed.headers), secret, { now }), body);
  const nodeStyle = {
    'X-Service-Signature-256': [signed.headers['x-service-signature-256']],
    'X-Service-Timestamp': signed.headers['x-service-timestamp'],
    host: undefined,
  };
  t.same(verifyWebhook(signed.rawBody, nodeStyle, secret, { now }), body, 'header names in any case, array values');
  t.same(
    fromSubpath(signed.rawBody, signed.headers, secret, { now }),
    body,
    "the package's sluice/webhooks export is the same function",
  );
  t.same(
    verifyWebhook(signed.rawBody, signed.headers, secret, { now: now + 299_000 }),
    body,
    'inside the 300-second window',
  );
});

t.test('every way a delivery can be wrong has its code', async (t) => {
  const tampered = signed.rawBody.replace('"ok":true', '"ok":false');
  t.not(tampered, signed.rawBody);
  expectCode(t, () => verifyWebhook(tampered, signed.headers, secret, { now }), 'SIGNATURE_MISMATCH', 'tampered body');
  expectCode(
    t,
    () => verifyWebhook(signed.rawBody, signed.headers, 'whsec_someone-else', { now }),
    'SIGNATURE_MISMATCH',
    'wrong secret',
  );
  expectCode(
    t,
    () =>
      verifyWebhook(signed.rawBody, { ...signed.headers, 'x-service-signature-256': 'sha256=abc' }, secret, { now }),
    'SIGNATURE_MISMATCH',
    'malformed signature',
  );
  expectCode(
    t,
    () =>
      verifyWebhook(
        signed.rawBody,
        {
          ...signed.headers,
          'x-service-signature-256': signed.headers['x-service-signature-256'].replace('sha256=', 'sha1='),
        },
        secret,
        { now },
      ),
    'SIGNATURE_MISMATCH',
    'wrong algorithm label',
  );
  const { 'x-service-signature-256': _s, ...noSig } = signed.headers;
  expectCode(
    t,
    () => verifyWebhook(signed.rawBody, noSig, secret, { now, scheme: 'sluice' }),
    'SIGNATURE_MISSING',
    'no signature header',
  );
  t.equal(
    verifyWebhook(signed.rawBody, noSig, secret, { now }).id,
    'evt_1',
    "without Sluice's header, 'auto' checks the Standard Webhooks one",
  );
  const { 'webhook-signature': _w, ...neither } = noSig;
  expectCode(
    t,
    () => verifyWebhook(signed.rawBody, neither, secret, { now }),
    'SIGNATURE_MISSING',
    'no signature header of either scheme',
  );
  const { 'x-service-timestamp': _ts, ...noTs } = signed.headers;
  expectCode(t, () => verifyWebhook(signed.rawBody, noTs, secret, { now }), 'TIMESTAMP_MISSING', 'no timestamp header');
  expectCode(
    t,
    () => verifyWebhook(signed.rawBody, { ...signed.headers, 'x-service-timestamp': 'yesterday' }, secret, { now }),
    'TIMESTAMP_MISSING',
    'a timestamp that is not unix seconds',
  );

  expectCode(
    t,
    () => verifyWebhook(signed.rawBody, signed.headers, secret, { now: now + 301_000 }),
    'TIMESTAMP_OUT_OF_WINDOW',
    'an old delivery (301 s)',
  );
  expectCode(
    t,
    () => verifyWebhook(signed.rawBody, signed.headers, secret, { now: now - 301_000 }),
    'TIMESTAMP_OUT_OF_WINDOW',
    'a delivery from the future',
  );
  expectCode(
    t,
    () => verifyWebhook(signed.rawBody, signed.headers, secret, { now: now + 61_000, toleranceSeconds: 60 }),
    'TIMESTAMP_OUT_OF_WINDOW',
    'a tighter tolerance',
  );

  // A captured (authentic) body replayed later with a fresh, unsigned header timestamp.
  const fresh = String(now / 1000 + 3600);
  expectCode(
    t,
    () =>
      verifyWebhook(signed.rawBody, { ...signed.headers, 'x-service-timestamp': fresh }, secret, {
        now: now + 3600_000,
      }),
    'TIMESTAMP_MISMATCH',
    'header and body timestamps differ',
  );

  const notJson = 'not json at all';
  expectCode(
    t,
    () => verifyWebhook(notJson, { ...signed.headers, 'x-service-signature-256': sign(notJson) }, secret, { now }),
    'BODY_INVALID',
    'a signed body that is not JSON',
  );
  const notWebhook = JSON.stringify({ hello: 'world', timestamp: now / 1000 });
  expectCode(
    t,
    () =>
      verifyWebhook(notWebhook, { ...signed.headers, 'x-service-signature-256': sign(notWebhook) }, secret, { now }),
    'BODY_INVALID',
    'a signed body without the webhook fields',
  );
});

t.test('any one of several signatures may match (rotation-friendly), none may be forged', async (t) => {
  const header = `sha256=${'0'.repeat(64)}, ${signed.headers['x-service-signature-256']}`;
  t.equal(
    verifyWebhook(signed.rawBody, { ...signed.headers, 'x-service-signature-256': header }, secret, { now }).id,
    'evt_1',
  );
  expectCode(
    t,
    () =>
      verifyWebhook(
        signed.rawBody,
        { ...signed.headers, 'x-service-signature-256': `sha256=${'0'.repeat(64)}, sha256=${'f'.repeat(64)}` },
        secret,
        { now },
      ),
    'SIGNATURE_MISMATCH',
    'no candidate matches',
  );
});

t.test('bad arguments are programming errors, not verification failures', async (t) => {
  t.throws(() => verifyWebhook(signed.rawBody, signed.headers, '', { now }), TypeError);
  t.throws(() => verifyWebhook(signed.rawBody, signed.headers, secret, { now, toleranceSeconds: -1 }), TypeError);
});

t.test('the Standard Webhooks scheme: the same secret, any v1 entry, the signed timestamp', async (t) => {
  const std = { now, scheme: 'standard' as const };
  t.equal(verifyWebhook(signed.rawBody, signed.headers, secret, std).id, 'evt_1');
  const tampered = signed.rawBody.replace('"ok":true', '"ok":fals3');
  expectCode(t, () => verifyWebhook(tampered, signed.headers, secret, std), 'SIGNATURE_MISMATCH', 'tampered body');
  expectCode(
    t,
    () => verifyWebhook(signed.rawBody, { ...signed.headers, 'webhook-id': 'evt_2' }, secret, std),
    'SIGNATURE_MISMATCH',
    'another webhook-id',
  );
  expectCode(
    t,
    () =>
      verifyWebhook(signed.rawBody, { ...signed.headers, 'webhook-timestamp': String(now / 1000 + 1) }, secret, std),
    'SIGNATURE_MISMATCH',
    'another (signed) timestamp',
  );
  expectCode(
    t,
    () => verifyWebhook(signed.rawBody, signed.headers, secret, { ...std, now: now + 301_000 }),
    'TIMESTAMP_OUT_OF_WINDOW',
    'an old delivery',
  );
  expectCode(
    t,
    () => verifyWebhook(signed.rawBody, { ...signed.headers, 'webhook-signature': 'v2,abc' }, secret, std),
    'SIGNATURE_MISMATCH',
    'no v1 entry',
  );
});

t.test('a rotation: both secrets sign; either verifies, in either scheme; a list of secrets is accepted', async (t) => {
  const fresh = newEndpointSecret();
  t.match(fresh, /^whsec_[A-Za-z0-9+/]{43}=$/, 'new secrets are whsec_ + standard base64 of 32 bytes');
  const both = signDelivery({ current: fresh, previous: secret }, event, 1, now);
  t.match(both.headers['webhook-signature'], /^v1,\S+ v1,\S+$/, 'two v1 entries');
  t.ok(both.headers['x-service-signature-256-previous'], 'the old secret signs in the -previous header');
  for (const scheme of ['sluice', 'standard'] as const) {
    t.equal(verifyWebhook(both.rawBody, both.headers, fresh, { now, scheme }).id, 'evt_1', `${scheme}: the new secret`);
    t.equal(
      verifyWebhook(both.rawBody, both.headers, secret, { now, scheme }).id,
      'evt_1',
      `${scheme}: the old secret`,
    );
    t.equal(
      verifyWebhook(signed.rawBody, signed.headers, [fresh, secret], { now, scheme }).id,
      'evt_1',
      `${scheme}: a receiver holding both secrets`,
    );
    expectCode(
      t,
      () => verifyWebhook(both.rawBody, both.headers, newEndpointSecret(), { now, scheme }),
      'SIGNATURE_MISMATCH',
      `${scheme}: a third secret`,
    );
  }
});

t.test('a secret made before Standard Webhooks (base64url) keys the standard scheme with the same bytes', async (t) => {
  const raw = randomBytes(32);
  const old = `whsec_${raw.toString('base64url')}`;
  const d = signDelivery(old, event, 1, now);
  const expected = createHmac('sha256', raw)
    .update(`${event.id}.${now / 1000}.${d.rawBody}`)
    .digest('base64');
  t.equal(d.headers['webhook-signature'], `v1,${expected}`);
  t.equal(verifyWebhook(d.rawBody, d.headers, old, { now, scheme: 'standard' }).id, 'evt_1');
  t.equal(
    verifyWebhook(d.rawBody, d.headers, `whsec_${raw.toString('base64')}`, { now, scheme: 'standard' }).id,
    'evt_1',
    'the standard-base64 spelling of the same secret',
  );
});
