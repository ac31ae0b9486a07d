/**
 * Revocation propagation across separate ingress processes: `--nodes` `sluice ingress` processes,
 * clients revoked one after the other through node 1, every node polled back to back until it
 * refuses the client's token; then each node's idle CPU (/proc) over --idle-seconds.
 *
 *   [KAFKA_BROKERS=…] node bin/run-ts.js bench/revocation.ts [--revocations 200] [--nodes 3]
 *       [--fetch-wait MS]  (SLUICE_STATE_FETCH_WAIT_MS of the ingress processes; default: theirs)
 *       [--idle-seconds 10] [--json FILE]  (the figures, for bench/suite.ts)
 */
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { createClient, type CreatedClient } from '../core/clients/provisioning.ts';
import { loadConfig } from '../core/config.ts';
import { openContext } from '../core/context.ts';
import { freePort } from '../core/net/free-port.ts';
import { BenchRun } from '../harness/bench.ts';
import { say, sleep } from '../harness/cli.ts';
import { cpuSec } from '../harness/proc-cpu.ts';
import { requestToken } from '../harness/sluice-api.ts';
import { cliEnv, type IngressProcess, spawnIngress } from '../harness/sluice-cli.ts';
import { fmt, type Latency, latency } from '../harness/stats.ts';

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
const IDLE_SECONDS = Number(values['idle-seconds']);
const bench = new BenchRun('bench-revocation', undefined, 'bench-rev');

async function post(base: string, path: string, body: unknown, token?: string) {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as any };
}

/** The status a node gives the token on a route it may use (audit:read). */
async function statusOn(base: string, token: string): Promise<number> {
  const res = await fetch(`${base}/v1/audit?limit=1`, { headers: { authorization: `Bearer ${token}` } });
  await res.arrayBuffer();
  return res.status;
}

