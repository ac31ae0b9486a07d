/**
 * `npm run soak -- --minutes 10`: publish and delivery at a steady rate (default 2,000 events/s,
 * about half of this 2-core machine's saturated rate, bench/RESULTS.md) for N minutes while
 * faults come on a schedule: a dispatcher SIGKILLed and replaced every 90 s, the broker stopped
 * for 30 s every 4 minutes. Kafka, `sluice start` and two `sluice dispatcher`s are separate
 * processes; the publisher and the receiver (which counts unique event ids) run here.
 *
 * Every 30 s it prints events in, refused (503), delivered, dead-lettered, duplicates, p99
 * publish→receipt and the RSS of every process; at the end it waits for the backlog to drain and
 * exits 1 if any accepted event was neither delivered nor dead-lettered.
 *
 *   npm run soak -- [--minutes 10] [--rate 2000] [--outage-s 30]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { loadConfig } from '../core/config.ts';
import { startLocalKafka } from '../core/kafka/local-broker.ts';
import { Scratch } from '../harness/scratch.ts';
import { freePort, freePorts } from '../core/net/free-port.ts';
import { PROJECT_ROOT } from '../core/paths.ts';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    rate: { type: 'string', default: '2000' },
    'outage-s': { type: 'string', default: '30' },
  },
});
const MINUTES = Number(values.minutes);
const RATE = Number(values.rate);
const OUTAGE_MS = Number(values['outage-s']) * 1000;
const root = PROJECT_ROOT;
const say = (line: string) => process.stdout.write(`${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// Kafka of its own, so the broker restarts harm nothing else. Its data and the view stores of
// every Sluice process live in a scratch directory removed on exit, however the run ends.
const scratch = new Scratch('soak');
const kafka = await startLocalKafka({
  cacheDir: loadConfig({}).cacheDir,
  port: await freePorts(2),
  dataDir: scratch.kafkaDir(),
  fresh: true,
});
const env = {
  ...process.env,
  KAFKA_BROKERS: kafka.brokers.join(','),
  SLUICE_TOPIC_PREFIX: `soak-${Date.now().toString(36)}`,
  SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
  SLUICE_LOG_LEVEL: 'error',
  SLUICE_HOST: '127.0.0.1',
  SLUICE_DATA_DIR: scratch.dataDir(),
};

// The receiver: first receipt per event id, duplicates, latency from the publish time in the event.
const seen = new Set<string>();
let receipts = 0;
let window: number[] = [];
const receiver = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString()) as { id: string; type: string; data: { at?: number } };
    res.writeHead(body.type === 'ping' ? 200 : 204).end();
    if (body.type === 'ping') return;
    receipts++;
    if (!seen.has(body.id)) {
      seen.add(body.id);
      window.push(Date.now() - (body.data.at ?? Date.now()));
    }
  });
});
await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));

const procs = new Map<string, ChildProcess>();
scratch.onSignal(async () => {
  for (const c of procs.values()) c.kill('SIGTERM');
  await sleep(3000);
  for (const c of procs.values()) if (c.exitCode === null) c.kill('SIGKILL');
  await kafka.stop();
});
function launch(name: string, args: string[], extra: Record<string, string> = {}): Promise<void> {
  const child = spawn(process.execPath, ['bin/sluice.js', ...args], {
    cwd: root,
    env: { ...env, ...extra },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  procs.set(name, child);
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => /Sluice is up|dispatcher running/.test(d.toString()) && resolve());
    child.once('exit', (code) => reject(new Error(`${name} exited (${code})`)));
  });
}
const port = await freePort();
const adminPort = await freePort();
await launch('sluice', ['start', '--workers', '1'], {
  SLUICE_PORT: String(port),
  SLUICE_ADMIN_PORT: String(adminPort),
  SLUICE_ISSUER: `http://127.0.0.1:${port}`,
});
let dispatchers = 0;
const startDispatcher = () => launch(`dispatcher-${++dispatchers}`, ['dispatcher'], { SLUICE_ADMIN_PORT: '0' });
await Promise.all([startDispatcher(), startDispatcher()]);
const base = `http://127.0.0.1:${port}`;

async function post(path: string, body: unknown, token?: string): Promise<{ status: number; json: any }> {
  const res = await request(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  return { status: res.statusCode, json: await res.body.json().catch(() => null) };
}
const client = await new Promise<{ client_id: string; client_secret: string }>((resolve, reject) => {
  const c = spawn(
    process.execPath,
    ['bin/sluice.js', 'admin', 'create-client', '--tenant', 'soak', '--role', 'admin', '--json'],
    { cwd: root, env, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  c.stdout!.on('data', (d) => (out += d));
  c.once('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error('create-client failed'))));
});
let token = '';
const refreshToken = async () => {
  token = (await post('/v1/auth/token', { grant_type: 'client_credentials', ...client })).json.access_token;
};
await refreshToken();
const tokenTimer = setInterval(() => void refreshToken().catch(() => {}), 5 * 60_000);
const ep = await post(
  '/v1/webhooks/endpoints',
  { url: `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`, events: ['inference.completed'] },
  token,
);
if (ep.status !== 201) throw new Error(`endpoint registration failed: ${ep.status}`);

// The publisher: batches of 50 at the rate asked; only acknowledged items count as accepted.
const accepted = new Set<string>();
let refused = 0;
const unexpected = new Map<number, number>();
let n = 0;
let publishing = true;
const BATCH = 50;
const publisher = (async () => {
  const every = (1000 * BATCH) / RATE;
  let next = Date.now();
  const inflight = new Set<Promise<void>>();
  while (publishing) {
    const events = Array.from({ length: BATCH }, () => ({
      type: 'inference.completed',
      id: `s-${n++}`,
      data: { at: Date.now() },
    }));
    const p = post('/v1/webhooks/events/batch', { events }, token).then(
      (res) => {
        if (res.status === 202) for (const r of res.json.results) r.id ? accepted.add(r.id) : refused++;
        else if (res.status === 503) refused += BATCH;
        else unexpected.set(res.status, (unexpected.get(res.status) ?? 0) + 1);
      },
      () => {
        refused += BATCH;
      },
    );
    inflight.add(p);
    void p.finally(() => inflight.delete(p));
    next += every;
    await sleep(Math.max(0, next - Date.now()));
    while (inflight.size > 64) await Promise.race(inflight);
  }
  await Promise.all(inflight);
})();

function rssMb(pid: number | undefined): number {
  try {
    return Math.round(Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024);
  } catch {
    return 0;
  }
}
/** Entries in the tenant's DLQ (what every dispatcher dead-lettered, killed ones included). */
async function deadLettered(): Promise<number> {
  let count = 0;
  let cursor = '';
  for (;;) {
    const res = await request(`${base}/v1/webhooks/dlq?limit=1000${cursor ? `&cursor=${cursor}` : ''}`, {
      headers: { authorization: `Bearer ${token}` },
    }).catch(() => null);
    if (res?.statusCode !== 200) return count;
    const page = (await res.body.json()) as { data: unknown[]; next_cursor: string | null };
    count += page.data.length;
    if (!page.next_cursor) return count;
    cursor = encodeURIComponent(page.next_cursor);
  }
}
const p99 = (xs: number[]) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)] : 0);
const started = Date.now();
async function report(phase: string) {
  const rss = [...procs]
    .filter(([, c]) => c.exitCode === null)
    .map(([name, c]) => `${name} ${rssMb(c.pid)}`)
    .join(', ');
  say(
    `${((Date.now() - started) / 1000).toFixed(0).padStart(5)} s ${phase.padEnd(10)} in ${accepted.size}, ` +
      `refused ${refused}, delivered ${seen.size}, dead-lettered ${await deadLettered()}, ` +
      `duplicates ${receipts - seen.size}, p99 ${p99(window)} ms | ` +
      `RSS MB: ${rss}, receiver+publisher ${rssMb(process.pid)}`,
  );
  window = [];
}

