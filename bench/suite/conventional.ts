/**
 * What a team would write instead of Sluice's edge: node:http, `jose.jwtVerify` of the bearer
 * token against the issuer's JWKS (fetched once at start), a scope check, then the same answer as
 * Sluice's empty endpoint list. With `--cache`, verified tokens are kept in a Map until they
 * expire (the usual "token cache" fix), so a hot token skips the signature check.
 *
 *   --port P --workers N --issuer URL (Sluice: its JWKS is at <URL>/v1/auth/jwks) [--cache]
 */
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import * as jose from 'jose';
import { onWorkers } from './workers.ts';
import { LIST_BODY, SCOPE } from './route.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string' },
    workers: { type: 'string', default: '1' },
    issuer: { type: 'string' },
    sluice: { type: 'string' },
    cache: { type: 'boolean', default: false },
  },
});

async function serve(): Promise<void> {
  const jwks = jose.createLocalJWKSet(
    (await (await fetch(`${values.sluice}/v1/auth/jwks`)).json()) as jose.JSONWebKeySet,
  );
  const cache = new Map<string, jose.JWTPayload>();
  const verify = async (token: string): Promise<jose.JWTPayload> => {
    const hit = cache.get(token);
    if (hit && (hit.exp ?? 0) * 1000 > Date.now()) return hit;
    const { payload } = await jose.jwtVerify(token, jwks, {
      issuer: values.issuer,
      audience: 'sluice',
      algorithms: ['ES256'],
    });
    if (values.cache) cache.set(token, payload);
    return payload;
  };
  const send = (res: import('node:http').ServerResponse, status: number, body: string) => {
    res.writeHead(status, { 'content-type': status === 200 ? 'application/json' : 'application/problem+json' });
    res.end(body);
  };
  const server = createServer(async (req, res) => {
    const m = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
    if (!m) return send(res, 401, '{"title":"missing bearer token"}');
    let claims: jose.JWTPayload;
    try {
      claims = await verify(m[1]);
    } catch {
      return send(res, 401, '{"title":"invalid token"}');
    }
    if (
      !String(claims.scope ?? '')
        .split(' ')
        .includes(SCOPE)
    )
      return send(res, 403, '{"title":"insufficient scope"}');
    send(res, 200, LIST_BODY);
  });
  server.keepAliveTimeout = 10_000;
  await new Promise<void>((resolve) => server.listen(Number(values.port), '127.0.0.1', resolve));
}

await onWorkers(Number(values.workers), fileURLToPath(import.meta.url), serve);
