import t from 'tap';
import { startTestNode, call, freePort } from '../helpers/sluice.ts';
import { cliEnv, runCli, spawnIngress } from '../../harness/sluice-cli.ts';

const a = await startTestNode();
const b = await spawnIngress(cliEnv(a.config), await freePort(), await freePort());
t.teardown(async () => {
  await b.stop();
  await a.close();
});
const officer = await a.client('security-officer', 'acme');
const officerToken = await a.token(officer);

/** Polls until `check` holds; tests assert behaviour, the bench measures the time. */
async function eventually(check: () => Promise<boolean>, ms = 10_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 5));
  }
  return false;
}

const grant = (base: string, c: { client_id: string; client_secret: string }) =>
  call(base, 'POST', '/v1/auth/token', {
    body: { grant_type: 'client_credentials', client_id: c.client_id, client_secret: c.client_secret },
  });

t.test('a revocation made on node A is enforced by the separate process B', async (t) => {
  const victim = await a.client('inference-reader', 'acme');
  const fromA = await a.token(victim);
  const fromB = (await grant(b.base, victim)).json.access_token as string;
  t.type(fromB, 'string', 'B issues tokens to the client (it shares the client registry)');
  const before = await call(b.base, 'GET', '/v1/inference/models', { token: fromA });
  // Accepted and in scope: B proxies, and with no upstream configured that is 502 UPSTREAM_UNAVAILABLE.
  t.same(
    { status: before.status, code: before.json?.code },
    { status: 502, code: 'UPSTREAM_UNAVAILABLE' },
    "B accepts A's token before",
  );
  const res = await call(a.base, 'POST', '/v1/auth/revocations', {
    token: officerToken,
    body: { client_id: victim.client_id, reason: 'compromised' },
  });
  t.equal(res.status, 201);
  for (const [name, token] of [
    ['issued by A', fromA],
    ['issued by B', fromB],
  ]) {
    const refused = await eventually(
      async () => (await call(b.base, 'GET', '/v1/inference/models', { token })).json?.code === 'TOKEN_REVOKED',
    );
    t.ok(refused, `B refuses the token ${name} with TOKEN_REVOKED`);
  }
  const secret = await grant(b.base, victim);
  t.equal(secret.status, 401, 'B refuses the secret');
  t.equal(secret.json.error, 'invalid_client');
  t.equal((await grant(a.base, victim)).status, 401, 'A refuses it too: no new token anywhere');
  const again = await call(b.base, 'POST', '/v1/auth/revocations', {
    token: await a.token(officer),
    body: { client_id: victim.client_id, reason: 'again, on B' },
  });
  t.equal(again.status, 200, 'revoking again on B is idempotent');
  t.equal(again.json.revocation_id, res.json.revocation_id);
});

t.test('revoking on B: A enforces it; tenant boundaries and 404 hold on B', async (t) => {
  const victim = await a.client('inference-reader', 'acme');
  const token = await a.token(victim);
  const foreign = await a.client('inference-reader', 'globex');
  // Made on A: B answers for it once its view has the record (otherwise a 404 proves nothing).
  t.ok(await eventually(async () => (await grant(b.base, foreign)).status === 200), 'node B has the new client');
  const officerB = (await grant(b.base, officer)).json.access_token as string;
  t.equal(
    (
      await call(b.base, 'POST', '/v1/auth/revocations', {
        token: officerB,
        body: { client_id: foreign.client_id, reason: 'x' },
      })
    ).status,
    404,
    "another tenant's client: 404",
  );
  t.equal(
    (
      await call(b.base, 'POST', '/v1/auth/revocations', {
        token: officerB,
        body: { client_id: 'cl_nope', reason: 'x' },
      })
    ).status,
    404,
    'unknown client: 404',
  );
  t.equal((await grant(b.base, foreign)).status, 200, 'the foreign client still works');
  const res = await call(b.base, 'POST', '/v1/auth/revocations', {
    token: officerB,
    body: { client_id: victim.client_id, reason: 'from B' },
  });
  t.equal(res.status, 201);
  t.ok(
    await eventually(
      async () => (await call(a.base, 'GET', '/v1/inference/models', { token })).json?.code === 'TOKEN_REVOKED',
    ),
    'A refuses the token',
  );
});

t.test('operator CLI: revoke across tenants, re-enable (audited)', async (t) => {
  const victim = await a.client('inference-reader', 'globex');
  const rev = await runCli(
    ['admin', 'revoke', '--client-id', victim.client_id, '--reason', 'incident 42', '--actor', 'alice', '--json'],
    cliEnv(a.config),
  );
  t.equal(rev.code, 0, rev.stderr);
  const out = JSON.parse(rev.stdout);
  t.equal(out.created, true);
  t.equal(out.tenant_id, 'globex');
  t.ok(await eventually(async () => (await grant(b.base, victim)).status === 401), 'B refuses the secret');
  const early = await runCli(
    ['admin', 'reenable', '--client-id', victim.client_id, '--reason', 'false alarm'],
    cliEnv(a.config),
  );
  t.equal(early.code, 1, 'refused while tokens from before the revocation could still verify');
  t.match(early.stderr + early.stdout, /--force/);
  const re = await runCli(
    [
      'admin',
      'reenable',
      '--client-id',
      victim.client_id,
      '--reason',
      'false alarm',
      '--actor',
      'alice',
      '--force',
      '--json',
    ],
    cliEnv(a.config),
  );
  t.equal(re.code, 0, re.stderr);
  const reOut = JSON.parse(re.stdout);
  t.match(reOut.client_secret, /^sk_/, 're-enabling prints a new secret');
  t.not(reOut.client_secret, victim.client_secret);
  const renewed = { client_id: victim.client_id, client_secret: reOut.client_secret as string };
  t.ok(
    await eventually(async () => (await grant(b.base, renewed)).status === 200),
    'B issues tokens to the new secret',
  );
  t.equal((await grant(b.base, victim)).status, 401, 'the secret from before the revocation stays refused on B');
  t.equal((await grant(a.base, victim)).status, 401, 'and on A');
  const globexOfficer = await a.client('security-officer', 'globex');
  const audit = await call(a.base, 'GET', '/v1/audit?limit=1000', { token: await a.token(globexOfficer) });
  const actions = audit.json.data
    .filter((e: any) => e.subject === victim.client_id)
    .map((e: any) => [e.action, e.actor]);
  t.same(actions, [
    ['client.created', 'operator'],
    ['credential.revoked', 'operator:alice'],
    ['credential.reenabled', 'operator:alice'],
  ]);
  const verify = await runCli(['audit', 'verify'], cliEnv(a.config));
  t.equal(verify.code, 0, verify.stdout);
});
