/**
 * State at scale: 100,000 endpoints of one tenant, 1,000 small tenants and 1,000,000 DLQ entries,
 * written straight into Kafka; then start and stop times, RSS and CPU per process and phase, and
 * list and publish latency of one `sluice start --workers 1` on that state.
 *
 *   npm run bench:state -- [--quick] [--results FILE] [--requests N] [--keep-logs]
 *       [--sluice-node-args="--trace-gc ..."]   (node flags for every `sluice start`, to diagnose)
 *
 * --quick divides every count by 20 and writes nothing unless --results FILE is given; otherwise the
 * `state` section of bench/RESULTS.md is replaced. KAFKA_BROKERS: a running broker to use.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../core/config.ts';
import { createKafka } from '../core/kafka/client.ts';
import { DurableProducer, type OutRecord } from '../core/kafka/producers.ts';
import { ensureTopics } from '../core/kafka/topic-admin.ts';
import { KAFKA_VERSION } from '../core/kafka/local-broker.ts';
import { topicNames, topicSpecs } from '../core/topics.ts';
import { freePort } from '../core/net/free-port.ts';
import { stop, tail, type Launched } from '../harness/children.ts';
import { rpc } from '../harness/ipc.ts';
import { kafkaPid as kafkaJavaPid } from '../harness/kafka.ts';
import { machineCpu, ProcSampler, processTree, type Usage } from '../harness/proc-cpu.ts';
import { printHelp, ROOT, resultsFile, say, sleep, writeResults } from '../harness/cli.ts';
import { BenchRun } from '../harness/bench.ts';
import { sluiceEnv } from '../harness/sluice.ts';
import type { BenchClient } from '../harness/sluice-api.ts';
import { provenance, table } from '../harness/report.ts';
import { fmt, latency, type Latency } from '../harness/stats.ts';
import * as data from './state/data.ts';
import { BIG, EVENT_TYPES, bigDlqPosition, bigEndpoint, cursorOf, type Plan } from './state/data.ts';
import { fill } from './state/fill.ts';
import { Caller, repeat } from './state/http.ts';
import type { BurstRequest } from './state/burst-writer.ts';

const { values: opt } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    results: { type: 'string' },
    requests: { type: 'string' },
    'keep-logs': { type: 'boolean', default: false },
    'sluice-node-args': { type: 'string', default: '' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (opt.help) printHelp(import.meta.url);
const quick = opt.quick === true;
const SCALE = quick ? 1 / 20 : 1;
/** Requests per latency row (200 by default, --quick included: they are cheap). */
const N = opt.requests ? Number(opt.requests) : 200;
const WARM_UP = 20;
const WALK_PAGES = 5000;
const WRITE_BURST = Math.round(1000 * SCALE);
const WRITE_ROUNDS = 10;
const DEAD_BURST = Math.round(10_000 * SCALE);
const EPS = '/v1/webhooks/endpoints?limit=100';
const PROCS = ['Kafka (java)', 'sluice start', 'sluice admin (CLI)'];
const RSS_LIMIT_MB = 256;

const bench = new BenchRun('bench-state', ROOT, 'bench-state');
const { scratch, children, prefix } = bench;
let sampler: ProcSampler | null = null;
bench.onShutdown(async () => sampler?.stop());
// A failed run keeps its logs (Kafka's in kafka/logs), not the gigabytes of data beside them.
scratch.keepLogs = opt['keep-logs'] === true;

// ---------------------------------------------------------------- results collected on the way

/** dlq-writes: DLQ lists right after (or while) entries are written. */
type Group = 'dlq' | 'dlq-writes' | 'endpoints' | 'publish' | 'metrics';
/** `target`: the p99 bound (ms) of the issue's targets, when the row counts for one. */
const rows: { group: Group; query: string; s: Latency; target?: number }[] = [];
const notes: string[] = [];
/** Per phase: the sampler's peak RSS and CPU per process, `sluice start`'s anonymous RSS, its table row. */
const phases: { name: string; usage: Map<string, Usage>; anon: number | null; row: unknown[] }[] = [];
/** Table rows of starts and stops of Sluice processes, of the bursts. */
const startStops: unknown[][] = [];
const bursts: unknown[][] = [];
const fills: string[] = [];

function row(group: Group, query: string, ms: number[], target?: number): Latency {
  const s = latency(ms);
  rows.push({ group, query, s, target });
  say(`  ${query}: n=${s.count} p50 ${fmt(s.p50, 2)} ms, p99 ${fmt(s.p99, 2)} ms, max ${fmt(s.max, 1)} ms`);
  return s;
}

