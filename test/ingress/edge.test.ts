import t from 'tap';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { createPublicKey } from 'node:crypto';
import * as jose from 'jose';
import { startTestNode, call, freePort } from '../helpers/sluice.ts';
import { signJws } from '../../core/tokens/jws.ts';

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}
const seen: Seen[] = [];
const upstreamPort = await freePort();
const upstream = createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
    res.writeHead(207, { 'content-type': 'application/json', 'x-upstream': 'yes' });
    res.end(JSON.stringify({ upstream: true }));
  });
});
await new Promise<void>((r) => upstream.listen(upstreamPort, '127.0.0.1', r));
const up = `http://127.0.0.1:${upstreamPort}`;

const node = await startTestNode({
  SLUICE_UPSTREAM_INFERENCE: up,
  SLUICE_UPSTREAM_PIPELINES: up,
  SLUICE_UPSTREAM_TELEMETRY: up,
});
t.teardown(async () => {
  await node.close();
  upstream.close();
});
const admin = await node.client('admin', 'acme');
const adminToken = await node.token(admin);

function signingKey() {
  const k = node.ctx.keys.signingKey(Date.now());
  if (!k) throw new Error('no signing key');
  return k;
}

function mint(overrides: Record<string, unknown>, kid?: string): string {
  const k = signingKey();
  const now = Math.floor(Date.now() / 1000);
  return signJws(
    {
      iss: node.base,
      sub: admin.client_id,
      client_id: admin.client_id,
      aud: 'sluice',
      iat: now,
      nbf: now,
      exp: now + 900,
      jti: 'j',
      scope: 'inference:read',
      tenant_id: 'acme',
      region: 'local',
      ...overrides,
    },
    kid ?? k.kid,
    k.key,
  );
}

t.test('401 with the right code and WWW-Authenticate for every bad token', async (t) => {
  const now = Math.floor(Date.now() / 1000);
  const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const claims = {
    iss: node.base,
    sub: admin.client_id,
    client_id: admin.client_id,
    aud: 'sluice',
    iat: now,
    exp: now + 900,
    scope: 'inference:read',
    tenant_id: 'acme',
    region: 'local',
    jti: 'x',
  };
  const k = signingKey();
  const jwk = node.ctx.keys.jwks(Date.now()).keys.find((j) => j.kid === k.kid)!;
  const publicPem = createPublicKey({ key: jwk as jose.JWK as any, format: 'jwk' }).export({
    type: 'spki',
    format: 'pem',
  }) as string;
  const hs256 = await new jose.SignJWT(claims)
    .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid: k.kid })
    .sign(new TextEncoder().encode(publicPem));
  const cases: [string, string | undefined, string][] = [
    ['no Authorization header', undefined, 'TOKEN_MISSING'],
    ['garbage', 'Bearer not-a-token', 'TOKEN_INVALID'],
    ['alg none', `Bearer ${b64({ alg: 'none', typ: 'at+jwt', kid: k.kid })}.${b64(claims)}.`, 'TOKEN_INVALID'],
    ['HS256 signed with the public key', `Bearer ${hs256}`, 'TOKEN_INVALID'],
    ['another issuer', `Bearer ${mint({ iss: 'https://evil.example' })}`, 'TOKEN_INVALID'],
    ['another audience', `Bearer ${mint({ aud: 'other' })}`, 'TOKEN_INVALID'],
    ['expired', `Bearer ${mint({ iat: now - 2000, nbf: now - 2000, exp: now - 1000 })}`, 'TOKEN_EXPIRED'],
    ['unknown kid', `Bearer ${mint({}, 'key_unknown')}`, 'TOKEN_INVALID'],
    ['not yet valid', `Bearer ${mint({ nbf: now + 600 })}`, 'TOKEN_INVALID'],
    [
      'tampered payload',
      `Bearer ${mint({}).replace(/\.([^.]+)\./, `.${b64({ ...claims, scope: 'inference:write' })}.`)}`,
      'TOKEN_INVALID',
    ],
    ['Basic instead of Bearer', 'Basic abc', 'TOKEN_INVALID'],
  ];
  for (const [name, authorization, code] of cases) {
    const res = await call(node.base, 'GET', '/v1/inference/models', {
      headers: authorization ? { authorization } : {},
    });
    t.equal(res.status, 401, `${name}: 401`);
    t.equal(res.json?.code, code, `${name}: ${code}`);
    t.match(res.headers.get('content-type'), /application\/problem\+json/, `${name}: problem+json`);
    t.match(res.headers.get('www-authenticate'), /^Bearer/, `${name}: WWW-Authenticate`);
  }
  t.equal(seen.length, 0, 'nothing reached the upstream');
});

