/**
 * Whoever holds a client's secret must not outlive its rotation or its revocation:
 *  - a rotated-out secret (valid for the overlap, 24 h by default) and every token obtained with it
 *    never read its successor, nor any other client's secret;
 *  - the successor reaches the client through another client with credentials:read-any or the
 *    operator (`sluice admin client-secret`), and a token of the current secret still reads it;
 *  - re-enabling a revoked client issues a new secret and every earlier one stops working.
 */
import t from 'tap';
import { startTestNode, call, type TestNode } from '../helpers/sluice.ts';
import { cliEnv, runCli } from '../../harness/sluice-cli.ts';
import { ManualClock } from '../../core/clock.ts';
import { DAY_MS } from '../../core/context.ts';
import { rotateSecret } from '../../core/rotation/secret-rotation.ts';
import { revokeClient, reenableClient } from '../../core/clients/revocation.ts';

const MIN = 60_000;
const clock = new ManualClock();
const roles = { 'rotating-reader': ['inference:read', 'credentials:read'] };
// No SLUICE_SECRET_GRACE_DAYS: the default overlap is under test.
const node: TestNode = await startTestNode({ SLUICE_ROLES: JSON.stringify(roles) }, { clock });
t.teardown(() => node.close());

type Creds = { client_id: string; client_secret: string };
const grant = (c: Creds) =>
  call(node.base, 'POST', '/v1/auth/token', {
    body: { grant_type: 'client_credentials', client_id: c.client_id, client_secret: c.client_secret },
  });
const readSecret = (clientId: string, token: string) =>
  call(node.base, 'GET', `/v1/auth/clients/${clientId}/secret`, { token });
const rotate = (clientId: string) => rotateSecret(node.ctx, node.ctx.clients.get(clientId)!, clock.now());

t.test('a rotated-out secret and its tokens never read the successor', async (t) => {
  const c = await node.client('rotating-reader', 'acme');
  const before = await node.token(c); // obtained while its secret was current
  await rotate(c.client_id);

  const stale = await readSecret(c.client_id, before);
  t.equal(stale.status, 401, 'a token obtained before the rotation is refused');
  t.equal(stale.json.code, 'TOKEN_INVALID');
  t.match(stale.headers.get('www-authenticate'), /^Bearer .*error="invalid_token"/);
  t.notMatch(stale.text, /sk_/, 'and carries no secret');

  const overlap = await grant(c);
  t.equal(overlap.status, 200, 'the old secret still gets tokens during the overlap');
  const during = await readSecret(c.client_id, overlap.json.access_token);
  t.equal(during.status, 401, 'but a token it gets now does not read the new secret either');
  const unnamed = node.ctx.tokens.issue(node.ctx.clients.get(c.client_id)!, undefined).access_token;
  t.equal((await readSecret(c.client_id, unnamed)).status, 401, 'nor does a token naming no secret');

  // The operator path: the CLI reads the rotated secret (audited) to hand it to the client.
  const cli = await runCli(
    ['admin', 'client-secret', '--client-id', c.client_id, '--json', '--actor', 'carol'],
    cliEnv(node.config),
  );
  t.equal(cli.code, 0, cli.stderr);
  const s1 = JSON.parse(cli.stdout).client_secret as string;
  t.match(s1, /^sk_/);
  t.not(s1, c.client_secret);

  // The admin path: a client with credentials:read-any and every scope of c, on its current secret.
  const admin = await node.client('admin', 'acme');
  const byAdmin = await readSecret(c.client_id, await node.token(admin));
  t.equal(byAdmin.status, 200, 'another client with credentials:read-any reads it');
  t.equal(byAdmin.json.client_secret, s1, 'the same secret');
  t.equal(
    Date.parse(byAdmin.json.previous_secret_expires_at) - Date.parse(byAdmin.json.rotated_at),
    DAY_MS,
    'the overlap is 24 h by default',
  );

  const own = await readSecret(c.client_id, await node.token({ client_id: c.client_id, client_secret: s1 } as never));
  t.equal(own.status, 200, "a token of the client's current secret still reads it");

  const reads = node.ctx.auditView
    .page('acme', 0, 1000)
    .data.filter((e) => e.action === 'client_secret.read' && e.subject === c.client_id)
    .map((e) => e.actor);
  t.same(reads, ['operator:carol', admin.client_id], 'the operator and the admin reads are audited');

  clock.advance(DAY_MS - MIN);
  t.equal((await grant(c)).status, 200, 'the old secret works until the overlap ends');
  clock.advance(2 * MIN);
  const late = await grant(c);
  t.equal(late.status, 401, 'and is refused after 24 h');
  t.equal(late.json.error, 'invalid_client');
  t.equal((await grant({ client_id: c.client_id, client_secret: s1 })).status, 200, 'the new one works');
});