const alive = (c: Launched | null) => c !== null && c.proc.exitCode === null && c.proc.signalCode === null;
const logTail = (c: Launched, lines: number) => tail(c.log, lines).replace(/\s+/g, ' ').slice(0, 300);
const rand = (n: number) => Math.floor(Math.random() * n);
const dlqPath = (q: Record<string, string | number | null | undefined>) => {
  const set = Object.entries(q).flatMap(([k, v]) => (v === undefined || v === null ? [] : [[k, String(v)]]));
  return `/v1/webhooks/dlq?${new URLSearchParams(set)}`;
};
const FIRST = dlqPath({ limit: 100 });
const get = async (c: Caller, path: string) => (await c.expect('GET', path)).ms;

/** A row of N timed GETs of `path` (or `path(i)`) after WARM_UP untimed ones, held to p99 < `target` ms (0: none). */
async function timed(group: Group, query: string, c: Caller, path: string | ((i: number) => string), target = 10) {
  const one = (i: number) => get(c, typeof path === 'string' ? path : path(i));
  await repeat(WARM_UP, one);
  return row(group, query, await repeat(N, one), target || undefined);
}

/** A publish row of `c` (its 3 endpoints take inference.completed); no target of its own. */
async function publish(query: string, c: Caller): Promise<Latency> {
  const post = (data: object) =>
    c.expect('POST', '/v1/webhooks/events', { type: 'inference.completed', data: { ...data, sent_at: Date.now() } });
  const matched = (await post({ warm: true })).json.matched_endpoints;
  if (matched !== 3) notes.push(`publish for ${c.tenant} matched ${matched} endpoints, expected 3.`);
  const one = async (i: number) => (await post({ n: i })).ms;
  await repeat(WARM_UP, one);
  return row('publish', query, await repeat(N, one));
}

/** Entries listed for a DLQ filter, counted through pages of 1,000. */
async function countListed(c: Caller, q: Record<string, string>): Promise<number> {
  let n = 0;
  for (let cursor: string | null = null; ; ) {
    const r = await c.expect('GET', dlqPath({ ...q, limit: 1000, cursor }));
    n += r.json.data.length;
    cursor = r.json.next_cursor;
    if (!cursor) return n;
  }
}

// ---------------------------------------------------------------- the run

