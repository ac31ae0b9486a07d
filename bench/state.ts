/**
 * State at scale ("State that scales"): 100,000 endpoints of one tenant, 1,000 small tenants,
 * 1,000,000 DLQ entries, with every piece its own OS process: Kafka (`sluice kafka`, unless
 * KAFKA_BROKERS is set), `sluice start --workers 1`, the `sluice admin` CLI and the benches'
 * webhook receiver. This process only orchestrates, fills Kafka and measures.
 *
 *   npm run bench:state -- [--quick] [--results FILE] [--requests N] [--keep-logs]
 *       [--sluice-node-args="--trace-gc ..."]   (node flags for every `sluice start`, to diagnose)
 *
 *  0. baseline: only the small tenants' endpoints; `sluice start`; clients for `big` and
 *     `small-0000`; publish / list latency of the small tenant.
 *  1. fill straight into Kafka (DurableProducer, not the HTTP API): big's endpoints, the DLQ.
 *  2. one `sluice admin create-client` against the filled state (it builds its own views).
 *  3. cold start: a fresh SLUICE_DATA_DIR, spawn → /readyz 200, peak RSS.
 *  4. latency: p50/p99 of DLQ lists (first page, walk to page ~5,000, any depth by cursor,
 *     filters), endpoint lists, publish; DLQ lists right after bursts of written entries.
 *  5. dead-letter bursts (10,000 entries; 20 of 256 KiB) through the dispatcher's OutcomeRecorder.
 *  6. warm restart: SIGTERM, start again on the same SLUICE_DATA_DIR, spawn → /readyz 200.
 *
 * --quick divides every count by 20 and writes nothing unless --results FILE is given; otherwise
 * the section between `<!-- state:begin -->` and `<!-- state:end -->` of bench/RESULTS.md is
 * replaced. Peak RSS and CPU per process and phase come from /proc (harness/proc-cpu.ts).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../core/config.ts';
import { createKafka } from '../core/kafka/client.ts';
import { DurableProducer } from '../core/kafka/producers.ts';
import { ensureTopics } from '../core/kafka/topic-admin.ts';
import { KAFKA_VERSION } from '../core/kafka/local-broker.ts';
import { topicNames, topicSpecs } from '../core/topics.ts';
import { freePort } from '../core/net/free-port.ts';
import { stop, tail, type Launched } from '../harness/children.ts';
import { rpc } from '../harness/ipc.ts';
import type { ReceiverReply, ReceiverRequest } from '../harness/receiver.ts';
import { kafkaPid as kafkaJavaPid } from '../harness/kafka.ts';
import { machineCpu, ProcSampler, processTree, type Usage } from '../harness/proc-cpu.ts';
import { printHelp, ROOT, say, sleep } from '../harness/cli.ts';
import { BenchRun } from '../harness/bench.ts';
import { sluiceEnv } from '../harness/sluice.ts';
import { machineLine, measuredCommit, writeMarkedSection } from '../harness/results-section.ts';
import {
  BIG,
  EVENT_TYPES,
  bigDlqEntry,
  bigDlqPosition,
  bigEndpoint,
  bigEndpointId,
  cursorOf,
  dlqEntry,
  dlqRecord,
  endpointRecord,
  makePlan,
  smallDlqEntry,
  smallEndpoint,
  smallTenant,
  type Plan,
} from './state/data.ts';
import { fill, type FillProgress } from './state/fill.ts';
import { Caller, repeat, stats, type Stats } from './state/http.ts';
import type { BurstRequest } from './state/burst.ts';
import { heapParts, rssParts, verdict, type HeapParts } from './state/report.ts';
import { fmt } from '../harness/stats.ts';

const SLUICE = join(ROOT, 'bin/sluice.js');

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
/** Requests per latency row (at least 200 by default, --quick included: they are cheap). */
const N = opt.requests ? Number(opt.requests) : 200;
const WARM_UP = 20;
const WALK_PAGES = 5000;
const WRITE_BURST = Math.round(1000 * SCALE);
const WRITE_ROUNDS = 10;
const DEAD_BURST = Math.round(10_000 * SCALE);
const LARGE_BURST = 20;
const LARGE_BYTES = 256 * 1024;

type Credentials = { client_id: string; client_secret: string };

// ---------------------------------------------------------------- processes and cleanup

const bench = new BenchRun('bench-state', ROOT, 'bench-state');
const { scratch, children, prefix } = bench;
let sampler: ProcSampler | null = null;
bench.onShutdown(async () => sampler?.stop());
let brokers: string[] = [];
let externalKafka = false;
// A failed run keeps its logs (Kafka's in kafka/logs), not the gigabytes of data beside them.
scratch.keepLogs = opt['keep-logs'] === true;

// ---------------------------------------------------------------- results collected on the way

