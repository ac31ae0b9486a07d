/**
 * The suite's baselines answering bench/suite/route.ts on --workers node:cluster processes sharing one port;
 * prints "ready" once all listen. bare: uWebSockets.js (the library of Sluice's ingress), no auth: the
 * ceiling. conventional: node:http, `jose.jwtVerify` of the bearer token against Sluice's JWKS (fetched
 * once) and a scope check; with --cache, verified tokens are kept until they expire.
 *
 *   baseline.ts bare|conventional --port P --workers N [--issuer URL --sluice URL [--cache]]
 */
import cluster from 'node:cluster';
import { createServer, type ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import uWS from '@trufflesuite/uws-js-unofficial';
import * as jose from 'jose';
import { projectPath } from '../../core/paths.ts';
import { LIST_BODY, SCOPE } from './route.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    port: { type: 'string' },
    workers: { type: 'string', default: '1' },
    issuer: { type: 'string' },
    sluice: { type: 'string' },
    cache: { type: 'boolean', default: false },
  },
});
const port = Number(values.port);

function bare(): Promise<void> {
  const app = uWS.App().get('/*', (res) => {
    res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(LIST_BODY);
  });
  return new Promise((resolve, reject) =>
    app.listen('127.0.0.1', port, (s) => (s ? resolve() : reject(new Error(`cannot listen on ${port}`)))),
  );
}

async function conventional(): Promise<void> {
  const keys = (await (await fetch(`${values.sluice}/v1/auth/jwks`)).json()) as jose.JSONWebKeySet;
  const jwks = jose.createLocalJWKSet(keys);
  const cache = new Map<string, jose.JWTPayload>();
  const verify = async (token: string): Promise<jose.JWTPayload> => {
    const hit = cache.get(token);
    if (hit && (hit.exp ?? 0) * 1000 > Date.now()) return hit;
    const options = { issuer: values.issuer, audience: 'sluice', algorithms: ['ES256'] };
    const { payload } = await jose.jwtVerify(token, jwks, options);
    if (values.cache) cache.set(token, payload);
    return payload;
  };
  const problem = (res: ServerResponse, status: number, title: string) =>
    res.writeHead(status, { 'content-type': 'application/problem+json' }).end(JSON.stringify({ title }));
  const server = createServer(async (req, res) => {
    const m = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
    if (!m) return problem(res, 401, 'missing bearer token');
    const claims = await verify(m[1]).catch(() => null);
    if (!claims) return problem(res, 401, 'invalid token');
    const scopes = String(claims.scope ?? '').split(' ');
    if (!scopes.includes(SCOPE)) return problem(res, 403, 'insufficient scope');
    res.writeHead(200, { 'content-type': 'application/json' }).end(LIST_BODY);
  });
  server.keepAliveTimeout = 10_000;
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
}

const serve = { bare, conventional }[positionals[0] as 'bare' | 'conventional'];
if (!serve) throw new Error('baseline.ts bare|conventional');

if (cluster.isWorker) {
  await serve();
  process.send?.('listening');
} else {
  // bin/run-ts.js drops the script from argv: the workers are told again which file to run.
  const n = Number(values.workers);
  cluster.setupPrimary({
    exec: projectPath('bin/run-ts.js'),
    args: [fileURLToPath(import.meta.url), ...process.argv.slice(2)],
  });
  let listening = 0;
  for (let i = 0; i < n; i++)
    cluster.fork().on('message', (m) => {
      if (m === 'listening' && ++listening === n) process.stdout.write('ready\n');
    });
  cluster.on('exit', (w, code) => {
    process.stderr.write(`worker ${w.process.pid} exited (${code})\n`);
    process.exit(1);
  });
  const stop = () => {
    cluster.removeAllListeners('exit');
    for (const w of Object.values(cluster.workers ?? {})) w?.kill();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