t.test('403 SCOPE_VIOLATION names the missing scope for every data-plane family', async (t) => {
  const c = await node.client('inference-reader', 'acme');
  const token = await node.token(c);
  const cases: [string, string, string][] = [
    ['POST', '/v1/inference/jobs', 'inference:write'],
    ['GET', '/v1/pipelines/runs', 'pipeline:read'],
    ['DELETE', '/v1/pipelines/runs/1', 'pipeline:write'],
    ['GET', '/v1/telemetry/metrics', 'telemetry:read'],
    ['POST', '/v1/telemetry/ingest', 'telemetry:write'],
    ['POST', '/v1/telemetry/export', 'telemetry:export'],
  ];
  for (const [method, path, scope] of cases) {
    const res = await call(node.base, method, path, {
      token,
      raw: method === 'GET' ? undefined : '{}',
      headers: { 'content-type': 'application/json' },
    });
    t.equal(res.status, 403, `${method} ${path}`);
    t.equal(res.json.code, 'SCOPE_VIOLATION');
    t.equal(res.json.missing_scope, scope);
    t.same(res.json.granted_scopes, ['inference:read']);
    t.equal(res.json.status, 403);
    t.type(res.json.title, 'string');
    t.type(res.json.detail, 'string');
    t.equal(res.headers.get('www-authenticate'), `Bearer error="insufficient_scope", scope="${scope}"`);
  }
  t.equal(seen.length, 0, 'nothing reached the upstream');
});

t.test(
  '403 SCOPE_VIOLATION names the missing scope for every control-plane route, before the body is read',
  async (t) => {
    const c = await node.client('inference-reader', 'acme');
    const token = await node.token(c);
    const cases: [string, string, string][] = [
      ['POST', '/v1/webhooks/endpoints', 'webhooks:write'],
      ['GET', '/v1/webhooks/endpoints', 'webhooks:read'],
      ['GET', '/v1/webhooks/endpoints/ep_x', 'webhooks:read'],
      ['DELETE', '/v1/webhooks/endpoints/ep_x', 'webhooks:write'],
      ['POST', '/v1/webhooks/endpoints/ep_x/verify', 'webhooks:write'],
      ['POST', '/v1/webhooks/events', 'events:publish'],
      ['GET', '/v1/webhooks/dlq', 'webhooks:read'],
      ['POST', '/v1/webhooks/dlq/dlq_x/replay', 'webhooks:write'],
      ['POST', '/v1/webhooks/dlq/replay', 'webhooks:write'],
      ['POST', '/v1/auth/revocations', 'credentials:revoke'],
      ['GET', '/v1/auth/clients/cl_x/secret', 'credentials:read'],
      ['GET', '/v1/audit', 'audit:read'],
    ];
    for (const [method, path, scope] of cases) {
      // A malformed body: the scope check must answer first.
      const res = await call(node.base, method, path, {
        token,
        raw: method === 'GET' ? undefined : '{not json',
        headers: { 'content-type': 'application/json' },
      });
      t.equal(res.status, 403, `${method} ${path}`);
      t.equal(res.json.code, 'SCOPE_VIOLATION', `${method} ${path}: code`);
      t.equal(res.json.missing_scope, scope, `${method} ${path}: missing_scope`);
      t.same(res.json.granted_scopes, ['inference:read']);
      t.equal(res.headers.get('www-authenticate'), `Bearer error="insufficient_scope", scope="${scope}"`);
    }
  },
);

