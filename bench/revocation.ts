/**
 * Revocation propagation across separate ingress processes: 3 `sluice ingress` processes on this
 * machine, 200 clients revoked one after the other through node 1; per node, the time from the
 * 201 until that node refuses the client's token (each node polled back to back). Then each
 * node's CPU while idle (no requests) over --idle-seconds, from /proc/<pid>/stat.
 *
 *   KAFKA_BROKERS=127.0.0.1:23092 node bin/run-ts.js bench/revocation.ts [--revocations 200]
 *       [--fetch-wait MS]  (SLUICE_STATE_FETCH_WAIT_MS of the ingress processes; default: theirs)
 *       [--idle-seconds 10] [--json FILE]  (the figures, for bench/suite.ts)
 */
import { performance } from 'node:perf_hooks';
import { cpus } from 'node:os';
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { loadConfig } from '../core/config.ts';
import { openContext } from '../core/context.ts';
import { createClient, type CreatedClient } from '../core/clients/provisioning.ts';
import { startLocalKafka, type LocalKafka } from '../core/kafka/local-broker.ts';
import { cpuSec } from '../harness/proc-cpu.ts';
import { Scratch } from '../harness/scratch.ts';
import { percentile } from '../harness/stats.ts';
import { freePorts } from '../core/net/free-port.ts';
import { cliEnv, spawnIngress, type IngressProcess } from '../harness/sluice-cli.ts';
import { freePort, uniquePrefix } from '../test/helpers/sluice.ts';

const { values } = parseArgs({
  options: {
    revocations: { type: 'string', default: '200' },
    nodes: { type: 'string', default: '3' },
    'fetch-wait': { type: 'string' },
    'idle-seconds': { type: 'string', default: '10' },
    json: { type: 'string' },
  },
});
const N = Number(values.revocations);
const NODES = Number(values.nodes);

// Its broker's data and every node's view store live in a scratch directory removed on exit.
const scratch = new Scratch('bench-revocation');
let local: LocalKafka | null = null;
let brokers = process.env.KAFKA_BROKERS?.split(',');
const port = await freePort();
const baseConfig = loadConfig({
  ...process.env,
  SLUICE_TOPIC_PREFIX: uniquePrefix('bench-rev'),
  SLUICE_LOG_LEVEL: 'error',
  SLUICE_ISSUER: `http://127.0.0.1:${port}`,
  SLUICE_HOST: '127.0.0.1',
});
if (!brokers) {
  local = await startLocalKafka({
    cacheDir: baseConfig.cacheDir,
    port: await freePorts(2),
    dataDir: scratch.kafkaDir(),
    fresh: true,
  });
  brokers = local.brokers;
}
const config = loadConfig({
  ...process.env,
  KAFKA_BROKERS: brokers.join(','),
  SLUICE_TOPIC_PREFIX: baseConfig.topicPrefix,
  SLUICE_LOG_LEVEL: 'error',
  SLUICE_ISSUER: baseConfig.issuer,
  SLUICE_HOST: '127.0.0.1',
  SLUICE_DATA_DIR: scratch.dataDir(),
});
const ctx = await openContext(config, { brokers, component: 'bench' });

process.stdout.write(`starting ${NODES} ingress processes...\n`);
const nodes: IngressProcess[] = [];
scratch.onSignal(async () => {
  for (const n of nodes) await n.stop().catch(() => {});
  await ctx.close().catch(() => {});
  await local?.stop();
});
const nodeEnv = cliEnv(config, {
  SLUICE_DATA_DIR: config.dataDir,
  ...(values['fetch-wait'] ? { SLUICE_STATE_FETCH_WAIT_MS: values['fetch-wait'] } : {}),
});
for (let i = 0; i < NODES; i++) nodes.push(await spawnIngress(nodeEnv, await freePort(), await freePort()));

async function post(base: string, path: string, body: unknown, token?: string) {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as any };
}
/**
 * A token for a client from node 1. The node learns of a client just created through Kafka, so
 * its first token requests may be refused until its view has it (30 s at most).
 */