// The fault schedule.
const reporter = setInterval(() => void report('running'), 30_000);
const end = started + MINUTES * 60_000;
let nextKill = started + 90_000;
let nextOutage = started + 240_000;
while (Date.now() < end) {
  await sleep(1000);
  if (Date.now() >= nextKill) {
    nextKill += 90_000;
    const victim = [...procs.keys()].find((k) => k.startsWith('dispatcher-') && procs.get(k)!.exitCode === null);
    if (victim) {
      say(`  fault: SIGKILL ${victim}; a new dispatcher joins`);
      procs.get(victim)!.kill('SIGKILL');
      procs.delete(victim);
      void startDispatcher().catch((e) => say(`  ${e.message}`));
    }
  }
  if (Date.now() >= nextOutage && Date.now() + OUTAGE_MS < end) {
    nextOutage += 240_000;
    say(`  fault: the broker stops for ${OUTAGE_MS / 1000} s`);
    await kafka.nodes[0].stop();
    await sleep(OUTAGE_MS);
    await kafka.nodes[0].start();
    say('  fault: the broker is back');
  }
}
publishing = false;
await publisher;
clearInterval(reporter);
say(`publishing stopped after ${MINUTES} min; waiting for the backlog to drain (5 min at most)`);
const drainEnd = Date.now() + 5 * 60_000;
let dead = await deadLettered();
while (Date.now() < drainEnd && seen.size + dead < accepted.size) {
  await sleep(2000);
  dead = await deadLettered();
}
await report('drained');
const lost = [...accepted].filter((id) => !seen.has(id)).length - dead;
say(
  `\nsoak: ${MINUTES} min at ${RATE} events/s: events in ${accepted.size}, refused (503) ${refused}, ` +
    `delivered ${seen.size}, dead-lettered ${dead}, lost ${Math.max(0, lost)}, duplicates ${receipts - seen.size}` +
    `${unexpected.size ? `, unexpected statuses ${JSON.stringify([...unexpected])}` : ''}`,
);

clearInterval(tokenTimer);
for (const c of procs.values()) c.kill('SIGTERM');
await sleep(3000);
for (const c of procs.values()) if (c.exitCode === null) c.kill('SIGKILL');
receiver.close();
await kafka.stop();
process.exit(lost > 0 || unexpected.size > 0 ? 1 : 0);