async function main(): Promise<number> {
  const { brokers } = await bench.startKafka();
  const config = loadConfig({
    ...process.env,
    KAFKA_BROKERS: brokers.join(','),
    SLUICE_TOPIC_PREFIX: bench.prefix,
    SLUICE_LOG_LEVEL: 'error',
    SLUICE_ISSUER: `http://127.0.0.1:${await freePort()}`,
    SLUICE_HOST: '127.0.0.1',
    SLUICE_DATA_DIR: bench.scratch.dataDir(),
  });
  const ctx = await openContext(config, { brokers, component: 'bench' });
  bench.onShutdown(() => ctx.close());
  say(`starting ${NODES} ingress processes...`);
  const nodeEnv = cliEnv(config, {
    SLUICE_DATA_DIR: config.dataDir,
    ...(values['fetch-wait'] ? { SLUICE_STATE_FETCH_WAIT_MS: values['fetch-wait'] } : {}),
  });
  const nodes: IngressProcess[] = [];
  bench.onShutdown(() => Promise.all(nodes.map((n) => n.stop())));
  for (let i = 0; i < NODES; i++) nodes.push(await spawnIngress(nodeEnv, await freePort(), await freePort()));

  /** A token from node 1, which learns of a client just created through Kafka (refused until then, 30 s at most). */
  async function tokenOf(c: CreatedClient): Promise<string> {
    for (const deadline = Date.now() + 30_000; ; await sleep(50)) {
      const res = await requestToken(nodes[0].base, c);
      if (res.status === 200) return ((await res.json()) as { access_token: string }).access_token;
      await res.arrayBuffer();
      if (Date.now() > deadline) throw new Error(`node 1 did not issue a token for ${c.client_id}: ${res.status}`);
    }
  }
  const officerClient = () => createClient(ctx, { tenant: 'bench', role: 'security-officer' });
  const revoke = (c: CreatedClient, officerToken: string, reason: string) =>
    post(nodes[0].base, '/v1/auth/revocations', { client_id: c.client_id, reason }, officerToken);

  say(`creating ${N} clients...`);
  const officer = await officerClient();
  const victims: CreatedClient[] = [];
  for (let i = 0; i < N; i++) victims.push(await officerClient());
  let officerToken = await tokenOf(officer);
  let officerTokenAt = Date.now();
  // Warm-up, not measured: node 1's first audit append claims the transactional audit writer.
  const warm = await officerClient();
  await tokenOf(warm); // node 1 knows the client it revokes (else 404)
  const warmed = await revoke(warm, officerToken, 'bench warm-up');
  if (warmed.status !== 201) throw new Error(`warm-up revocation answered ${warmed.status}`);

  /** Per node: from the 201, and from sending the POST (which waits for the audit append), until refused. */
  const from201: number[][] = nodes.map(() => []);
  const fromSent: number[][] = nodes.map(() => []);
  const answer201: number[] = [];
  for (const victim of victims) {
    if (Date.now() - officerTokenAt > 600_000) [officerToken, officerTokenAt] = [await tokenOf(officer), Date.now()];
    const token = await tokenOf(victim);
    for (const n of nodes)
      if ((await statusOn(n.base, token)) !== 200) throw new Error('the token should work before the revocation');
    let giveUp = false;
    const pollers = nodes.map(async (n) => {
      for (;;) {
        const status = await statusOn(n.base, token);
        if (status === 401) return performance.now();
        if (giveUp) return Number.NaN;
      }
    });
    const sent = performance.now();
    const res = await revoke(victim, officerToken, 'bench');
    const t201 = performance.now();
    if (res.status !== 201) throw new Error(`revocation answered ${res.status}: ${JSON.stringify(res.json)}`);
    const timeout = setTimeout(() => (giveUp = true), 10_000);
    const refusedAt = await Promise.all(pollers);
    clearTimeout(timeout);
    refusedAt.forEach((at, k) => {
      from201[k].push(Math.max(0, at - t201));
      fromSent[k].push(at - sent);
    });
    answer201.push(t201 - sent);
  }

  /** Per round: from sending the POST until every node other than node 1 refused the token. */
  const others = fromSent[0].map((_, i) => Math.max(...fromSent.slice(1).map((xs) => xs[i])));
  const spread = (l: Latency) => `p50 ${fmt(l.p50, 1)}  p99 ${fmt(l.p99, 1)}  max ${fmt(l.max, 1)} ms`;
  say(`\nrevocation propagation: ${N} revocations through node 1, ${NODES} ingress processes, ${cpus().length} cores`);
  say("from the 201 until the node refuses the revoked client's token (TOKEN_REVOKED):");
  for (const [k, xs] of from201.entries())
    say(`  node ${k + 1}${k === 0 ? ' (answered the 201)' : ''}: ${spread(latency(xs))}`);
  say('from sending the POST until the node refuses the token (includes the audit append):');
  for (const [k, xs] of fromSent.entries()) say(`  node ${k + 1}: ${spread(latency(xs))}`);
  if (NODES > 1) say(`  until every other node refuses: ${spread(latency(others))}`);
  say(`POST /v1/auth/revocations until its 201: ${spread(latency(answer201))}`);

  await sleep(2000); // let the last requests' work settle
  const before = nodes.map((n) => cpuSec([n.pid]));
  await sleep(IDLE_SECONDS * 1000);
  const idleCpuPct = nodes.map((n, k) => ((cpuSec([n.pid]) - before[k]) / IDLE_SECONDS) * 100);
  say(`idle CPU per node over ${IDLE_SECONDS} s (% of one core): ${idleCpuPct.map((x) => fmt(x, 2)).join(', ')}`);
  if (values.json) {
    const figures = {
      revocations: N,
      nodes: NODES,
      fetchWaitMs: values['fetch-wait'] ? Number(values['fetch-wait']) : null,
      othersFromSent: latency(others),
      fromSent: fromSent.map(latency),
      post201: latency(answer201),
      idleCpuPct,
      idleSeconds: IDLE_SECONDS,
    };
    writeFileSync(values.json, JSON.stringify(figures));
  }
  return 0;
}

bench.run(main);