async function tokenOf(c: CreatedClient): Promise<string> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const res = await post(nodes[0].base, '/v1/auth/token', {
      grant_type: 'client_credentials',
      client_id: c.client_id,
      client_secret: c.client_secret,
    });
    if (res.status === 200) return res.json.access_token as string;
    if (Date.now() > deadline) throw new Error(`node 1 did not issue a token for ${c.client_id}: ${res.status}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
/** The status a node gives the token on a route it may use (audit:read). */
async function statusOn(base: string, token: string): Promise<number> {
  const res = await fetch(`${base}/v1/audit?limit=1`, { headers: { authorization: `Bearer ${token}` } });
  await res.arrayBuffer();
  return res.status;
}

process.stdout.write(`creating ${N} clients...\n`);
const officer = await createClient(ctx, { tenant: 'bench', role: 'security-officer' });
const victims: CreatedClient[] = [];
for (let i = 0; i < N; i++) victims.push(await createClient(ctx, { tenant: 'bench', role: 'security-officer' }));
let officerToken = await tokenOf(officer);
let officerTokenAt = Date.now();

// Warm-up, not measured: node 1's first audit append claims the transactional audit writer.
{
  const warm = await createClient(ctx, { tenant: 'bench', role: 'security-officer' });
  await tokenOf(warm); // node 1 knows the client it revokes (else 404)
  const res = await post(
    nodes[0].base,
    '/v1/auth/revocations',
    { client_id: warm.client_id, reason: 'bench warm-up' },
    officerToken,
  );
  if (res.status !== 201) throw new Error(`warm-up revocation answered ${res.status}`);
}

const latencies: number[][] = nodes.map(() => []);
/** The same, from the moment the POST left (the 201 waits for the audit append and node 1's view). */
const fromSent: number[][] = nodes.map(() => []);
const answer201: number[] = [];
for (let i = 0; i < N; i++) {
  if (Date.now() - officerTokenAt > 600_000) {
    officerToken = await tokenOf(officer);
    officerTokenAt = Date.now();
  }
  const token = await tokenOf(victims[i]);
  for (const n of nodes)
    if ((await statusOn(n.base, token)) !== 200) throw new Error('the token should work before the revocation');
  let t201 = Number.POSITIVE_INFINITY;
  let stop = false;
  // Every node is polled back to back from before the revocation is sent.
  const pollers = nodes.map(async (n) => {
    for (;;) {
      const status = await statusOn(n.base, token);
      const at = performance.now();
      if (status === 401) return at;
      if (stop) return Number.NaN;
    }
  });
  const sent = performance.now();
  const res = await post(
    nodes[0].base,
    '/v1/auth/revocations',
    { client_id: victims[i].client_id, reason: 'bench' },
    officerToken,
  );
  t201 = performance.now();
  if (res.status !== 201) throw new Error(`revocation answered ${res.status}: ${JSON.stringify(res.json)}`);
  const timeout = setTimeout(() => (stop = true), 10_000);
  const refusedAt = await Promise.all(pollers);
  clearTimeout(timeout);
  refusedAt.forEach((at, k) => {
    latencies[k].push(Math.max(0, at - t201));
    fromSent[k].push(at - sent);
  });
  answer201.push(t201 - sent);
}

const pct = (xs: number[], p: number) =>
  percentile(
    [...xs].sort((a, b) => a - b),
    p,
  ) ?? Number.NaN;
const fmt = (x: number) => (Number.isNaN(x) ? 'never' : `${x.toFixed(1)} ms`);
/** p50, p99 and max of `xs`, for the printout. */
const spread = (xs: number[]) => `p50 ${fmt(pct(xs, 50))}  p99 ${fmt(pct(xs, 99))}  max ${fmt(Math.max(...xs))}`;
process.stdout.write(
  `\nrevocation propagation: ${N} revocations through node 1, ${NODES} ingress processes, ` +
    `${cpus().length} cores, Kafka ${brokers.join(',')}\n`,
);
process.stdout.write("time from the 201 until the node refuses the revoked client's token (TOKEN_REVOKED):\n");
for (const [k, xs] of latencies.entries())
  process.stdout.write(`  node ${k + 1}${k === 0 ? ' (answered the 201)' : ''}: ${spread(xs)}\n`);
process.stdout.write(`  all nodes: ${spread(latencies.flat())}\n`);
process.stdout.write(`time from sending the POST until the node refuses the token (includes the audit append):\n`);
for (const [k, xs] of fromSent.entries()) process.stdout.write(`  node ${k + 1}: ${spread(xs)}\n`);
process.stdout.write(`POST /v1/auth/revocations until its 201: ${spread(answer201)}\n`);

/** CPU time (user + system) of a process, in seconds. */
const cpuSeconds = (pid: number) => cpuSec([pid]);
const idleSeconds = Number(values['idle-seconds']);
await new Promise((r) => setTimeout(r, 2000)); // let the last requests' work settle
const before = nodes.map((n) => cpuSeconds(n.pid));
await new Promise((r) => setTimeout(r, idleSeconds * 1000));
const idlePct = nodes.map((n, k) => ((cpuSeconds(n.pid) - before[k]) / idleSeconds) * 100);
process.stdout.write(
  `idle CPU per node over ${idleSeconds} s (% of one core): ${idlePct.map((x) => x.toFixed(2)).join(', ')}\n`,
);
/** Per round: the time from sending the POST until every node other than node 1 refused the token. */
const others = fromSent[0].map((_, i) => Math.max(...fromSent.slice(1).map((xs) => xs[i])));
if (others.length > 0 && NODES > 1) {
  const worst = others
    .map((ms, i) => ({ ms, i }))
    .sort((a, b) => b.ms - a.ms)
    .slice(0, 3);
  process.stdout.write(
    `until every other node refuses, from sending the POST: ` +
      `p50 ${fmt(pct(others, 50))}  p99 ${fmt(pct(others, 99))}; slowest rounds: ` +
      `${worst.map((w) => `#${w.i + 1} ${fmt(w.ms)}`).join(', ')}\n`,
  );
}
if (values.json) {
  const stats = (xs: number[]) => ({ p50: pct(xs, 50), p99: pct(xs, 99), max: Math.max(...xs) });
  writeFileSync(
    values.json,
    JSON.stringify({
      revocations: N,
      nodes: NODES,
      fetchWaitMs: values['fetch-wait'] ? Number(values['fetch-wait']) : null,
      othersFromSent: stats(others),
      fromSent: fromSent.map(stats),
      post201: stats(answer201),
      idleCpuPct: idlePct,
      idleSeconds,
    }),
  );
}

for (const n of nodes) await n.stop();
await ctx.close();
await local?.stop();
process.exit(0);
