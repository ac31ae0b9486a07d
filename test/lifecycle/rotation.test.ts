import t from 'tap';
import * as jose from 'jose';
import { startTestNode, call, type TestNode } from '../helpers/sluice.ts';
import { ManualClock } from '../../core/clock.ts';
import { DAY_MS } from '../../core/context.ts';
import { SluiceError } from '../../core/errors.ts';
import type { RotationScheduler } from '../../core/rotation/scheduler.ts';

const MIN = 60_000;

async function leader(node: TestNode): Promise<RotationScheduler> {
  const s = node.workers.rotation as RotationScheduler;
  // Leadership is a consumer group's assignment, not a view: polled here.
  const deadline = Date.now() + 30_000;
  while (!s.lease.isLeader) {
    if (Date.now() > deadline) throw new Error('no rotation leadership within 30 s');
    await new Promise((r) => setTimeout(r, 20));
  }
  return s;
}

function tokenAt(node: TestNode, clientId: string): string {
  return node.ctx.tokens.issue(node.ctx.clients.get(clientId)!, undefined).access_token;
}

t.test('signing keys: 95 simulated days, every token verifies until its expiry and never after', async (t) => {
  const clock = new ManualClock();
  const node = await startTestNode({ SLUICE_ROTATION_CHECK_MS: '3600000' }, { clock });
  t.teardown(() => node.close());
  const scheduler = await leader(node);
  const c = await node.client('inference-reader', 'acme');
  const skew = node.config.clockSkewSeconds;
  const live: { token: string; kid: string; exp: number; checkedAfter: boolean }[] = [];
  const signers = new Set<string>();
  let liveFailures = 0;
  let expiredAccepted = 0;
  let missingFromJwks = 0;
  let verifications = 0;
  const end = clock.now() + 95 * DAY_MS;
  while (clock.now() < end) {
    clock.advance(5 * MIN);
    await scheduler.check();
    const token = tokenAt(node, c.client_id);
    const { kid } = jose.decodeProtectedHeader(token);
    signers.add(kid!);
    live.push({ token, kid: kid!, exp: jose.decodeJwt(token).exp!, checkedAfter: false });
    const nowS = Math.floor(clock.now() / 1000);
    const published = new Set(node.ctx.keys.jwks(clock.now()).keys.map((k) => k.kid));
    for (const l of live) {
      if (nowS < l.exp) {
        verifications++;
        try {
          node.ctx.tokens.verify(l.token);
        } catch {
          liveFailures++;
        }
        if (!published.has(l.kid)) missingFromJwks++;
      } else if (nowS >= l.exp + skew) {
        try {
          node.ctx.tokens.verify(l.token);
          expiredAccepted++;
        } catch (err) {
          if (!(err instanceof SluiceError && err.code === 'TOKEN_EXPIRED')) expiredAccepted++;
        }
        l.checkedAfter = true;
      }
    }
    for (let i = live.length - 1; i >= 0; i--) if (live[i].checkedAfter) live.splice(i, 1);
  }
  t.ok(signers.size >= 4, `${signers.size} signing keys over 95 days (three rotations or more)`);
  t.ok(verifications > 50_000, `${verifications} verifications of live tokens`);
  t.equal(liveFailures, 0, 'no live token ever failed verification, across every rotation');
  t.equal(missingFromJwks, 0, 'the key of every live token was in the JWKS');
  t.equal(expiredAccepted, 0, 'no token verified after its expiry');
  const retired = node.ctx.keys.records().filter((k) => k.published_until + 3600_000 <= clock.now());
  t.equal(retired.length, 0, 'keys whose last token expired were retired');
  const officer = await node.client('security-officer', 'acme');
  const audit = await call(node.base, 'GET', '/v1/audit', { token: await node.token(officer) });
  t.equal(audit.status, 200);
  const sys = node.ctx.auditView.page('_system', 0, 1000).data;
  t.equal(
    sys.filter((e) => e.action === 'signing_key.created').length,
    signers.size,
    'every signing key is audited, the first one written at start-up included',
  );
  t.ok(
    sys.some((e) => e.action === 'signing_key.retired'),
    'retirements are audited',
  );
});

