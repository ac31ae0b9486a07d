/**
 * Token verification at the edge: a hot token (cached after its first verification) against a
 * cold one (signature checked every time, cache off) and, as an outside baseline, jose's
 * jwtVerify of the same token. In-process, no Kafka: the key ring is fed a key record directly.
 *
 *   node bin/run-ts.js bench/token-cache.ts [--seconds 2]
 */
import { cpus } from 'node:os';
import * as jose from 'jose';
import { KeyRing, newSigningKey } from '../core/tokens/key-ring.ts';
import { RevocationList } from '../core/clients/revocation-list.ts';
import { TokenService } from '../core/tokens/token-service.ts';
import { systemClock } from '../core/clock.ts';
import type { ClientRecord } from '../core/clients/client-registry.ts';

const seconds = Number(process.argv[process.argv.indexOf('--seconds') + 1]) || 2;
const master = Buffer.alloc(32, 7);
const keys = new KeyRing('keys', master);
const rec = newSigningKey(master, Date.now(), Date.now(), { rotationMs: 30 * 86400_000, tokenLifetimeMs: 905_000 });
keys.apply({
  topic: 'keys',
  partition: 0,
  offset: '0',
  key: rec.kid,
  value: Buffer.from(JSON.stringify(rec)),
  headers: {},
  timestamp: Date.now(),
});
const revocations = new RevocationList('revocations');
const opts = { issuer: 'https://sluice.example', audience: 'sluice', ttlSeconds: 900, clockSkewSeconds: 5 };
const hot = new TokenService(keys, revocations, systemClock, { ...opts, cacheSize: 100_000 });
const cold = new TokenService(keys, revocations, systemClock, { ...opts, cacheSize: 0 });
const client: ClientRecord = {
  client_id: 'cl_bench',
  tenant_id: 'acme',
  role: 'admin',
  scopes: ['inference:read'],
  region: 'local',
  secrets: [],
  status: 'active',
  created_at: 0,
  updated_at: 0,
  rotate_at: null,
};
const token = hot.issue(client, undefined).access_token;
const jwks = jose.createLocalJWKSet(keys.jwks(Date.now()) as jose.JSONWebKeySet);

async function rate(name: string, fn: () => unknown | Promise<unknown>): Promise<number> {
  for (let i = 0; i < 200; i++) await fn(); // warm-up
  let n = 0;
  const end = performance.now() + seconds * 1000;
  while (performance.now() < end) {
    for (let i = 0; i < 100; i++) await fn();
    n += 100;
  }
  const perSec = n / seconds;
  console.log(`${name.padEnd(44)} ${Math.round(perSec).toLocaleString('en-US').padStart(12)} ops/s`);
  return perSec;
}

console.log(
  `# token verification, ${seconds}s per case, Node ${process.version}, ${cpus().length} x ${cpus()[0]?.model}`,
);
const hotRate = await rate('hot token (cache hit + revocation check)', () => hot.verify(token));
const coldRate = await rate('cold token (ES256 signature, cache off)', () => cold.verify(token));
const joseRate = await rate('baseline: jose.jwtVerify (ES256, local JWKS)', () =>
  jose.jwtVerify(token, jwks, { issuer: opts.issuer, audience: opts.audience, algorithms: ['ES256'] }),
);
await rate('issue (sign ES256 with node:crypto)', () => hot.issue(client, undefined));
console.log(`# hot/cold: ${(hotRate / coldRate).toFixed(1)}x; hot/jose: ${(hotRate / joseRate).toFixed(1)}x`);
