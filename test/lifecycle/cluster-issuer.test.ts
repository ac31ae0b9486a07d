import t from 'tap';
import { startTestNode, call, freePort } from '../helpers/sluice.ts';
import { cliEnv, runCli, spawnIngress } from '../../harness/sluice-cli.ts';

// Node A sets SLUICE_ISSUER; the cluster records it beside the signing keys.
const a = await startTestNode();
t.teardown(() => a.close());
const admin = await a.client('admin', 'acme');
const token = await a.token(admin);

t.test(
  "a second `sluice ingress` on another port without SLUICE_ISSUER adopts the cluster's and accepts its tokens",
  async (t) => {
    const port = await freePort();
    const b = await spawnIngress(cliEnv(a.config, { SLUICE_ISSUER: '' }), port, await freePort());
    t.teardown(() => b.stop());
    const list = await call(b.base, 'GET', '/v1/webhooks/endpoints?limit=1', { token });
    t.equal(list.status, 200, 'B accepts A\'s token (no "wrong issuer")');
    const meta = await call(b.base, 'GET', '/.well-known/oauth-authorization-server');
    t.equal(meta.json?.issuer, a.config.issuer, "B's metadata names the cluster's issuer, not its own port");
    const fromB = await call(b.base, 'POST', '/v1/auth/token', {
      body: { grant_type: 'client_credentials', client_id: admin.client_id, client_secret: admin.client_secret },
    });
    t.equal(
      (await call(a.base, 'GET', '/v1/webhooks/endpoints?limit=1', { token: fromB.json.access_token })).status,
      200,
      "A accepts B's token",
    );
  },
);

t.test("a node whose SLUICE_ISSUER differs from the cluster's refuses to start and names the variable", async (t) => {
  const port = await freePort();
  const res = await runCli(
    ['ingress', '--port', String(port), '--admin-port', String(await freePort())],
    cliEnv(a.config, { SLUICE_ISSUER: 'https://other.example' }),
  );
  t.not(res.code, 0, 'it exits non-zero');
  t.match(res.stderr + res.stdout, /SLUICE_ISSUER/, 'the message names SLUICE_ISSUER');
  t.match(res.stderr + res.stdout, a.config.issuer, "and the cluster's issuer");
});
