import t from 'tap';
import * as jose from 'jose';
import * as oidc from 'openid-client';
import { startTestNode, call } from '../helpers/sluice.ts';

const node = await startTestNode();
t.teardown(() => node.close());
const admin = await node.client('admin', 'acme');
const reader = await node.client('inference-reader', 'acme');

t.test('client_credentials with a JSON body: RFC 6749 success body, no-store, RFC 9068 token', async (t) => {
  const res = await call(node.base, 'POST', '/v1/auth/token', {
    body: { grant_type: 'client_credentials', client_id: reader.client_id, client_secret: reader.client_secret },
  });
  t.equal(res.status, 200);
  t.equal(res.headers.get('cache-control'), 'no-store');
  t.match(res.headers.get('content-type'), /application\/json/);
  t.same(Object.keys(res.json).sort(), ['access_token', 'expires_in', 'scope', 'token_type']);
  t.equal(res.json.token_type, 'Bearer');
  t.equal(res.json.expires_in, 900);
  t.equal(res.json.scope, 'inference:read');
  const header = jose.decodeProtectedHeader(res.json.access_token);
  t.equal(header.typ, 'at+jwt');
  t.equal(header.alg, 'ES256');
  t.type(header.kid, 'string');
  const claims = jose.decodeJwt(res.json.access_token);
  t.equal(claims.exp! - claims.iat!, 900, 'valid for 15 minutes');
  t.equal(claims.iss, node.base);
  t.equal(claims.aud, 'sluice');
  t.equal(claims.sub, reader.client_id);
  t.equal(claims.client_id, reader.client_id);
  t.equal(claims.tenant_id, 'acme');
  t.equal(claims.region, 'local');
  t.equal(claims.scope, 'inference:read');
  t.type(claims.jti, 'string');
});

t.test('form-encoded body and HTTP Basic client authentication', async (t) => {
  const form = await call(node.base, 'POST', '/v1/auth/token', {
    raw: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: reader.client_id,
      client_secret: reader.client_secret,
    }).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  t.equal(form.status, 200);
  const basic = await call(node.base, 'POST', '/v1/auth/token', {
    raw: 'grant_type=client_credentials',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${reader.client_id}:${reader.client_secret}`).toString('base64')}`,
    },
  });
  t.equal(basic.status, 200);
});

t.test('a scope subset narrows the token; an ungranted scope is invalid_scope', async (t) => {
  const ok = await call(node.base, 'POST', '/v1/auth/token', {
    body: {
      grant_type: 'client_credentials',
      client_id: admin.client_id,
      client_secret: admin.client_secret,
      scope: 'webhooks:read inference:read',
    },
  });
  t.equal(ok.status, 200);
  t.equal(ok.json.scope, 'webhooks:read inference:read');
  const bad = await call(node.base, 'POST', '/v1/auth/token', {
    body: {
      grant_type: 'client_credentials',
      client_id: reader.client_id,
      client_secret: reader.client_secret,
      scope: 'inference:read pipeline:write',
    },
  });
  t.equal(bad.status, 400);
  t.equal(bad.json.error, 'invalid_scope');
  t.match(bad.json.error_description, /pipeline:write/);
});

