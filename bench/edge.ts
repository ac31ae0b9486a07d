/**
 * k6 against the edge, side by side with a baseline in one k6 run: a bare uWebSockets.js server
 * answering the same path with no auth (the ceiling), then Sluice with a hot token through the
 * whole pipeline (token cache, region, scope, handler), a 403 scope violation, and token issuance.
 *
 *   npm run bench:edge            (KAFKA_BROKERS optional: starts a local Kafka when unset)
 *   DURATION=10 VUS=32 npm run bench:edge
 */
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, mkdtempSync } from 'node:fs';
import { tmpdir, cpus } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import uWS from '@trufflesuite/uws-js-unofficial';
import { loadConfig } from '../core/config.ts';
import { startLocalKafka } from '../core/kafka/local-broker.ts';
import { startNode } from '../cli/assemble.ts';
import { createClient } from '../core/clients/provisioning.ts';
import { freePort } from '../scripts/free-port.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const k6 = execFileSync('bash', [join(root, 'scripts/install-k6.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
const free = freePort;

const port = await free();
const baselinePort = await free();
const env = { ...process.env, SLUICE_PORT: String(port), SLUICE_ADMIN_PORT: String(await free()), SLUICE_HOST: '127.0.0.1', SLUICE_ISSUER: `http://127.0.0.1:${port}`, SLUICE_TOPIC_PREFIX: `bench-${Date.now()}`, SLUICE_LOG_LEVEL: 'error' };
const config = loadConfig(env);
const kafka = config.kafkaBrokers ? null : await startLocalKafka({ cacheDir: config.cacheDir, port: await free(), fresh: true, dataDir: join(mkdtempSync(join(tmpdir(), 'sluice-bench-')), 'kafka') });
const brokers = config.kafkaBrokers ?? kafka!.brokers;
const node = await startNode(config, { brokers, ingress: true });
const admin = await createClient(node.ctx, { tenant: 'bench', role: 'admin' });
const narrow = await createClient(node.ctx, { tenant: 'bench', role: 'inference-reader' });
const token = node.ctx.tokens.issue(node.ctx.clients.get(admin.client_id)!, undefined).access_token;
const narrowToken = node.ctx.tokens.issue(node.ctx.clients.get(narrow.client_id)!, undefined).access_token;

// The ceiling: the same HTTP server library answering the same path with a fixed body.
const listEmpty = JSON.stringify({ data: [], next_cursor: null });
const bare = uWS.App().get('/*', (res) => {
  res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(listEmpty);
});
let bareSocket: uWS.us_listen_socket | false = false;
await new Promise<void>((r) => bare.listen('127.0.0.1', baselinePort, (s) => { bareSocket = s; r(); }));

const summaryFile = join(mkdtempSync(join(tmpdir(), 'k6-')), 'summary.json');
const duration = process.env.DURATION ?? '10';
const vus = process.env.VUS ?? '32';
console.log(`# k6 ${execFileSync(k6, ['version'], { encoding: 'utf8' }).trim()}; ${vus} VUs, ${duration}s per case; ${cpus().length} x ${cpus()[0]?.model}; Node ${process.version}`);
// k6 runs as a child while this process serves: spawnSync would block the event loop, so run it async.
const code = await new Promise<number>((resolve) => {
  const child = spawn(k6, ['run', '--quiet', join(root, 'bench/k6/edge.js')], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, BASELINE: `http://127.0.0.1:${baselinePort}`, BASE: `http://127.0.0.1:${port}`, TOKEN: token, NARROW: narrowToken, CLIENT_ID: admin.client_id, CLIENT_SECRET: admin.client_secret, DURATION: duration, VUS: vus, SUMMARY_FILE: summaryFile },
  });
  child.once('exit', (c) => resolve(c ?? 1));
});

const summary = JSON.parse(readFileSync(summaryFile, 'utf8')) as { metrics: Record<string, { values: Record<string, number> }> };
const rows: [string, string][] = [
  ['baseline: bare uWS, no auth', 'baseline'],
  ['Sluice: hot token, scope check, list (200)', 'hotToken'],
  ['Sluice: scope violation (403)', 'scopeViolation'],
  ['Sluice: issue a token (200)', 'issueToken'],
];
console.log('\n| case | req/s | p50 ms | p99 ms | checks ok |');
console.log('|---|---:|---:|---:|---:|');
for (const [label, tag] of rows) {
  const dur = summary.metrics[`http_req_duration{case:${tag}}`]?.values;
  const reqs = summary.metrics[`http_reqs{case:${tag}}`]?.values;
  const checks = summary.metrics[`checks{case:${tag}}`]?.values;
  // k6's `rate` divides by the whole run; each case ran only its own DURATION seconds.
  console.log(`| ${label} | ${Math.round((reqs?.count ?? 0) / Number(duration))} | ${dur?.med?.toFixed(2)} | ${dur?.['p(99)']?.toFixed(2)} | ${((checks?.rate ?? 0) * 100).toFixed(2)}% |`);
}
if (bareSocket) uWS.us_listen_socket_close(bareSocket);
await node.close();
await kafka?.stop();
process.exit(code);
