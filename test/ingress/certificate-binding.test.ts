/**
 * Certificate-bound tokens (RFC 8705 §3) and mTLS client authentication (RFC 8705 §2) through a
 * front door, with real certificates and real TLS handshakes. The front door here is a small
 * node:https proxy that does what `sluice front-door`'s HAProxy does (ingress/client-cert.ts): it
 * asks for a client certificate, removes the client's own X-Client-Cert-* headers, sends the
 * thumbprint of any certificate presented and the RFC 2253 subject of one its CA verified, and
 * forwards from 127.0.0.2, the node's only trusted proxy. A client talking to the node directly
 * (from 127.0.0.1) sends the same headers, forged, and is not believed.
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { createServer, request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import * as jose from 'jose';
import { makeCerts, selfSigned, type Cert } from '../../harness/certs.ts';
import { call, startTestNode, type TestNode } from '../helpers/sluice.ts';
import { cliEnv, runCli } from '../../harness/sluice-cli.ts';
import { reenableClient } from '../../core/clients/revocation.ts';
import { createCertificateClient } from '../../core/clients/provisioning.ts';

const dir = mkdtempSync(join(tmpdir(), 'sluice-binding-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const certs = makeCerts(dir);

// A self-signed client certificate (no CA), for self_signed_tls_client_auth.
const robot = selfSigned(dir, 'robot', '/CN=robot', ['extendedKeyUsage=clientAuth'], 30);

/** The subject as HAProxy's %[ssl_c_s_dn(,0,rfc2253)] prints it (both are OpenSSL's XN_FLAG_RFC2253). */
function rfc2253(c: Cert): string {
  const out = execFileSync('openssl', ['x509', '-in', c.cert, '-noout', '-subject', '-nameopt', 'RFC2253']);
  return out
    .toString()
    .trim()
    .replace(/^subject=/, '');
}
const subjects = new Map([certs.client, certs.client2, certs.foreign, robot].map((c) => [c.sha256, rfc2253(c)]));

interface FrontDoor {
  port: number;
  close(): void;
}