interface Row {
  /** dlq-writes: DLQ lists right after (or while) entries are written. */
  group: 'dlq' | 'dlq-writes' | 'endpoints' | 'publish' | 'metrics';
  query: string;
  s: Stats;
  /** p99 bound of the issue's targets, when this row counts for one. */
  target?: number;
}
const rows: Row[] = [];
const notes: string[] = [];
/** Per phase: the sampler's peak RSS / CPU per process, and sluice's RSS by kind at the phase's end. */
const phases: {
  name: string;
  ms: number;
  usage: Map<string, Usage>;
  parts: { anon: number; file: number } | null;
  heap: HeapParts | null;
  busyCores: number;
  selfCpuSec: number;
}[] = [];
const starts: { what: string; ms: number | null; rssMb: number | null; detail: string }[] = [];
const stops: { what: string; ms: number; forced: boolean }[] = [];

function row(group: Row['group'], query: string, ms: number[], target?: number): Stats {
  const s = stats(ms);
  rows.push({ group, query, s, target });
  say(`  ${query}: n=${s.n} p50 ${fmt(s.p50, 2)} ms, p99 ${fmt(s.p99, 2)} ms, max ${fmt(s.max, 1)} ms`);
  return s;
}

function progress(p: FillProgress): void {
  const s = (Date.now() - p.startedAt) / 1000;
  say(
    `  ${p.what}: ${fmt(p.done)} / ${fmt(p.total)} (${fmt((100 * p.done) / p.total)} %), ` +
      `${fmt(p.done / Math.max(s, 0.001))}/s, ${fmt(s, 0)} s`,
  );
}

// ---------------------------------------------------------------- the run