t.test('every RFC 6749 error', async (t) => {
  const cases: [string, Record<string, unknown>, number, string][] = [
    [
      'missing grant_type',
      { client_id: reader.client_id, client_secret: reader.client_secret },
      400,
      'invalid_request',
    ],
    [
      'grant_type not a string',
      { grant_type: 1, client_id: reader.client_id, client_secret: reader.client_secret },
      400,
      'invalid_request',
    ],
    [
      'other grant type',
      { grant_type: 'password', client_id: reader.client_id, client_secret: reader.client_secret },
      400,
      'unsupported_grant_type',
    ],
    [
      'wrong secret',
      { grant_type: 'client_credentials', client_id: reader.client_id, client_secret: 'sk_nope' },
      401,
      'invalid_client',
    ],
    [
      'unknown client',
      { grant_type: 'client_credentials', client_id: 'cl_unknown', client_secret: reader.client_secret },
      401,
      'invalid_client',
    ],
    ['no credentials', { grant_type: 'client_credentials' }, 401, 'invalid_client'],
    [
      'empty scope',
      {
        grant_type: 'client_credentials',
        client_id: reader.client_id,
        client_secret: reader.client_secret,
        scope: ' ',
      },
      400,
      'invalid_scope',
    ],
  ];
  for (const [name, body, status, error] of cases) {
    const res = await call(node.base, 'POST', '/v1/auth/token', { body });
    t.equal(res.status, status, `${name}: status`);
    t.equal(res.json?.error, error, `${name}: error`);
    t.type(res.json?.error_description, 'string', `${name}: description`);
    t.equal(res.headers.get('cache-control'), 'no-store', `${name}: no-store`);
  }
  const wrong = await call(node.base, 'POST', '/v1/auth/token', {
    body: { grant_type: 'client_credentials', client_id: reader.client_id, client_secret: 'x' },
  });
  const unknown = await call(node.base, 'POST', '/v1/auth/token', {
    body: { grant_type: 'client_credentials', client_id: 'cl_x', client_secret: 'x' },
  });
  t.equal(wrong.text, unknown.text, 'never says whether the id or the secret was wrong');
  t.equal(wrong.headers.get('www-authenticate'), 'Basic realm="sluice"');
  const malformed = await call(node.base, 'POST', '/v1/auth/token', {
    raw: '{"grant_type": ',
    headers: { 'content-type': 'application/json' },
  });
  t.equal(malformed.status, 400);
  t.equal(malformed.json.error, 'invalid_request');
  const wrongType = await call(node.base, 'POST', '/v1/auth/token', {
    raw: 'grant_type=client_credentials',
    headers: { 'content-type': 'text/plain' },
  });
  t.equal(wrongType.status, 415);
});

t.test('an independent verifier (jose + the JWKS) accepts the token', async (t) => {
  const token = await node.token(reader);
  const jwks = jose.createRemoteJWKSet(new URL(`${node.base}/v1/auth/jwks`));
  const { payload, protectedHeader } = await jose.jwtVerify(token, jwks, {
    issuer: node.base,
    audience: 'sluice',
    algorithms: ['ES256'],
    typ: 'at+jwt',
  });
  t.equal(protectedHeader.alg, 'ES256');
  t.equal(payload.tenant_id, 'acme');
  const meta = await call(node.base, 'GET', '/.well-known/oauth-authorization-server');
  t.equal(meta.status, 200);
  t.equal(meta.json.issuer, node.base);
  t.equal(meta.json.token_endpoint, `${node.base}/v1/auth/token`);
  t.equal(meta.json.jwks_uri, `${node.base}/v1/auth/jwks`);
  t.same(meta.json.grant_types_supported, ['client_credentials']);
});

t.test('openid-client performs discovery and the client-credentials grant', async (t) => {
  const config = await oidc.discovery(new URL(node.base), reader.client_id, reader.client_secret, undefined, {
    execute: [oidc.allowInsecureRequests],
    algorithm: 'oauth2',
  });
  t.equal(config.serverMetadata().token_endpoint, `${node.base}/v1/auth/token`);
  const tokens = await oidc.clientCredentialsGrant(config, { scope: 'inference:read' });
  t.equal(tokens.token_type.toLowerCase(), 'bearer');
  t.equal(tokens.expires_in, 900);
  const ok = await call(node.base, 'GET', '/v1/inference/models', { token: tokens.access_token });
  // Past the token and scope checks, the edge proxies; no upstream is configured here, so 502.
  t.same(
    { status: ok.status, code: ok.json?.code },
    { status: 502, code: 'UPSTREAM_UNAVAILABLE' },
    'the token works at the edge (authenticated, in scope, proxied to the unconfigured upstream)',
  );
});