t.test('400 names the JSON path of a malformed or mistyped body', async (t) => {
  const malformed = await call(node.base, 'POST', '/v1/webhooks/endpoints', {
    token: adminToken,
    raw: '{"url": "https://example.com/h", "events": ["ping", ]}',
    headers: { 'content-type': 'application/json' },
  });
  t.equal(malformed.status, 400);
  t.equal(malformed.json.code, 'INVALID_REQUEST');
  t.equal(malformed.json.errors[0].path, '$.events[1]');
  const wrongType = await call(node.base, 'POST', '/v1/webhooks/endpoints', {
    token: adminToken,
    body: { url: 'https://example.com/h', events: 'inference.completed' },
  });
  t.equal(wrongType.status, 400);
  t.ok(
    wrongType.json.errors.some((e: { path: string }) => e.path === '$.events'),
    'names $.events',
  );
  const wrongMedia = await call(node.base, 'POST', '/v1/webhooks/endpoints', {
    token: adminToken,
    raw: 'url=x',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  t.equal(wrongMedia.status, 415);
  t.equal(wrongMedia.json.code, 'UNSUPPORTED_MEDIA_TYPE');
});

t.test(
  'the data-plane proxy reaches the upstream with tenant and region, never the Authorization header',
  async (t) => {
    seen.length = 0;
    const res = await call(node.base, 'POST', '/v1/pipelines/runs?dry=1', {
      token: adminToken,
      body: { name: 'nightly' },
      headers: { 'x-request-id': 'r1' },
    });
    t.equal(res.status, 207, 'upstream status passed back');
    t.same(res.json, { upstream: true });
    t.equal(res.headers.get('x-upstream'), 'yes');
    t.equal(seen.length, 1);
    const s = seen[0];
    t.equal(s.method, 'POST');
    t.equal(s.url, '/v1/pipelines/runs?dry=1');
    t.equal(s.body, JSON.stringify({ name: 'nightly' }));
    t.equal(s.headers['x-sluice-tenant'], 'acme');
    t.equal(s.headers['x-sluice-region'], 'local');
    t.equal(s.headers['x-sluice-client-id'], admin.client_id);
    t.equal(s.headers['x-request-id'], 'r1');
    t.notOk(s.headers.authorization, 'Authorization stays at the edge');
    const exp = await call(node.base, 'POST', '/v1/telemetry/export', { token: adminToken, body: {} });
    t.equal(exp.status, 207, 'telemetry:export reaches the upstream');
  },
);

t.test('tenant isolation: each token reaches the upstream as its own tenant, spoofed headers dropped', async (t) => {
  seen.length = 0;
  const other = await node.client('inference-reader', 'globex');
  await call(node.base, 'GET', '/v1/inference/models', {
    token: await node.token(other),
    headers: { 'x-sluice-tenant': 'acme' },
  });
  await call(node.base, 'GET', '/v1/inference/models', { token: adminToken });
  t.same(
    seen.map((s) => s.headers['x-sluice-tenant']),
    ['globex', 'acme'],
  );
});

t.test('421 for a token of another region, naming the right one', async (t) => {
  const eu = await node.client('inference-reader', 'acme', 'eu-west');
  const res = await call(node.base, 'GET', '/v1/inference/models', { token: await node.token(eu) });
  t.equal(res.status, 421);
  t.equal(res.json.code, 'MISDIRECTED_REQUEST');
  t.equal(res.json.token_region, 'eu-west');
  t.equal(res.json.node_region, 'local');
  t.match(res.json.detail, /eu-west/);
});

t.test('413, 415, 404, 405', async (t) => {
  const big = Buffer.alloc(1024 * 1024 + 1, 'a');
  const tooBig = await call(node.base, 'POST', '/v1/inference/jobs', {
    token: adminToken,
    raw: big,
    headers: { 'content-type': 'application/octet-stream' },
  });
  t.equal(tooBig.status, 413);
  t.equal(tooBig.json.code, 'PAYLOAD_TOO_LARGE');
  const tokenBig = await call(node.base, 'POST', '/v1/auth/token', {
    raw: big,
    headers: { 'content-type': 'application/json' },
  });
  t.equal(tokenBig.status, 413, 'the token endpoint caps its body too');
  const form = await call(node.base, 'POST', '/v1/auth/token', {
    raw: '<xml/>',
    headers: { 'content-type': 'application/xml' },
  });
  t.equal(form.status, 415);
  const unknown = await call(node.base, 'GET', '/v1/unknown', { token: adminToken });
  t.equal(unknown.status, 404);
  t.equal(unknown.json.code, 'NOT_FOUND');
  const method = await call(node.base, 'PUT', '/v1/auth/jwks');
  t.equal(method.status, 405);
  t.equal(method.headers.get('allow'), 'GET, HEAD');
  t.same(method.json.allow, ['GET', 'HEAD']);
});

t.test(
  'a hot token costs no signature check: its first use is verified, the next ones come from the cache',
  async (t) => {
    const c = await node.client('inference-reader', 'acme');
    const token = await node.token(c);
    const tokens = node.ctx.tokens;
    const [size, checks] = [tokens.cacheSize, tokens.coldVerifications];
    t.equal((await call(node.base, 'GET', '/v1/inference/models', { token })).status, 207, 'proxied');
    t.equal(tokens.coldVerifications, checks + 1, 'the first use checks the signature');
    t.equal(tokens.cacheSize, size + 1, 'and caches the token');
    for (let i = 0; i < 3; i++)
      t.equal((await call(node.base, 'GET', '/v1/inference/models', { token })).status, 207, 'proxied');
    t.equal(tokens.coldVerifications, checks + 1, 'three more uses, no more signature checks');
    t.equal(tokens.cacheSize, size + 1, 'reused, not re-added');
  },
);