async function main(): Promise<number> {
  const broker = await bench.startKafka();
  const { brokers } = broker;
  const kafkaPid = kafkaJavaPid(broker);

  // Topics, producers, the receiver the endpoints point at
  const config = loadConfig({});
  const { masterKey } = config;
  const topics = topicNames(prefix);
  const kafka = createKafka(brokers, 'sluice-bench-state');
  await ensureTopics(kafka, topicSpecs(prefix, config.topicPartitions));
  const producers = [1, 2, 3].map(() => new DurableProducer(kafka));
  for (const p of producers) {
    await p.connect();
    bench.onShutdown(() => p.disconnect());
  }
  const producer = producers[0];
  const listen = { op: 'listen' as const, ports: [1, 2, 3].map((i) => ({ name: `p${i}` })) };
  const plan = data.makePlan(SCALE, (await bench.receiver().call(listen)).ports!);

  // Sluice processes
  const port = await freePort();
  const adminPort = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const childEnv = (dataDir: string): NodeJS.ProcessEnv => {
    // Not SLUICE_MASTER_KEY: the endpoints' secrets are sealed with the development key.
    const { SLUICE_MASTER_KEY: _key, SLUICE_WORKERS: _workers, ...env } = sluiceEnv({ brokers, prefix, port, dataDir });
    const ports = { SLUICE_PORT: String(port), SLUICE_ADMIN_PORT: String(adminPort) };
    return { ...env, ...ports, SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true', SLUICE_LOG_LEVEL: 'warn' };
  };
  let sluice: Launched | null = null;
  const adminPids = new Set<number>();
  sampler = new ProcSampler(
    () =>
      new Map([
        ['Kafka (java)', kafkaPid ? [kafkaPid] : []],
        ['sluice start', alive(sluice) ? processTree(sluice!.proc.pid!) : []],
        ['sluice admin (CLI)', [...adminPids]],
      ]),
  );
  const phase = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    say(`\n== ${name}`);
    const window = sampler!.begin();
    const [t, cpu0, self0] = [Date.now(), machineCpu(), process.cpuUsage()];
    try {
      return await fn();
    } finally {
      const [cpu1, self, sec] = [machineCpu(), process.cpuUsage(self0), (Date.now() - t) / 1000];
      const usage = sampler!.end(window);
      const memory = alive(sluice) ? await memoryParts(sluice!.proc.pid!, adminPort) : null;
      const busy = ((cpu1.busy - cpu0.busy) / Math.max(1, cpu1.total - cpu0.total)) * cpus().length;
      const cpuOf = (p: string) => usage.get(p)?.cpuSec ?? 0;
      const others = Math.max(0, busy - (cpuOf(PROCS[0]) + cpuOf(PROCS[1]) + (self.user + self.system) / 1e6) / sec);
      // A process that exited within the phase (the CLI) has no CPU reading left in /proc.
      const cells = PROCS.map((p, i) => {
        const u = usage.get(p);
        return u?.peakRssMb ? `${fmt(u.peakRssMb)} MiB${i < 2 ? ` · ${fmt(u.cpuSec, 1)} s` : ''}` : null;
      });
      const row = [name, `${fmt(sec, 1)} s`, ...cells, memory?.text, `${fmt(busy, 2)} / ${fmt(others, 2)}`];
      phases.push({ name, usage, anon: memory?.anon ?? null, row });
    }
  };

  const readyz = async () => (await fetch(`http://127.0.0.1:${adminPort}/readyz`).catch(() => null))?.status === 200;
  /** Spawns `sluice start` until /readyz answers 200; one that exits is tried again on the same data dir. */
  const startSluice = async (what: string, logName: string, dataDir: string): Promise<number> => {
    const nodeArgs = opt['sluice-node-args']!.split(' ').filter(Boolean);
    for (let attempt = 1; attempt <= 3; attempt++) {
      const t = Date.now();
      const window = sampler!.begin();
      const env = childEnv(dataDir);
      const s = children.spawn(`sluice-${logName}`, bench.sluice, ['start', '--workers', '1'], env, 'sluice', nodeArgs);
      sluice = s;
      let ready = await readyz();
      for (; !ready && alive(s); ready = await readyz()) {
        if (Date.now() - t > 900_000) throw new Error(`sluice start: /readyz not 200 in time:\n${tail(s.log)}`);
        await sleep(50);
      }
      const ms = Date.now() - t;
      const rssMb = sampler!.end(window).get('sluice start')?.peakRssMb ?? null;
      if (ready) {
        startStops.push([what, `${fmt(ms / 1000, 2)} s`, `${fmt(rssMb)} MiB`, attempt > 1 ? `attempt ${attempt}` : '']);
        say(`  ${what}: /readyz 200 after ${fmt(ms / 1000, 1)} s (peak RSS ${fmt(rssMb)} MiB)`);
        return ms;
      }
      const detail = `attempt ${attempt} exited after ${fmt(ms / 1000, 1)} s: ${logTail(s, 3)}`;
      startStops.push([what, 'not ready', `${fmt(rssMb)} MiB`, detail]);
      notes.push(`${what}: \`sluice start\` did not become ready, ${detail}`);
      say(`  ${what}: ${detail}`);
    }
    throw new Error(`${what}: sluice start never became ready`);
  };
  /** SIGTERM → exit of the running `sluice start`, and whether it had to force its exit. */
  const stopSluice = async (what: string): Promise<void> => {
    if (!sluice) return;
    const t = Date.now();
    await stop(sluice.proc);
    const ms = Date.now() - t;
    const forced = /shutdown did not finish/.test(readFileSync(sluice.log, 'utf8'));
    const note = forced ? 'forced exit: "shutdown did not finish"' : '';
    startStops.push([`stop: ${what}`, `${fmt(ms)} ms`, null, note]);
    say(`  ${what}: exited ${fmt(ms)} ms after SIGTERM ${note}`);
  };
  /** `sluice admin create-client`: its credentials (null and `error`: it failed), time and peak RSS. */
  const createClient = async (tenant: string, dataDir: string) => {
    const t = Date.now();
    const window = sampler!.begin();
    const args = ['admin', 'create-client', '--tenant', tenant, '--role', 'admin', '--json'];
    const c = children.spawn(`admin-${tenant}`, bench.sluice, args, childEnv(dataDir), 'sluice');
    adminPids.add(c.proc.pid!);
    const code = await c.exited;
    adminPids.delete(c.proc.pid!);
    const ms = Date.now() - t;
    const rssMb = sampler!.end(window).get('sluice admin (CLI)')?.peakRssMb ?? null;
    const line = /^\{"client_id".*$/m.exec(readFileSync(c.log, 'utf8'))?.[0];
    if (code !== 0 || !line) return { ms, rssMb, credentials: null, error: logTail(c, 4) };
    return { ms, rssMb, credentials: JSON.parse(line) as BenchClient, error: '' };
  };
  const caller = (tenant: string, credentials: BenchClient) => {
    const c = new Caller(base, tenant, credentials);
    bench.onShutdown(() => c.close());
    return c;
  };

  const smallName = data.smallTenant(0);
  const dirBaseline = scratch.dataDir('data-baseline');
  const dirMain = scratch.dataDir('data');
  const creds: BenchClient[] = [];
  let baselinePublish: Latency | null = null;

  // 0. baseline: only the small tenants exist
  await phase('baseline (small tenants only)', async () => {
    const make = (k: number) => data.endpointRecord(data.smallEndpoint(plan, masterKey, Math.floor(k / 3), k % 3));
    const what = `endpoints of ${fmt(plan.smallTenants)} small tenants`;
    fills.push(await fill(producers, topics.endpoints, plan.smallTenants * 3, make, what));
    await startSluice('baseline start (small tenants only, empty store)', 'baseline', dirBaseline);
    for (const tenant of [BIG, smallName]) {
      const r = await createClient(tenant, dirBaseline);
      if (!r.credentials) throw new Error(`sluice admin create-client failed: ${r.error}`);
      creds.push(r.credentials);
    }
    const small = caller(smallName, creds[1]);
    const query = `baseline (before the fill): POST /v1/webhooks/events, ${smallName} (3 endpoints)`;
    baselinePublish = await publish(query, small);
    await timed('endpoints', `baseline: GET ${EPS}, ${smallName}`, small, EPS, 0);
    await small.close();
  });
  await stopSluice('baseline node, after its bench connections were closed');
  const [bigCreds, smallCreds] = creds;

  // 1. fill straight into Kafka
  await phase('fill', async () => {
    const bigEp = (i: number) => data.endpointRecord(bigEndpoint(plan, masterKey, i));
    const bigDlq = (i: number) => data.dlqRecord(data.bigDlqEntry(plan, i));
    const smallDlq = (k: number) => data.dlqRecord(data.smallDlqEntry(plan, k));
    const jobs: [string, string, number, (i: number) => OutRecord][] = [
      ['endpoints of `big`', topics.endpoints, plan.bigEndpoints, bigEp],
      ['DLQ entries of `big`', topics.dlq, plan.dlq, bigDlq],
      ['DLQ entries of the small tenants', topics.dlq, plan.smallTenants * plan.dlqPerSmall, smallDlq],
    ];
    for (const [what, topic, total, make] of jobs) fills.push(await fill(producers, topic, total, make, what));
  });

  // 2. a one-off CLI process against the filled state
  await phase('admin CLI (create-client) on the filled state', async () => {
    const r = await createClient(data.smallTenant(1), dirMain);
    const what = '`sluice admin create-client` on the filled state (builds its own views)';
    startStops.push([what, r.credentials ? `${fmt(r.ms / 1000, 2)} s` : 'failed', `${fmt(r.rssMb)} MiB`, r.error]);
    if (!r.credentials) notes.push(`${what} failed after ${fmt(r.ms / 1000, 1)} s: ${r.error}`);
  });

  // 3. cold start: an empty store, every view rebuilt from Kafka
  await phase('cold start', () =>
    startSluice('cold start (empty SLUICE_DATA_DIR: every view rebuilt)', 'cold', dirMain),
  );

  // 4. latency
  let afterPublish: Latency | null = null;
  await phase('latency', async () => {
    const bigC = caller(BIG, bigCreds);
    const small = caller(smallName, smallCreds);
    const anyDepth = () => cursorOf(bigDlqPosition(plan, rand(plan.dlq)));
    const endpointCursor = (i: number) => {
      const e = bigEndpoint(plan, masterKey, i);
      return `${e.created_at}.${e.id}`;
    };

    // Endpoints
    row('endpoints', `big: first GET ${EPS} after start (sorts the tenant once)`, [await get(bigC, EPS)], 10);
    await timed('endpoints', `big: GET ${EPS}, first page`, bigC, EPS);
    const deep = () => `${EPS}&cursor=${endpointCursor(rand(plan.bigEndpoints))}`;
    await timed('endpoints', 'big: endpoints, deep page (random cursor)', bigC, deep);
    await timed('endpoints', `${smallName}: endpoints, first page`, small, EPS);
    const changed = await repeat(quick ? 10 : 20, async (r) => {
      const e = bigEndpoint(plan, masterKey, rand(plan.bigEndpoints));
      const update = { ...e, metadata: { bench: 'state', round: r }, updated_at: Date.now() };
      await producer.send(topics.endpoints, [data.endpointRecord(update)]);
      await sleep(300); // the node's view has it by then
      return get(bigC, EPS);
    });
    row('endpoints', 'big: endpoints first page, right after one of its endpoints changed', changed, 10);

    // The DLQ of big: its first page, a walk by next_cursor, any depth, filters
    const first = (await bigC.expect('GET', FIRST)).json.data;
    if (first.length !== 100 || first[0].id !== bigDlqPosition(plan, 0).id)
      notes.push(`big's first DLQ page is not the oldest 100 entries (got ${first.length}, first ${first[0]?.id}).`);
    await timed('dlq', `big: GET ${FIRST}, first page`, bigC, FIRST);
    const walk: number[] = [];
    let misplaced = 0;
    for (let page = 1, cursor: string | null = null; page <= WALK_PAGES; page++) {
      const r = await bigC.expect('GET', dlqPath({ limit: 100, cursor }));
      walk.push(r.ms);
      if (r.json.data[0]?.id !== bigDlqPosition(plan, (page - 1) * 100).id) misplaced++;
      cursor = r.json.next_cursor;
      if (!cursor) break;
      if (page % 1000 === 0) say(`  walked ${fmt(page)} pages`);
    }
    if (misplaced > 0)
      notes.push(`walking big's DLQ: ${misplaced} of ${walk.length} pages did not start with the expected entry.`);
    row('dlq', `big: DLQ walk with next_cursor, pages 1–${fmt(walk.length)} (every page)`, walk, 10);
    row('dlq', `big: DLQ walk, pages ${fmt(walk.length - 199)}–${fmt(walk.length)}`, walk.slice(-200), 10);
    const anyPage = () => dlqPath({ limit: 100, cursor: anyDepth() });
    await timed('dlq', 'big: DLQ page at any depth (random cursor `<deadMs>.<id>`)', bigC, anyPage);
    const ep = (i: number) => data.bigEndpointId(i % plan.dlqEndpoints);
    const et = (i: number) => EVENT_TYPES[i % EVENT_TYPES.length];
    const filters: [string, (i: number) => Record<string, string>][] = [
      ['endpoint_id', (i) => ({ endpoint_id: ep(i) })],
      ['event_type', (i) => ({ event_type: et(i) })],
      ['endpoint_id + event_type', (i) => ({ endpoint_id: ep(i), event_type: et(rand(4)) })],
    ];
    for (const [name, f] of filters) {
      const want = f(7);
      const page = (await bigC.expect('GET', dlqPath({ ...want, limit: 100 }))).json.data;
      if (page.length !== 100 || page.some((e: any) => Object.entries(want).some(([k, v]) => e[k] !== v)))
        notes.push(`filter ${name}: the first page did not hold 100 matching entries.`);
      const firstPage = (i: number) => dlqPath({ ...f(i), limit: 100 });
      await timed('dlq', `big: DLQ filtered by ${name}, first page`, bigC, firstPage);
      const deepPage = (i: number) => dlqPath({ ...f(i), limit: 100, cursor: anyDepth() });
      await timed('dlq', `big: DLQ filtered by ${name}, any depth (random cursor)`, bigC, deepPage);
    }
    await timed('dlq', `${smallName}: DLQ first page (${plan.dlqPerSmall} entries)`, small, FIRST);
    afterPublish = await publish(`after the fill: POST /v1/webhooks/events, ${smallName} (3 endpoints)`, small);
    const scrape = async () => {
      const t0 = performance.now();
      const res = await fetch(`http://127.0.0.1:${adminPort}/metrics`);
      if (!(await res.text()).includes('sluice_dlq_entries')) throw new Error('/metrics has no sluice_dlq_entries');
      return performance.now() - t0;
    };
    const gauge = `the DLQ gauge over ${fmt(plan.dlq)} entries`;
    const scrapes = await repeat(quick ? 5 : 20, scrape);
    row('metrics', `GET /metrics on the admin port (a Prometheus scrape: ${gauge})`, scrapes);

    // Right after writes: a burst straight into Kafka, then list at once (oldest page and any depth, alternating).
    const afterWrites: number[] = [];
    const visibleAfter: number[] = [];
    for (let r = 0; r < WRITE_ROUNDS; r++) {
      const endpointId = `ep_writes_${r}`;
      const now = Date.now();
      const records = Array.from({ length: WRITE_BURST }, (_, k) => {
        const id = `dlq_writes_${r}_${String(k).padStart(5, '0')}`;
        return data.dlqRecord(data.dlqEntry(id, BIG, endpointId, 'inference.failed', now, plan.entryBytes));
      });
      await producer.send(topics.dlq, records);
      const acked = Date.now();
      let seen = 0;
      for (let k = 0; k < 20 || seen < WRITE_BURST; k++) {
        afterWrites.push(await get(bigC, dlqPath({ limit: 100, cursor: k % 2 === 0 ? null : anyDepth() })));
        if (seen < WRITE_BURST) {
          seen = (await bigC.expect('GET', dlqPath({ endpoint_id: endpointId, limit: 1000 }))).json.data.length;
          if (seen >= WRITE_BURST) visibleAfter.push(Date.now() - acked);
        }
        if (Date.now() - acked > 60_000) {
          notes.push(`write round ${r}: only ${seen} of ${WRITE_BURST} entries listed 60 s after Kafka's ack.`);
          break;
        }
      }
    }
    const burst = `${fmt(WRITE_BURST)} entries were written, ${WRITE_ROUNDS} rounds`;
    row('dlq-writes', `big: DLQ page (first / any depth) right after ${burst}`, afterWrites, 10);
    const v = latency(visibleAfter);
    notes.push(
      `After each write burst of ${fmt(WRITE_BURST)} entries (${WRITE_ROUNDS} rounds), all of them were listed ` +
        `${fmt(v.p50)} ms (median), ${fmt(v.max)} ms (max) after Kafka acknowledged the write.`,
    );
  });

  // 5. dead-letter bursts through the dispatcher's OutcomeRecorder, from their own process
  await phase('dead-letter bursts', async () => {
    const bigC = caller(BIG, bigCreds);
    const writerSpec = JSON.stringify({ brokers, prefix });
    const writer = children.forkTs('burst-writer', join(ROOT, 'bench/state/burst-writer.ts'), [writerSpec]);
    await new Promise((r) => writer.proc.once('message', r));
    const call = rpc<BurstRequest, { writtenMs?: number }>(writer.proc);
    for (const [label, count, padBytes, endpointId] of [
      [`${fmt(DEAD_BURST)} dead letters of ~1 KB`, DEAD_BURST, 600, 'ep_burst_small'],
      ['20 dead letters of 256 KiB', 20, 256 * 1024, 'ep_burst_large'],
    ] as const) {
      await call({ op: 'prepare', count, padBytes, tenant: BIG, endpointId });
      const t = Date.now();
      const written = call({ op: 'go' });
      const probe: number[] = [];
      let listed = 0;
      let listedMs: number | null = null;
      // The first page back to back; every 200 ms, whether the whole burst is listed yet.
      for (let countedAt = 0; listedMs === null && Date.now() - t < 120_000; ) {
        probe.push(await get(bigC, FIRST));
        if (Date.now() - countedAt < 200) continue;
        countedAt = Date.now();
        listed = await countListed(bigC, { endpoint_id: endpointId });
        if (listed >= count) listedMs = Date.now() - t;
      }
      const writtenMs = (await written).writtenMs!;
      row('dlq-writes', `big: DLQ first page while ${label} are written and applied`, probe, 10);
      const listedAfter = listedMs === null ? 'not within 120 s' : `${fmt(listedMs)} ms`;
      bursts.push([label, `${fmt(writtenMs)} ms`, listedAfter, `${fmt(listed)} / ${fmt(count)}`]);
    }
  });

  // 6. warm restart on the same data dir
  let warmMs: number | null = null;
  await stopSluice('filled node, while the bench held keep-alive connections to it (as a load balancer does)');
  await phase('warm restart', async () => {
    const storeParent = join(dirMain, prefix);
    const before = new Set(readdirSync(storeParent));
    warmMs = await startSluice('warm restart (same SLUICE_DATA_DIR, resumes from stored offsets)', 'warm', dirMain);
    const fresh = readdirSync(storeParent).filter((d) => !before.has(d));
    if (fresh.length > 0)
      notes.push(`warm restart: the node did not take its old store directory but ${fresh.join(', ')}.`);
    const bigC = caller(BIG, bigCreds);
    await timed('dlq', 'after the warm restart: big DLQ first page', bigC, FIRST);
    const anyPage = () => dlqPath({ limit: 100, cursor: cursorOf(bigDlqPosition(plan, rand(plan.dlq))) });
    await timed('dlq', 'after the warm restart: big DLQ any depth (random cursor)', bigC, anyPage);
  });
  await stopSluice('restarted node, at the end');

  const where = broker.external ? `already running (${brokers.join(',')})` : 'started by the bench (`sluice kafka`)';
  const kafkaNote = `Kafka ${KAFKA_VERSION} ${where}`;
  const section = report(plan, kafkaNote, baselinePublish, afterPublish, warmMs);
  say(`\n${section}`);
  const file = resultsFile(opt.results, quick);
  writeResults(file, 'state', section);
  if (!file) say('\n(--quick: bench/RESULTS.md left alone; pass --results FILE to write the section)');
  return 0;
}

// ---------------------------------------------------------------- report

/** "met (…)" / "**MISSED** (…)" for a value against an upper bound. */
export function verdict(value: number | null | undefined, limit: number, unit: string): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return 'not measured';
  const d = (x: number) => fmt(x, Math.abs(x) < 10 ? 1 : 0);
  return value < limit
    ? `met (${d(limit - value)} ${unit} under)`
    : `**MISSED** (${d(value - limit)} ${unit} over, ${fmt(value / limit, 1)}×)`;
}