t.test("a rotated-out admin secret reads no other client's secret either", async (t) => {
  const target = await node.client('rotating-reader', 'acme');
  await rotate(target.client_id);
  const admin = await node.client('admin', 'acme');
  const adminBefore = await node.token(admin);
  t.equal((await readSecret(target.client_id, adminBefore)).status, 200, 'before its own rotation the admin reads it');
  await rotate(admin.client_id);
  const refused = await readSecret(target.client_id, adminBefore);
  t.equal(refused.status, 401, 'after it, a token of its old secret is refused');
  t.equal(refused.json.code, 'TOKEN_INVALID');
  const overlap = await grant(admin);
  t.equal(overlap.status, 200);
  t.equal(
    (await readSecret(target.client_id, overlap.json.access_token)).status,
    401,
    'so is one obtained with the old secret during the overlap: no pivot to another client',
  );
});

t.test('re-enabling a revoked client issues a new secret and invalidates every earlier one', async (t) => {
  const v = await node.client('rotating-reader', 'acme');
  await rotate(v.client_id);
  const admin = await node.client('admin', 'acme');
  const pending = await readSecret(v.client_id, await node.token(admin));
  t.equal(pending.status, 200);
  const s1 = { client_id: v.client_id, client_secret: pending.json.client_secret as string };
  t.equal((await grant(v)).status, 200, 'before: the rotated-out secret works (overlap)');
  t.equal((await grant(s1)).status, 200, 'and the rotated-in one');

  await revokeClient(node.ctx, { clientId: v.client_id, reason: 'leaked', actor: 'operator:test', tenant: null });
  t.equal((await grant(s1)).status, 401, 'revoked');
  clock.advance(16 * MIN); // past the lifetime of every token issued before the revocation
  const r = await reenableClient(node.ctx, { clientId: v.client_id, reason: 'cleaned up', actor: 'operator:test' });
  t.match(r.client_secret, /^sk_/, 'the new secret is returned');
  t.not(r.client_secret, v.client_secret);
  t.not(r.client_secret, s1.client_secret);

  const s0Again = await grant(v);
  t.equal(s0Again.status, 401, 'the secret from creation (still inside its overlap) no longer works');
  t.equal(s0Again.json.error, 'invalid_client');
  t.equal((await grant(s1)).status, 401, 'nor does the rotated-in one');
  const s2 = { client_id: v.client_id, client_secret: r.client_secret! };
  const fresh = await grant(s2);
  t.equal(fresh.status, 200, 'the new secret works');
  const data = await call(node.base, 'GET', '/v1/inference/models', { token: fresh.json.access_token });
  t.equal(data.json?.code, 'UPSTREAM_UNAVAILABLE', 'and its token passes the edge (no upstream configured)');
  const left = await readSecret(v.client_id, await node.token(admin));
  t.equal(left.status, 404, 'the rotated secret waiting to be fetched is gone too');
  t.equal(node.ctx.clients.get(v.client_id)!.secrets.length, 1, 'the record holds one secret');

  const entry = node.ctx.auditView
    .page('acme', 0, 1000)
    .data.find((e) => e.action === 'credential.reenabled' && e.subject === v.client_id);
  t.match(entry, { actor: 'operator:test', reason: /cleaned up.*new secret/ }, 're-enabling is audited');
});