t.test(
  'client secrets: a new one every 30 days, both work through the grace window, the old one is refused after',
  async (t) => {
    const clock = new ManualClock();
    const roles = {
      'rotating-reader': ['inference:read', 'credentials:read'],
      'secret-reader': ['credentials:read', 'credentials:read-any'],
    };
    const node = await startTestNode(
      { SLUICE_ROTATION_CHECK_MS: '3600000', SLUICE_SECRET_GRACE_DAYS: '7', SLUICE_ROLES: JSON.stringify(roles) },
      { clock },
    );
    t.teardown(() => node.close());
    const scheduler = await leader(node);
    const c = await node.client('rotating-reader', 'acme');
    const grant = (secret: string) =>
      call(node.base, 'POST', '/v1/auth/token', {
        body: { grant_type: 'client_credentials', client_id: c.client_id, client_secret: secret },
      });

    clock.advance(29 * DAY_MS);
    await scheduler.check();
    t.equal(node.ctx.clients.get(c.client_id)!.secrets.length, 1, 'nothing rotates before 30 days');

    clock.advance(1 * DAY_MS + MIN);
    await scheduler.check();
    const secretOf = async (reader: { client_id: string; client_secret: string }) =>
      call(node.base, 'GET', `/v1/auth/clients/${c.client_id}/secret`, { token: await node.token(reader as never) });
    const stale = await secretOf(c);
    t.equal(stale.status, 401, 'a token of the rotated-out secret does not read its successor');
    t.equal(stale.json.code, 'TOKEN_INVALID');
    const admin = await node.client('admin', 'acme');
    const res = await secretOf(admin);
    t.equal(res.status, 200, 'an admin (read-any, every scope) reads it');
    t.equal(res.headers.get('cache-control'), 'no-store');
    const s1 = res.json.client_secret as string;
    t.match(s1, /^sk_/);
    t.not(s1, c.client_secret);
    t.equal(Date.parse(res.json.previous_secret_expires_at) - Date.parse(res.json.rotated_at), 7 * DAY_MS);
    t.equal(Date.parse(res.json.next_rotation_at) - Date.parse(res.json.rotated_at), 30 * DAY_MS);
    t.equal((await grant(c.client_secret)).status, 200, 'the old secret works in the grace window');
    t.equal((await grant(s1)).status, 200, 'the new secret works');
    const own = await secretOf({ client_id: c.client_id, client_secret: s1 });
    t.equal(own.status, 200, "a token of the client's current secret reads it");
    t.equal(own.json.client_secret, s1);

    t.equal(
      (await secretOf(await node.client('security-officer', 'globex'))).status,
      404,
      'another tenant cannot read it',
    );
    t.equal((await secretOf(await node.client('inference-reader', 'acme'))).status, 403, 'credentials:read is needed');
    const officerRead = await secretOf(await node.client('security-officer', 'acme'));
    t.equal(officerRead.status, 403, "credentials:read alone does not read another client's secret");
    t.equal(officerRead.json.missing_scope, 'credentials:read-any', 'and names credentials:read-any');
    const weaker = await secretOf(await node.client('secret-reader', 'acme'));
    t.equal(weaker.status, 403, 'read-any does not reach a client stronger than the caller');
    t.equal(weaker.json.missing_scope, 'inference:read', 'and names the scope the caller lacks');

    clock.advance(7 * DAY_MS - 2 * MIN);
    await scheduler.check();
    t.equal((await grant(c.client_secret)).status, 200, 'still inside the grace window');
    clock.advance(3 * MIN);
    await scheduler.check();
    const refused = await grant(c.client_secret);
    t.equal(refused.status, 401, 'refused once the grace window ended');
    t.equal(refused.json.error, 'invalid_client');
    t.equal((await grant(s1)).status, 200);

    const acme = node.ctx.auditView.page('acme', 0, 1000).data;
    const entries = acme.filter((e) => e.action === 'client_secret.rotated' && e.subject === c.client_id);
    t.equal(entries.length, 1, 'the rotation is audited once');
    t.equal(entries[0].actor, 'sluice:rotation');
    const reads = acme.filter((e) => e.action === 'client_secret.read' && e.subject === c.client_id);
    t.same(
      reads.map((e) => e.actor),
      [admin.client_id],
      "only the admin's cross-client read is audited, with the admin as actor",
    );
  },
);