/**
 * A process's resident memory by kind (/proc/<pid>/status, MiB): anonymous (heap, stacks, SQLite's
 * cache) + file-backed (code), and V8's heap from its admin port's /metrics (prom-client's metrics).
 */
export async function memoryParts(pid: number, adminPort: number): Promise<{ anon: number; text: string } | null> {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return null;
  }
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) / 1024;
  const anon = kb('RssAnon');
  const text = `${fmt(anon)} + ${fmt(kb('RssFile') + kb('RssShmem'))} MiB`;
  const res = await fetch(`http://127.0.0.1:${adminPort}/metrics`).catch(() => null);
  const metrics = (await res?.text()) ?? '';
  const mb = (name: string) => Number(new RegExp(`^nodejs_${name} (\\S+)`, 'm').exec(metrics)?.[1] ?? NaN) / 2 ** 20;
  const [used, total, external] = ['heap_size_used_bytes', 'heap_size_total_bytes', 'external_memory_bytes'].map(mb);
  if (!Number.isFinite(used)) return { anon, text };
  return { anon, text: `${text} (V8 heap ${fmt(used)} used of ${fmt(total)}, external ${fmt(external)})` };
}

function report(plan: Plan, kafka: string, before: Latency | null, after: Latency | null, warmMs: number | null) {
  const ms = (x: number | null) => fmt(x, x !== null && x < 10 ? 2 : 1);
  const pair = (s: Latency | null) => (s ? `${ms(s.p50)}/${ms(s.p99)}` : '—');
  const rssTarget = (what: string, proc: string) => {
    const [p] = [...phases].sort((a, b) => (b.usage.get(proc)?.peakRssMb ?? 0) - (a.usage.get(proc)?.peakRssMb ?? 0));
    const mb = p?.usage.get(proc)?.peakRssMb || null;
    const figure = mb && `peak ${fmt(mb)} MiB (${p.name})`;
    return [`${what} < ${RSS_LIMIT_MB} MiB RSS`, figure, verdict(mb, RSS_LIMIT_MB, 'MiB')];
  };
  const [anon] = phases.filter((p) => p.anon !== null).sort((a, b) => b.anon! - a.anon!);
  // The worst p99 of the target rows `pick` selects: the figure and its verdict.
  const worst = (pick: (x: (typeof rows)[number]) => boolean) => {
    const [w] = rows.filter((x) => x.target !== undefined && pick(x)).sort((a, b) => b.s.p99! - a.s.p99!);
    const figure = w ? `worst p99 ${ms(w.s.p99)} ms (${w.query}, n=${w.s.count})` : 'not measured';
    return [figure, verdict(w?.s.p99, 10, 'ms')];
  };
  const [all, allVerdict] = worst((x) => x.group === 'endpoints');
  const [steady, steadyVerdict] = worst((x) => x.group === 'endpoints' && x.s.count >= 100);
  const within = (a: number | null, b: number | null) => a !== null && b !== null && a <= b * 1.5 + 1;
  const independent = after && before ? within(after.p50, before.p50) && within(after.p99, before.p99) : null;
  const warmS = warmMs === null ? null : warmMs / 1000;
  const targets = [
    rssTarget('`sluice start`', 'sluice start'),
    [
      "(for comparison) `sluice start` anonymous RSS only: heap, stacks and SQLite's cache, no file-backed pages",
      anon ? `${fmt(anon.anon)} MiB at the end of ${anon.name} (read at phase ends, not sampled)` : null,
      verdict(anon?.anon, RSS_LIMIT_MB, 'MiB'),
    ],
    rssTarget('`sluice admin` CLI', 'sluice admin (CLI)'),
    ['DLQ list p99 < 10 ms at any depth and with filters', ...worst((x) => x.group === 'dlq')],
    ['DLQ list p99 < 10 ms right after writes', ...worst((x) => x.group === 'dlq-writes')],
    ['endpoint list p99 < 10 ms', `steady: ${steady}; all: ${all}`, `steady ${steadyVerdict}; all ${allVerdict}`],
    ['restart to ready < 5 s', `warm restart ${fmt(warmS, 2)} s`, verdict(warmS, 5, 's')],
    [
      "publish latency independent of `big`'s endpoints (after-fill p50 and p99 within 1.5× + 1 ms of the baseline)",
      `p50/p99 ${pair(after)} ms vs baseline ${pair(before)} ms`,
      independent === null ? 'not measured' : independent ? 'met' : '**MISSED**',
    ],
  ];
  const phaseRows = phases.map((p) => p.row);
  const latencyRows = rows.map((x) => {
    const v = x.target === undefined ? null : verdict(x.s.p99, x.target, 'ms');
    return [x.query, fmt(x.s.count), ms(x.s.p50), ms(x.s.p99), ms(x.s.max), v];
  });
  const { startedAt } = bench;
  const parts: [string, string, string[]][] = [
    ['Targets', '', table(['target', 'measured', 'verdict'], targets, 'lll')],
    ['Start and stop', '', table(['start / stop', 'time', 'peak RSS', 'note'], startStops, 'lrrl')],
    ['Latency (ms)', '', table(['query', 'n', 'p50', 'p99', 'max', 'p99 < 10 ms'], latencyRows, 'lrrrrl')],
    [
      'Dead-letter bursts',
      `From the burst writer, the dispatcher's path: \`deadLetterEntry\` builds each entry, all are handed at once ` +
        `to \`OutcomeRecorder.record\`. "Kafka ack": until every record() resolved; "all listed": until the DLQ ` +
        `list filtered by the burst's endpoint held them all. Meanwhile big's first DLQ page was requested back ` +
        `to back ("while … are written" above).`,
      table(['burst', 'Kafka ack', 'all listed after', 'listed / written'], bursts),
    ],
    [
      'Resources per phase',
      `Cells: peak RSS · CPU seconds (the CLI: peak RSS only). "sluice anon + file": \`sluice start\`'s RSS at ` +
        `the phase's end, anonymous (heap, stacks, SQLite's cache) + file-backed (code). "machine busy": cores ` +
        `busy on average (/proc/stat, of ${cpus().length}) / of which not Kafka, \`sluice start\` or this process.`,
      table(['phase', 'duration', ...PROCS, 'sluice anon + file', 'machine busy / others'], phaseRows),
    ],
    ['Notes', '', notes.map((n) => `- ${n}`)],
  ];
  return [
    `### State at scale: ${startedAt.toISOString().slice(0, 10)}`,
    '',
    ...provenance({ command: bench.command('bench:state'), sluiceDir: ROOT, startedAt, kafka, load1: bench.load1 }),
    '',
    `State, written straight into Kafka by 3 \`DurableProducer\`s (acks=all): \`big\` with ` +
      `${fmt(plan.bigEndpoints)} endpoints and ${fmt(plan.dlq)} DLQ entries of ~${fmt(plan.entryBytes)} B (over ` +
      `${plan.dlqEndpoints} endpoints × ${EVENT_TYPES.length} event types, dead-lettered over the last 6 days); ` +
      `${fmt(plan.smallTenants)} small tenants with 3 endpoints and ${plan.dlqPerSmall} DLQ entries each. ` +
      `Fill: ${fills.join('; ')}.`,
    '',
    `Processes: Kafka, \`sluice start --workers 1\` (own SLUICE_DATA_DIR), \`sluice admin create-client\`, the ` +
      `receiver, a burst writer; this one fills Kafka and measures. Latency: sequential requests over one ` +
      `keep-alive connection, until the body's last byte; ${N} per row after ${WARM_UP} untimed unless n says ` +
      `otherwise. RSS: VmRSS from /proc every 500 ms; Sluice's includes file-backed pages (code; the view store ` +
      `is read with pread, not mapped).`,
    ...parts.flatMap(([title, prose, lines]) =>
      lines.length ? ['', `#### ${title}`, '', ...(prose ? [prose, ''] : []), ...lines] : [],
    ),
  ].join('\n');
}

bench.run(main);