/** The front door: TLS with an optional client certificate, the two headers, forwarding from `source`. */
async function startFrontDoor(upstreamPort: number, source: string): Promise<FrontDoor> {
  const server = createServer(
    {
      cert: readFileSync(certs.server.cert),
      key: readFileSync(certs.server.key),
      ca: readFileSync(certs.ca.cert),
      requestCert: true,
      // A certificate of no CA gets through (self-signed clients), with no verified subject.
      rejectUnauthorized: false,
    },
    (req, res) => {
      const socket = req.socket as TLSSocket;
      const peer = socket.getPeerCertificate();
      const headers = { ...req.headers };
      delete headers['x-client-cert-sha256'];
      delete headers['x-client-cert-subject'];
      delete headers.connection; // hop by hop: each side has its own connection
      if (peer?.raw) {
        const sha256 = createHash('sha256').update(peer.raw).digest('hex');
        headers['x-client-cert-sha256'] = sha256;
        if (socket.authorized) headers['x-client-cert-subject'] = subjects.get(sha256)!;
      }
      const up = httpRequest(
        {
          host: '127.0.0.1',
          port: upstreamPort,
          localAddress: source,
          agent: false,
          method: req.method,
          path: req.url,
          headers,
        },
        (upRes) => {
          res.writeHead(upRes.statusCode ?? 502, upRes.headers);
          upRes.pipe(res);
        },
      );
      up.on('error', () => res.writeHead(502).end());
      req.pipe(up);
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  json: any;
}

/** A request through the front door over a fresh TLS connection, with `cert` as the client certificate (or none). */
function viaDoor(
  door: FrontDoor,
  method: string,
  path: string,
  opts: { cert?: Cert; token?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: '127.0.0.1',
        port: door.port,
        method,
        path,
        agent: false,
        ca: readFileSync(certs.ca.cert),
        servername: 'localhost',
        ...(opts.cert ? { cert: readFileSync(opts.cert.cert), key: readFileSync(opts.cert.key) } : {}),
        headers: {
          ...(body ? { 'content-type': 'application/json' } : {}),
          ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
          ...opts.headers,
        },
      },
      (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => {
          let json: any;
          try {
            json = text ? JSON.parse(text) : undefined;
          } catch {
            /* not JSON */
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, json });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const grant = (clientId: string, secret?: string) => ({
  grant_type: 'client_credentials',
  client_id: clientId,
  ...(secret === undefined ? {} : { client_secret: secret }),
});
/** Headers a client forges when it talks to the node directly. */
const forged = (c: Cert) => ({ 'x-client-cert-sha256': c.sha256, 'x-client-cert-subject': rfc2253(c) });

// Listening on :: (dual-stack): the proxy's address reaches the node as ::ffff:127.0.0.2 and must
// match SLUICE_TRUSTED_PROXIES=127.0.0.2.
const node = await startTestNode({
  SLUICE_HOST: '::',
  SLUICE_TRUSTED_PROXIES: '127.0.0.2',
  SLUICE_DEV_ALLOW_DEVELOPMENT_KEY: 'true',
});
t.teardown(() => node.close());
const door = await startFrontDoor(node.ingress!.port, '127.0.0.2');
t.teardown(() => door.close());
const admin = await node.client('admin', 'acme');
const adminToken = await node.token(admin);

t.test('the metadata announces bound tokens and the mTLS client authentication methods', async (t) => {
  const meta = await call(node.base, 'GET', '/.well-known/oauth-authorization-server');
  t.equal(meta.json.tls_client_certificate_bound_access_tokens, true);
  t.same(meta.json.token_endpoint_auth_methods_supported, [
    'client_secret_post',
    'client_secret_basic',
    'tls_client_auth',
    'self_signed_tls_client_auth',
  ]);
});

t.test('issue over a certificate, bind, use, replay with the other certificate and without one', async (t) => {
  const res = await viaDoor(door, 'POST', '/v1/auth/token', {
    cert: certs.client,
    body: grant(admin.client_id, admin.client_secret),
  });
  t.equal(res.status, 200, 'a secret client gets a token through the front door');
  const token = res.json.access_token as string;
  t.same(jose.decodeJwt(token).cnf, { 'x5t#S256': certs.client.x5tS256 }, 'bound: cnf.x5t#S256 of the DER');

  const same = await viaDoor(door, 'GET', '/v1/webhooks/endpoints', { cert: certs.client, token });
  t.equal(same.status, 200, 'the same certificate: an API route answers');
  const data = await viaDoor(door, 'GET', '/v1/inference/models', { cert: certs.client, token });
  t.equal(data.json?.code, 'UPSTREAM_UNAVAILABLE', 'and a data-plane route passes the edge');

  const other = await viaDoor(door, 'GET', '/v1/webhooks/endpoints', { cert: certs.client2, token });
  t.equal(other.status, 401, 'another certificate of the same CA: 401');
  t.equal(other.json.code, 'TOKEN_CERT_MISMATCH');
  t.match(other.headers['content-type'], /application\/problem\+json/);
  t.match(other.headers['www-authenticate'], /^Bearer error="invalid_token"/);

  const none = await viaDoor(door, 'GET', '/v1/inference/models', { token });
  t.equal(none.status, 401, 'no certificate: 401');
  t.equal(none.json.code, 'TOKEN_CERT_REQUIRED');
  t.match(none.headers['www-authenticate'], /^Bearer error="invalid_token"/);

  const direct = await call(node.base, 'GET', '/v1/webhooks/endpoints', { token, headers: forged(certs.client) });
  t.equal(direct.status, 401, 'straight to the node with the right thumbprint forged: not believed');
  t.equal(direct.json.code, 'TOKEN_CERT_REQUIRED');
  t.equal(direct.headers.get('www-authenticate')?.startsWith('Bearer error="invalid_token"'), true);

  // The proxy sends what it saw, whatever the client claimed.
  const claimed = await viaDoor(door, 'GET', '/v1/webhooks/endpoints', {
    cert: certs.client2,
    token,
    headers: { 'x-client-cert-sha256': certs.client.sha256 },
  });
  t.equal(claimed.json.code, 'TOKEN_CERT_MISMATCH', "a client's own header does not pass the front door");
});

t.test('tokens issued without a certificate are unbound and work as before', async (t) => {
  const direct = await call(node.base, 'POST', '/v1/auth/token', {
    body: grant(admin.client_id, admin.client_secret),
    headers: forged(certs.client),
  });
  t.equal(direct.status, 200);
  t.equal(jose.decodeJwt(direct.json.access_token).cnf, undefined, 'a forged header from 127.0.0.1 binds nothing');
  const noCert = await viaDoor(door, 'POST', '/v1/auth/token', { body: grant(admin.client_id, admin.client_secret) });
  t.equal(jose.decodeJwt(noCert.json.access_token).cnf, undefined, 'through the front door without a certificate');
  for (const token of [direct.json.access_token, noCert.json.access_token]) {
    t.equal((await call(node.base, 'GET', '/v1/webhooks/endpoints', { token })).status, 200);
    t.equal((await viaDoor(door, 'GET', '/v1/webhooks/endpoints', { token, cert: certs.client2 })).status, 200);
  }
});

t.test('the CLI provisions mTLS clients; its usage errors are clear', async (t) => {
  const env = cliEnv(node.config);
  const dn = await runCli(
    [
      'admin',
      'create-client',
      '--tenant',
      'acme',
      '--role',
      'inference-reader',
      '--auth-method',
      'tls_client_auth',
      '--tls-subject-dn',
      'cn=client-one, O=acme',
      '--json',
    ],
    env,
  );
  t.equal(dn.code, 0, dn.stderr);
  const c = JSON.parse(dn.stdout);
  t.equal(c.token_endpoint_auth_method, 'tls_client_auth');
  t.equal(c.tls_client_auth_subject_dn, 'CN=client-one,O=acme', 'normalized');
  t.equal(c.client_secret, undefined, 'no secret');
  const thumb = await runCli(
    ['admin', 'create-client', '--tenant', 'acme', '--role', 'inference-reader']
      .concat(['--auth-method', 'self_signed_tls_client_auth', '--tls-thumbprint', robot.sha256.toUpperCase()])
      .concat(['--json']),
    env,
  );
  t.equal(thumb.code, 0, thumb.stderr);
  t.equal(JSON.parse(thumb.stdout).tls_client_auth_sha256, robot.sha256);
  const bad = await runCli(
    ['admin', 'create-client', '--tenant', 'acme', '--role', 'inference-reader', '--auth-method', 'mtls'],
    env,
  );
  t.equal(bad.code, 2);
  t.match(bad.stderr, /--auth-method must be client_secret, tls_client_auth or self_signed_tls_client_auth/);
  const openssl = await runCli(
    ['admin', 'create-client', '--tenant', 'acme', '--role', 'inference-reader'].concat([
      '--auth-method',
      'tls_client_auth',
      '--tls-subject-dn',
      '/O=acme/CN=client-one',
    ]),
    env,
  );
  t.not(openssl.code, 0);
  t.match(openssl.stderr, /RFC 4514 form, most specific first/);
  const list = await runCli(['admin', 'list-clients', '--tenant', 'acme', '--json'], env);
  const rows = JSON.parse(list.stdout) as { client_id: string; auth_method: string }[];
  t.equal(rows.find((r) => r.client_id === c.client_id)?.auth_method, 'tls_client_auth');
  t.equal(rows.find((r) => r.client_id === admin.client_id)?.auth_method, 'client_secret');
});

/** A certificate client provisioned in-process (the CLI path is tested above). */
async function certificateClient(method: 'tls_client_auth' | 'self_signed_tls_client_auth', n: TestNode = node) {
  return createCertificateClient(n.ctx, {
    tenant: 'acme',
    role: 'security-officer',
    method,
    ...(method === 'tls_client_auth' ? { subjectDn: rfc2253(certs.client) } : { thumbprint: robot.sha256 }),
  });
}

t.test(
  'tls_client_auth: a token by certificate alone; refused without it, with another, or with a secret',
  async (t) => {
    const c = await certificateClient('tls_client_auth');
    const ok = await viaDoor(door, 'POST', '/v1/auth/token', { cert: certs.client, body: grant(c.client_id) });
    t.equal(ok.status, 200, 'client_id alone, over the registered certificate');
    t.same(jose.decodeJwt(ok.json.access_token).cnf, { 'x5t#S256': certs.client.x5tS256 }, 'and bound to it');
    const audit = await viaDoor(door, 'GET', '/v1/audit?limit=1', { cert: certs.client, token: ok.json.access_token });
    t.equal(audit.status, 200, 'the token works over its certificate');

    const refusals: [string, Promise<{ status: number; json: any }>, RegExp][] = [
      [
        'another certificate of the CA',
        viaDoor(door, 'POST', '/v1/auth/token', { cert: certs.client2, body: grant(c.client_id) }),
        /not the one registered/,
      ],
      [
        "a foreign CA's certificate (no verified subject)",
        viaDoor(door, 'POST', '/v1/auth/token', { cert: certs.foreign, body: grant(c.client_id) }),
        /no verified subject DN/,
      ],
      [
        'no certificate',
        viaDoor(door, 'POST', '/v1/auth/token', { body: grant(c.client_id) }),
        /none came with the request/,
      ],
      [
        'a secret, over the right certificate',
        viaDoor(door, 'POST', '/v1/auth/token', { cert: certs.client, body: grant(c.client_id, 'sk_guess') }),
        /never with a client_secret/,
      ],
      [
        'a secret in HTTP Basic',
        viaDoor(door, 'POST', '/v1/auth/token', {
          cert: certs.client,
          body: { grant_type: 'client_credentials' },
          headers: { authorization: `Basic ${Buffer.from(`${c.client_id}:sk_guess`).toString('base64')}` },
        }),
        /never with a client_secret/,
      ],
      [
        'the headers forged straight to the node',
        call(node.base, 'POST', '/v1/auth/token', { body: grant(c.client_id), headers: forged(certs.client) }),
        /none came with the request/,
      ],
    ];
    for (const [name, pending, why] of refusals) {
      const res = await pending;
      t.equal(res.status, 401, `${name}: 401`);
      t.equal(res.json.error, 'invalid_client', `${name}: invalid_client`);
      t.match(res.json.error_description, why, `${name}: says why`);
    }
  },
);

t.test('a secret client must still send its secret', async (t) => {
  const res = await viaDoor(door, 'POST', '/v1/auth/token', { cert: certs.client, body: grant(admin.client_id) });
  t.equal(res.status, 401);
  t.equal(res.json.error, 'invalid_client');
  t.match(res.json.error_description, /client_secret is required/);
  const unknown = await call(node.base, 'POST', '/v1/auth/token', { body: grant('cl_nobody') });
  t.equal(unknown.json.error_description, res.json.error_description, 'the same words for an unknown client id');
});

t.test('self_signed_tls_client_auth: the registered thumbprint, no CA', async (t) => {
  const c = await certificateClient('self_signed_tls_client_auth');
  const ok = await viaDoor(door, 'POST', '/v1/auth/token', { cert: robot, body: grant(c.client_id) });
  t.equal(ok.status, 200, 'a self-signed certificate, by its thumbprint');
  t.same(jose.decodeJwt(ok.json.access_token).cnf, { 'x5t#S256': robot.x5tS256 });
  const other = await viaDoor(door, 'POST', '/v1/auth/token', { cert: certs.client, body: grant(c.client_id) });
  t.equal(other.status, 401, 'a CA-signed certificate that is not the registered one');
  t.match(other.json.error_description, /not the one registered/);
  const secret = await viaDoor(door, 'POST', '/v1/auth/token', { cert: robot, body: grant(c.client_id, 'x') });
  t.equal(secret.status, 401, 'a secret is refused');
  t.match(secret.json.error_description, /never with a client_secret/);
});

t.test('revocation and the audit log treat an mTLS client like any other', async (t) => {
  const c = await certificateClient('self_signed_tls_client_auth');
  const token = (await viaDoor(door, 'POST', '/v1/auth/token', { cert: robot, body: grant(c.client_id) })).json
    .access_token as string;
  const revoked = await call(node.base, 'POST', '/v1/auth/revocations', {
    token: adminToken,
    body: { client_id: c.client_id, reason: 'key left on a laptop' },
  });
  t.equal(revoked.status, 201);
  const use = await viaDoor(door, 'GET', '/v1/audit?limit=1', { cert: robot, token });
  t.equal(use.json.code, 'TOKEN_REVOKED', 'its bound token, over its certificate: revoked');
  const again = await viaDoor(door, 'POST', '/v1/auth/token', { cert: robot, body: grant(c.client_id) });
  t.equal(again.status, 401, 'its certificate gets no new token');
  t.equal(again.json.error, 'invalid_client');

  const entries = (await call(node.base, 'GET', '/v1/audit?limit=1000', { token: adminToken })).json.data as {
    action: string;
    subject: string;
    reason: string;
  }[];
  const mine = entries.filter((e) => e.subject === c.client_id);
  t.same(
    mine.map((e) => e.action),
    ['client.created', 'credential.revoked'],
    'created and revoked, in the tenant chain',
  );
  t.match(mine[0].reason, `self_signed_tls_client_auth sha256 ${robot.sha256}`);

  // Straight to the revocation code (no waiting out the token lifetime: force).
  const r = await reenableClient(node.ctx, {
    clientId: c.client_id,
    reason: 'new laptop',
    actor: 'operator:t',
    force: true,
  });
  t.equal(r.client_secret, null, 'no secret is made for a certificate client');
  t.same(node.ctx.clients.get(c.client_id)?.secrets, [], 'nor stored');
  const back = await viaDoor(door, 'POST', '/v1/auth/token', { cert: robot, body: grant(c.client_id) });
  t.equal(back.status, 200, 'its certificate works again');
});

t.test('with no trusted proxy, the front door binds nothing and authenticates nobody', async (t) => {
  const lone = await startTestNode({}, { prefix: node.config.topicPrefix });
  t.teardown(() => lone.close());
  t.same(lone.config.trustedProxies, []);
  const loneDoor = await startFrontDoor(lone.ingress!.port, '127.0.0.2');
  t.teardown(() => loneDoor.close());
  const res = await viaDoor(loneDoor, 'POST', '/v1/auth/token', {
    cert: certs.client,
    body: grant(admin.client_id, admin.client_secret),
  });
  t.equal(res.status, 200);
  t.equal(jose.decodeJwt(res.json.access_token).cnf, undefined, 'the header is ignored: an unbound token');
  const c = await certificateClient('tls_client_auth', lone);
  const refused = await viaDoor(loneDoor, 'POST', '/v1/auth/token', { cert: certs.client, body: grant(c.client_id) });
  t.equal(refused.status, 401);
  t.match(refused.json.error_description, /none came with the request/);
  const meta = await call(lone.base, 'GET', '/.well-known/oauth-authorization-server');
  t.equal(meta.json.tls_client_certificate_bound_access_tokens, false, 'and its metadata says so');
  t.same(meta.json.token_endpoint_auth_methods_supported, ['client_secret_post', 'client_secret_basic']);
});