async function main(): Promise<number> {
  const { startedAt, load1 } = bench;

  // Kafka
  const broker = await bench.startKafka();
  ({ brokers, external: externalKafka } = broker);
  const kafkaPid = kafkaJavaPid(broker);

  // Topics, producers, the receiver the endpoints point at
  const config = loadConfig({});
  const topics = topicNames(prefix);
  const kafka = createKafka(brokers, 'sluice-bench-state');
  await ensureTopics(kafka, topicSpecs(prefix, config.topicPartitions));
  const producers = await Promise.all(
    [1, 2, 3].map(async () => {
      const p = new DurableProducer(kafka);
      await p.connect();
      bench.onShutdown(() => p.disconnect());
      return p;
    }),
  );
  const producer = producers[0];
  const receiver = children.forkTs('receiver', join(ROOT, 'harness/receiver.ts'));
  const ports = (
    await rpc<ReceiverRequest, ReceiverReply>(receiver.proc)({
      op: 'listen',
      ports: [1, 2, 3].map((i) => ({ name: `p${i}` })),
    })
  ).ports!;
  const plan = makePlan(SCALE, ports);
  const masterKey = config.masterKey;

  // Sluice processes
  const port = await freePort();
  const adminPort = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const childEnv = (dataDir: string): NodeJS.ProcessEnv => {
    const env: NodeJS.ProcessEnv = {
      ...sluiceEnv({ brokers, prefix, port, dataDir }),
      SLUICE_PORT: String(port),
      SLUICE_ADMIN_PORT: String(adminPort),
      SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
      SLUICE_LOG_LEVEL: 'warn',
    };
    delete env.SLUICE_MASTER_KEY; // the endpoints' secrets are sealed with the development key
    delete env.SLUICE_WORKERS;
    return env;
  };
  let sluice: Launched | null = null;
  const adminPids = new Set<number>();
  sampler = new ProcSampler(() => {
    const m = new Map<string, number[]>();
    if (kafkaPid) m.set('Kafka (java)', [kafkaPid]);
    m.set(
      'sluice start',
      sluice?.proc.pid && sluice.proc.exitCode === null && sluice.proc.signalCode === null
        ? processTree(sluice.proc.pid)
        : [],
    );
    m.set('sluice admin (CLI)', [...adminPids]);
    return m;
  });
  const phase = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    say(`\n== ${name}`);
    const window = sampler!.begin();
    const t = Date.now();
    const cpu0 = machineCpu();
    const self0 = process.cpuUsage();
    try {
      return await fn();
    } finally {
      const cpu1 = machineCpu();
      const self = process.cpuUsage(self0);
      phases.push({
        name,
        ms: Date.now() - t,
        usage: sampler!.end(window),
        parts: rssParts(sluice?.proc.exitCode === null ? sluice.proc.pid : undefined),
        heap: sluice?.proc.exitCode === null ? await heapParts(adminPort) : null,
        busyCores: ((cpu1.busy - cpu0.busy) / Math.max(1, cpu1.total - cpu0.total)) * cpus().length,
        selfCpuSec: (self.user + self.system) / 1e6,
      });
    }
  };

  /** Spawns `sluice start` and waits for /readyz 200; a start that exits is tried again on the same data dir. */
  const startSluice = async (what: string, logName: string, dataDir: string): Promise<number> => {
    for (let attempt = 1; attempt <= 3; attempt++) {
      const t = Date.now();
      const window = sampler!.begin();
      const nodeArgs = opt['sluice-node-args']!.split(' ').filter(Boolean);
      sluice = children.spawn(
        `sluice-${logName}`,
        SLUICE,
        ['start', '--workers', '1'],
        childEnv(dataDir),
        'sluice',
        nodeArgs,
      );
      const ready = await readyz(sluice, t + 900_000);
      const ms = Date.now() - t;
      const rssMb = sampler!.end(window).get('sluice start')?.peakRssMb ?? null;
      if (ready) {
        starts.push({ what, ms, rssMb, detail: attempt > 1 ? `attempt ${attempt}` : '' });
        say(`  ${what}: /readyz 200 after ${fmt(ms / 1000, 1)} s (peak RSS ${fmt(rssMb)} MiB)`);
        return ms;
      }
      const why = tail(sluice.log, 3).replace(/\s+/g, ' ').slice(0, 300);
      starts.push({ what, ms: null, rssMb, detail: `attempt ${attempt} exited after ${fmt(ms / 1000, 1)} s: ${why}` });
      notes.push(
        `${what}, attempt ${attempt}: \`sluice start\` exited after ${fmt(ms / 1000, 1)} s ` +
          `without becoming ready: ${why}`,
      );
      say(`  ${what}: attempt ${attempt} exited after ${fmt(ms / 1000, 1)} s: ${why}`);
    }
    throw new Error(`${what}: sluice start never became ready`);
  };
  /** Polls /readyz until 200 (true) or the process exits (false). */
  const readyz = async (c: Launched, deadline: number): Promise<boolean> => {
    for (;;) {
      if (c.proc.exitCode !== null || c.proc.signalCode !== null) return false;
      if (
        await fetch(`http://127.0.0.1:${adminPort}/readyz`).then(
          (r) => r.status === 200,
          () => false,
        )
      )
        return true;
      if (Date.now() > deadline) throw new Error(`sluice start: /readyz not 200 in time:\n${tail(c.log)}`);
      await sleep(50);
    }
  };
  /** SIGTERM → exit of the running `sluice start`, recorded with whether it had to force its exit. */
  const stopSluice = async (what: string): Promise<void> => {
    if (!sluice) return;
    const t = Date.now();
    await stop(sluice.proc);
    const ms = Date.now() - t;
    const forced = /shutdown did not finish/.test(readFileSync(sluice.log, 'utf8'));
    stops.push({ what, ms, forced });
    say(`  ${what}: exited ${fmt(ms)} ms after SIGTERM${forced ? ' (forced: "shutdown did not finish")' : ''}`);
  };
  /** `sluice admin create-client`: its credentials and how long it took. */
  const createClient = async (tenant: string, dataDir: string) => {
    const t = Date.now();
    const window = sampler!.begin();
    const c = children.spawn(
      `admin-${tenant}`,
      SLUICE,
      ['admin', 'create-client', '--tenant', tenant, '--role', 'admin', '--json'],
      childEnv(dataDir),
      'sluice',
    );
    adminPids.add(c.proc.pid!);
    const code = await c.exited;
    adminPids.delete(c.proc.pid!);
    const ms = Date.now() - t;
    const rssMb = sampler!.end(window).get('sluice admin (CLI)')?.peakRssMb ?? null;
    const line = readFileSync(c.log, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('{"client_id"'));
    if (code !== 0 || !line)
      return { ms, rssMb, credentials: null, error: tail(c.log, 4).replace(/\s+/g, ' ').slice(0, 300) };
    return { ms, rssMb, credentials: JSON.parse(line) as Credentials, error: '' };
  };
  const caller = async (tenant: string, credentials: Credentials) => {
    const c = new Caller(base, tenant, credentials);
    bench.onShutdown(() => c.close());
    await c.login();
    return c;
  };

  const get = async (c: Caller, path: string) => (await c.expect('GET', path)).ms;
  const dlqPath = (q: Record<string, string | number | null | undefined>) => {
    const set = Object.entries(q).flatMap(([k, v]) => (v === undefined || v === null ? [] : [[k, String(v)]]));
    return `/v1/webhooks/dlq?${new URLSearchParams(set)}`;
  };
  const rand = (n: number) => Math.floor(Math.random() * n);
  /** `n` timed GETs of `path(i)` after WARM_UP untimed ones. */
  const timeGets = async (c: Caller, path: (i: number) => string, n = N) => {
    await repeat(WARM_UP, (i) => get(c, path(i)));
    return repeat(n, (i) => get(c, path(i)));
  };
  /** A row of timeGets, held to p99 < `target` ms (none: not a target). */
  const timed = async (group: Row['group'], query: string, c: Caller, path: (i: number) => string, target = 10) =>
    row(group, query, await timeGets(c, path), target > 0 ? target : undefined);
  const EPS = '/v1/webhooks/endpoints?limit=100';
  const publish = async (c: Caller) => {
    const first = await c.expect('POST', '/v1/webhooks/events', {
      type: 'inference.completed',
      data: { warm: true, sent_at: Date.now() },
    });
    if (first.json.matched_endpoints !== 3)
      notes.push(`publish for ${c.tenant} matched ${first.json.matched_endpoints} endpoints, expected 3.`);
    await repeat(
      WARM_UP,
      async () =>
        (await c.expect('POST', '/v1/webhooks/events', { type: 'inference.completed', data: { sent_at: Date.now() } }))
          .ms,
    );
    return repeat(
      N,
      async (i) =>
        (
          await c.expect('POST', '/v1/webhooks/events', {
            type: 'inference.completed',
            data: { n: i, sent_at: Date.now() },
          })
        ).ms,
    );
  };
  /** Entries listed for a filter, counted through pages of 1,000. */
  const countListed = async (c: Caller, q: Record<string, string>) => {
    let n = 0;
    let cursor: string | null = null;
    do {
      const r = await c.expect('GET', dlqPath({ ...q, limit: 1000, cursor }));
      n += r.json.data.length;
      cursor = r.json.next_cursor;
    } while (cursor);
    return n;
  };

  const smallName = smallTenant(0);
  const dirBaseline = scratch.dataDir('data-baseline');
  const dirMain = scratch.dataDir('data');
  const fills: string[] = [];
  let creds: { big: Credentials; small: Credentials } | null = null;
  let baselinePublish: Stats | null = null;

  // 0. baseline: only the small tenants exist
  await phase('baseline (small tenants only)', async () => {
    const r = await fill(
      producers,
      topics.endpoints,
      plan.smallTenants * 3,
      (k) => endpointRecord(smallEndpoint(plan, masterKey, Math.floor(k / 3), k % 3)),
      "small tenants' endpoints",
      progress,
    );
    fills.push(
      `${fmt(plan.smallTenants * 3)} endpoints of ${fmt(plan.smallTenants)} small tenants in ${fmt(r.ms / 1000, 1)} s`,
    );
    await startSluice('baseline start (small tenants only, empty store)', 'baseline', dirBaseline);
    const [b, s] = [await createClient(BIG, dirBaseline), await createClient(smallName, dirBaseline)];
    if (!b.credentials || !s.credentials) throw new Error(`sluice admin create-client failed: ${b.error || s.error}`);
    creds = { big: b.credentials, small: s.credentials };
    const small = await caller(smallName, creds.small);
    baselinePublish = row(
      'publish',
      `baseline (before the fill): POST /v1/webhooks/events, ${smallName} (3 endpoints)`,
      await publish(small),
    );
    await timed('endpoints', `baseline: GET ${EPS}, ${smallName}`, small, () => EPS, 0);
    await small.close();
  });
  await stopSluice('baseline node, after its bench connections were closed');
  const { big: bigCreds, small: smallCreds } = creds!;

  // 1. fill
  await phase('fill', async () => {
    const e = await fill(
      producers,
      topics.endpoints,
      plan.bigEndpoints,
      (i) => endpointRecord(bigEndpoint(plan, masterKey, i)),
      "big's endpoints",
      progress,
    );
    fills.push(`${fmt(plan.bigEndpoints)} endpoints of \`big\` in ${fmt(e.ms / 1000, 1)} s (${fmt(e.perSec)}/s)`);
    const d = await fill(
      producers,
      topics.dlq,
      plan.dlq,
      (i) => dlqRecord(bigDlqEntry(plan, i)),
      "big's DLQ entries",
      progress,
    );
    fills.push(`${fmt(plan.dlq)} DLQ entries of \`big\` in ${fmt(d.ms / 1000, 1)} s (${fmt(d.perSec)}/s)`);
    const smallDlq = plan.smallTenants * plan.dlqPerSmall;
    await fill(
      producers,
      topics.dlq,
      smallDlq,
      (k) => dlqRecord(smallDlqEntry(plan, Math.floor(k / plan.dlqPerSmall), k % plan.dlqPerSmall)),
      "small tenants' DLQ entries",
      progress,
    );
    fills.push(`${fmt(smallDlq)} DLQ entries of the small tenants`);
  });

  // 2. a one-off CLI process against the filled state
  await phase('admin CLI (create-client) on the filled state', async () => {
    const r = await createClient(smallTenant(1), dirMain);
    starts.push({
      what: '`sluice admin create-client` on the filled state (builds its own views)',
      ms: r.credentials ? r.ms : null,
      rssMb: r.rssMb,
      detail: r.error,
    });
    say(`  sluice admin create-client: ${r.credentials ? 'ok' : `FAILED (${r.error})`} after ${fmt(r.ms / 1000, 1)} s`);
    if (!r.credentials)
      notes.push(
        `\`sluice admin create-client\` on the filled state failed after ${fmt(r.ms / 1000, 1)} s: ${r.error}`,
      );
  });

  // 3. cold start: an empty store, every view rebuilt from Kafka
  await phase('cold start', () =>
    startSluice('cold start (empty SLUICE_DATA_DIR: every view rebuilt)', 'cold', dirMain),
  );

  // 4. latency
  await phase('latency', async () => {
    const bigC = await caller(BIG, bigCreds);
    const small = await caller(smallName, smallCreds);
    const endpointCursor = (i: number) => {
      const e = bigEndpoint(plan, masterKey, i);
      return `${e.created_at}.${e.id}`;
    };
    row('endpoints', `big: first GET ${EPS} after start (sorts the tenant once)`, [await get(bigC, EPS)], 10);
    await timed('endpoints', `big: GET ${EPS}, first page`, bigC, () => EPS);
    const deep = () => `${EPS}&cursor=${endpointCursor(rand(plan.bigEndpoints))}`;
    await timed('endpoints', 'big: endpoints, deep page (random cursor)', bigC, deep);
    await timed('endpoints', `${smallName}: endpoints, first page`, small, () => EPS);
    const changed = await repeat(quick ? 10 : 20, async (r) => {
      const e = bigEndpoint(plan, masterKey, rand(plan.bigEndpoints));
      await producer.send(topics.endpoints, [
        endpointRecord({ ...e, metadata: { bench: 'state', round: r }, updated_at: Date.now() }),
      ]);
      await sleep(300); // the node's view has it by then
      return get(bigC, EPS);
    });
    row('endpoints', 'big: endpoints first page, right after one of its endpoints changed', changed, 10);

    // The DLQ of big
    const first = await bigC.expect('GET', dlqPath({ limit: 100 }));
    if (first.json.data.length !== 100 || first.json.data[0].id !== bigDlqPosition(plan, 0).id)
      notes.push(
        `big's first DLQ page is not the oldest 100 entries (got ${first.json.data.length}, ` +
          `first ${first.json.data[0]?.id}).`,
      );
    await timed('dlq', 'big: GET /v1/webhooks/dlq?limit=100, first page', bigC, () => dlqPath({ limit: 100 }));
    const walk: number[] = [];
    let cursor: string | null = null;
    let misplaced = 0;
    for (let page = 1; page <= WALK_PAGES; page++) {
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
    const anyDepth = () => cursorOf(bigDlqPosition(plan, rand(plan.dlq)));
    const anyPage = () => dlqPath({ limit: 100, cursor: anyDepth() });
    await timed('dlq', 'big: DLQ page at any depth (random cursor `<deadMs>.<id>`)', bigC, anyPage);
    const ep = (i: number) => bigEndpointId(i % plan.dlqEndpoints);
    const et = (i: number) => EVENT_TYPES[i % EVENT_TYPES.length];
    const filters: [string, (i: number) => Record<string, string>][] = [
      ['endpoint_id', (i) => ({ endpoint_id: ep(i) })],
      ['event_type', (i) => ({ event_type: et(i) })],
      ['endpoint_id + event_type', (i) => ({ endpoint_id: ep(i), event_type: et(rand(4)) })],
    ];
    for (const [name, f] of filters) {
      const want = f(7);
      const check = await bigC.expect('GET', dlqPath({ ...want, limit: 100 }));
      if (
        check.json.data.length !== 100 ||
        check.json.data.some((e: any) => Object.entries(want).some(([k, v]) => e[k] !== v))
      )
        notes.push(`filter ${name}: the first page did not hold 100 matching entries.`);
      await timed('dlq', `big: DLQ filtered by ${name}, first page`, bigC, (i) => dlqPath({ ...f(i), limit: 100 }));
      const deepFiltered = (i: number) => dlqPath({ ...f(i), limit: 100, cursor: anyDepth() });
      await timed('dlq', `big: DLQ filtered by ${name}, any depth (random cursor)`, bigC, deepFiltered);
    }
    await timed('dlq', `${smallName}: DLQ first page (${plan.dlqPerSmall} entries)`, small, () =>
      dlqPath({ limit: 100 }),
    );
    row('publish', `after the fill: POST /v1/webhooks/events, ${smallName} (3 endpoints)`, await publish(small));
    row(
      'metrics',
      `GET /metrics on the admin port (a Prometheus scrape: the DLQ gauge over ${fmt(plan.dlq)} entries)`,
      await repeat(quick ? 5 : 20, async () => {
        const t0 = performance.now();
        const res = await fetch(`http://127.0.0.1:${adminPort}/metrics`);
        if (!(await res.text()).includes('sluice_dlq_entries')) throw new Error('/metrics has no sluice_dlq_entries');
        return performance.now() - t0;
      }),
    );

    // Right after writes: a burst straight into Kafka, then list at once (oldest page and any depth, alternating).
    const afterWrites: number[] = [];
    const visibleAfter: number[] = [];
    for (let r = 0; r < WRITE_ROUNDS; r++) {
      const endpointId = `ep_writes_${r}`;
      const now = Date.now();
      const records = Array.from({ length: WRITE_BURST }, (_, k) =>
        dlqRecord(
          dlqEntry(
            `dlq_writes_${r}_${String(k).padStart(5, '0')}`,
            BIG,
            endpointId,
            'inference.failed',
            now,
            plan.entryBytes,
          ),
        ),
      );
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
          notes.push(
            `write round ${r}: only ${seen} of ${WRITE_BURST} entries listed 60 s after Kafka acknowledged them.`,
          );
          break;
        }
      }
    }
    row(
      'dlq-writes',
      `big: DLQ page (first / any depth) right after ${fmt(WRITE_BURST)} entries were written, ${WRITE_ROUNDS} rounds`,
      afterWrites,
      10,
    );
    const v = stats(visibleAfter);
    notes.push(
      `After each write burst of ${fmt(WRITE_BURST)} entries (${WRITE_ROUNDS} rounds), ` +
        `all of them were listed ${fmt(v.p50)} ms (median), ` +
        `${fmt(v.max)} ms (max) after Kafka acknowledged the write.`,
    );
  });

  // 5. dead-letter bursts through the dispatcher's OutcomeRecorder, from their own process
  const bursts: Burst[] = [];
  await phase('dead-letter bursts', async () => {
    const bigC = await caller(BIG, bigCreds);
    const writer = children.forkTs('burst-writer', join(ROOT, 'bench/state/burst-writer.ts'), [
      JSON.stringify({ brokers, prefix }),
    ]);
    await new Promise((r) => writer.proc.once('message', r));
    const call = rpc<BurstRequest, { writtenMs?: number }>(writer.proc);
    for (const [label, count, padBytes, endpointId] of [
      [`${fmt(DEAD_BURST)} dead letters of ~1 KB`, DEAD_BURST, 600, 'ep_burst_small'],
      [`${LARGE_BURST} dead letters of 256 KiB`, LARGE_BURST, LARGE_BYTES, 'ep_burst_large'],
    ] as const) {
      await call({ op: 'prepare', count, padBytes, tenant: BIG, endpointId });
      const t = Date.now();
      const written = call({ op: 'go' });
      const probe: number[] = [];
      let listed = 0;
      let listedMs: number | null = null;
      for (let countedAt = 0; Date.now() - t < 120_000; ) {
        probe.push(await get(bigC, dlqPath({ limit: 100 })));
        if (Date.now() - countedAt >= 200) {
          countedAt = Date.now();
          listed = await countListed(bigC, { endpoint_id: endpointId });
          if (listed >= count) {
            listedMs = Date.now() - t;
            break;
          }
        }
      }
      const writtenMs = (await written).writtenMs!;
      const s = row('dlq-writes', `big: DLQ first page while ${label} are written and applied`, probe, 10);
      bursts.push({ label, writtenMs, listedMs, listed, count, probe: s });
      say(
        `  ${label}: acknowledged by Kafka after ${fmt(writtenMs)} ms, ${fmt(listed)} listed after ${fmt(listedMs)} ms`,
      );
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
    const bigC = await caller(BIG, bigCreds);
    await timed('dlq', 'after the warm restart: big DLQ first page', bigC, () => dlqPath({ limit: 100 }));
    const anyPage = () => dlqPath({ limit: 100, cursor: cursorOf(bigDlqPosition(plan, rand(plan.dlq))) });
    await timed('dlq', 'after the warm restart: big DLQ any depth (random cursor)', bigC, anyPage);
  });
  await stopSluice('restarted node, at the end');

  // report
  const kafkaNote =
    `Kafka ${KAFKA_VERSION} ` +
    `${externalKafka ? `already running (${brokers.join(',')})` : 'started by the bench (`sluice kafka`)'}`;
  const section = report({ startedAt, load1, plan, fills, baselinePublish, bursts, warmMs, kafkaNote });
  say('');
  say(section);
  const resultsFile = opt.results ?? (quick ? null : join(ROOT, 'bench/RESULTS.md'));
  if (resultsFile) {
    writeMarkedSection(resultsFile, 'state', section);
    say(`\nwritten to ${resultsFile}`);
  } else say('\n(--quick: bench/RESULTS.md left alone; pass --results FILE to write the section)');
  return 0;
}

// ---------------------------------------------------------------- report

interface Burst {
  label: string;
  count: number;
  writtenMs: number;
  listedMs: number | null;
  listed: number;
  probe: Stats;
}

interface ReportInput {
  startedAt: Date;
  load1: number;
  plan: Plan;
  fills: string[];
  baselinePublish: Stats | null;
  bursts: Burst[];
  warmMs: number | null;
  kafkaNote: string;
}

const PROCS = ['Kafka (java)', 'sluice start', 'sluice admin (CLI)'];
const RSS_LIMIT_MB = 256;

function report(r: ReportInput): string {
  const command = bench.command('bench:state');
  const ms = (x: number) => fmt(x, x < 10 ? 2 : 1);
  const peak = (proc: string) => {
    let best: { mb: number; phase: string } = { mb: 0, phase: '—' };
    for (const p of phases) {
      const mb = p.usage.get(proc)?.peakRssMb ?? 0;
      if (mb > best.mb) best = { mb, phase: p.name };
    }
    return best;
  };
  const worst = (pick: (row: Row) => boolean) =>
    rows.filter(pick).reduce<Row | null>((a, b) => (a === null || b.s.p99 > a.s.p99 ? b : a), null);
  const p99Line = (w: Row | null) => (w ? `worst p99 ${ms(w.s.p99)} ms (${w.query}, n=${w.s.n})` : 'not measured');
  const sluicePeak = peak('sluice start');
  const adminPeak = peak('sluice admin (CLI)');
  const anonMax = phases.reduce<{ anon: number; phase: string } | null>(
    (a, p) => (p.parts && (a === null || p.parts.anon > a.anon) ? { anon: p.parts.anon, phase: p.name } : a),
    null,
  );
  const dlqWorst = worst((x) => x.group === 'dlq');
  const writesWorst = worst((x) => x.group === 'dlq-writes');
  const epWorst = worst((x) => x.group === 'endpoints' && x.target !== undefined);
  const epSteady = worst((x) => x.group === 'endpoints' && x.target !== undefined && x.s.n >= 100);
  const after = rows.find((x) => x.query.startsWith('after the fill: POST'))?.s ?? null;
  const before = r.baselinePublish;
  const independent = after && before ? after.p50 <= before.p50 * 1.5 + 1 && after.p99 <= before.p99 * 1.5 + 1 : null;

  const targets = [
    '| target | measured | verdict |',
    '|---|---|---|',
    `| \`sluice start\` < ${RSS_LIMIT_MB} MiB RSS | ` +
      `peak ${fmt(sluicePeak.mb)} MiB (${sluicePeak.phase}) | ` +
      `${verdict(sluicePeak.mb || null, RSS_LIMIT_MB, 'MiB')} |`,
    `| (for comparison) \`sluice start\` anonymous RSS only: heap, stacks ` +
      `and SQLite's cache, without file-backed pages (code) | ` +
      `${anonMax ? `${fmt(anonMax.anon)} MiB at the end of ${anonMax.phase}` : '—'} (read at ` +
      `phase ends, not sampled) | ${verdict(anonMax?.anon ?? null, RSS_LIMIT_MB, 'MiB')} |`,
    `| \`sluice admin\` CLI < ${RSS_LIMIT_MB} MiB RSS | ` +
      `peak ${fmt(adminPeak.mb)} MiB (${adminPeak.phase}) | ` +
      `${verdict(adminPeak.mb || null, RSS_LIMIT_MB, 'MiB')} |`,
    `| DLQ list p99 < 10 ms at any depth and with filters | ${p99Line(dlqWorst)} | ` +
      `${verdict(dlqWorst?.s.p99 ?? null, 10, 'ms')} |`,
    `| DLQ list p99 < 10 ms right after writes | ${p99Line(writesWorst)} | ` +
      `${verdict(writesWorst?.s.p99 ?? null, 10, 'ms')} |`,
    `| endpoint list p99 < 10 ms | steady: ${p99Line(epSteady)}; all: ${p99Line(epWorst)} | ` +
      `steady ${verdict(epSteady?.s.p99 ?? null, 10, 'ms')}; ` +
      `all ${verdict(epWorst?.s.p99 ?? null, 10, 'ms')} |`,
    `| restart to ready < 5 s | warm restart ` +
      `${r.warmMs === null ? '—' : `${fmt(r.warmMs / 1000, 2)} s`} | ` +
      `${verdict(r.warmMs === null ? null : r.warmMs / 1000, 5, 's')} |`,
    `| publish latency independent of \`big\`'s endpoints (after-fill p50 and p99 within ` +
      `1.5× + 1 ms of the baseline) | p50/p99 ` +
      `${after ? `${ms(after.p50)}/${ms(after.p99)}` : '—'} ms vs baseline ` +
      `${before ? `${ms(before.p50)}/${ms(before.p99)}` : '—'} ms | ` +
      `${independent === null ? 'not measured' : independent ? 'met' : '**MISSED**'} |`,
  ];
  const startRows = starts.map(
    (x) =>
      `| ${x.what} | ${x.ms === null ? 'not ready' : `${fmt(x.ms / 1000, 2)} s`} | ` +
      `${fmt(x.rssMb)} MiB | ${x.detail || '—'} |`,
  );
  const latencyRows = rows.map((x) => {
    const v = x.target === undefined ? '—' : x.s.p99 < x.target ? 'met' : `**missed** (+${ms(x.s.p99 - x.target)} ms)`;
    return `| ${x.query} | ${fmt(x.s.n)} | ${ms(x.s.p50)} | ${ms(x.s.p99)} | ${ms(x.s.max)} | ${v} |`;
  });
  const burstRows = r.bursts.map(
    (b) =>
      `| ${b.label} | ${fmt(b.writtenMs)} ms | ` +
      `${b.listedMs === null ? 'not within 120 s' : `${fmt(b.listedMs)} ms`} | ` +
      `${fmt(b.listed)} / ${fmt(b.count)} | ${ms(b.probe.p50)} / ${ms(b.probe.p99)} / ` +
      `${ms(b.probe.max)} (n=${b.probe.n}) |`,
  );
  const phaseRows = phases.map((p) => {
    const cells = PROCS.map((name) => {
      const u = p.usage.get(name);
      if (!u || u.peakRssMb === 0) return '—';
      // A process that exited within the phase (the CLI) has no CPU reading left in /proc.
      return name === 'sluice admin (CLI)'
        ? `${fmt(u.peakRssMb)} MiB`
        : `${fmt(u.peakRssMb)} MiB · ${fmt(u.cpuSec, 1)} s`;
    });
    const heap = p.heap
      ? ` (V8 heap ${fmt(p.heap.used)} used of ${fmt(p.heap.total)}, external ${fmt(p.heap.external)})`
      : '';
    const parts = p.parts ? `${fmt(p.parts.anon)} + ${fmt(p.parts.file)} MiB${heap}` : '—';
    const ours =
      ['Kafka (java)', 'sluice start'].reduce((n, name) => n + (p.usage.get(name)?.cpuSec ?? 0), p.selfCpuSec) /
      (p.ms / 1000);
    return (
      `| ${p.name} | ${fmt(p.ms / 1000, 1)} s | ${cells.join(' | ')} | ${parts} | ` +
      `${fmt(p.busyCores, 2)} / ${fmt(Math.max(0, p.busyCores - ours), 2)} |`
    );
  });
  const { plan } = r;
  return [
    `### State at scale: ${r.startedAt.toISOString().slice(0, 10)}`,
    '',
    `Command: \`${command}\``,
    '',
    `Sluice measured: commit ${measuredCommit(ROOT)}.`,
    '',
    `Machine: ${machineLine()}; ${r.kafkaNote}; ${r.startedAt.toISOString()}; ` +
      `1-min load average at start ${fmt(r.load1, 2)} (the machine is shared).`,
    '',
    `State, written straight into Kafka with \`DurableProducer\` (acks=all; ` +
      `3 producers side by side), not through the API: ` +
      `tenant \`big\` with ${fmt(plan.bigEndpoints)} endpoints and ${fmt(plan.dlq)} DLQ ` +
      `entries of ~${fmt(plan.entryBytes)} B (over ${plan.dlqEndpoints} endpoints × ` +
      `${EVENT_TYPES.length} event types, dead-lettered evenly over the last 6 days); ` +
      `${fmt(plan.smallTenants)} small tenants with 3 endpoints and ${plan.dlqPerSmall} DLQ ` +
      `entries each. Fill: ${r.fills.join('; ')}.`,
    '',
    `Processes: Kafka, \`sluice start --workers 1\` (one process: ingress + dispatcher, ` +
      `its own SLUICE_DATA_DIR), \`sluice admin create-client\`, ` +
      `the benches' receiver (the endpoints' target), ` +
      `and for the bursts a writer process; this process fills Kafka and measures. Latency: ` +
      `sequential requests over one keep-alive connection, ` +
      `from sending to the last byte of the body; ${N} per row after ${WARM_UP} untimed ` +
      `warm-up requests unless n says otherwise. RSS: ` +
      `VmRSS from /proc every 500 ms (harness/proc-cpu.ts); ` +
      `for Sluice it includes its file-backed pages (code: the view store is read with pread, ` +
      `not mapped), shown apart in the resources table.`,
    '',
    '#### Targets',
    '',
    ...targets,
    '',
    '#### Start times',
    '',
    '| start | spawn → /readyz 200 | peak RSS | note |',
    '|---|---:|---:|---|',
    ...startRows,
    '',
    '| stop of `sluice start` | SIGTERM → exit |',
    '|---|---:|',
    ...stops.map(
      (x) => `| ${x.what} | ${fmt(x.ms)} ms${x.forced ? ' (forced exit: "shutdown did not finish")' : ''} |`,
    ),
    '',
    '#### Latency (ms)',
    '',
    '| query | n | p50 | p99 | max | p99 < 10 ms |',
    '|---|---:|---:|---:|---:|---|',
    ...latencyRows,
    '',
    '#### Dead-letter bursts',
    '',
    `Written through the dispatcher's own path: \`deadLetterEntry\` builds each entry, ` +
      `and all of them are handed at once to \`OutcomeRecorder.record\` ` +
      `(dispatcher/record.ts), which gathers them into one \`DurableProducer.send\` to the DLQ ` +
      `topic; from a separate process. "Kafka ack": until every record() resolved. ` +
      `"All listed": until the DLQ list, filtered by the burst's endpoint and paged by 1,000, ` +
      `counted them all; meanwhile big's first DLQ page was requested back to back.`,
    '',
    '| burst | Kafka ack | all listed after | listed / written | first page during it: p50 / p99 / max ms |',
    '|---|---:|---:|---:|---:|',
    ...burstRows,
    '',
    '#### Resources per phase',
    '',
    `Each cell: peak RSS · CPU seconds (user + system) in the phase (the CLI: ` +
      `peak RSS only). "sluice anon + file": \`sluice start\`'s RSS at the end of the phase, ` +
      `anonymous (heap, stacks, SQLite's cache) + file-backed (code). "machine busy": ` +
      `cores busy on average over the phase (/proc/stat, ` +
      `of ${cpus().length}) / of which not Kafka, \`sluice start\` or this orchestrator (other ` +
      `users of the machine, the CLI and the bench helpers).`,
    '',
    `| phase | duration | ${PROCS.join(' | ')} | sluice anon + file | machine busy / others |`,
    `|---|---:|${PROCS.map(() => '---:').join('|')}|---:|---:|`,
    ...phaseRows,
    ...(notes.length ? ['', '#### Notes', '', ...notes.map((n) => `- ${n}`)] : []),
  ].join('\n');
}

bench.run(main);
