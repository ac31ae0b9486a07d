/**
 * Dispatcher throughput and latency, end to end on a real Kafka: events published through
 * `POST /v1/webhooks/events`, fanned out, signed and delivered to a local node:http receiver that
 * answers 204. Reports events/s from the first publish to the last 2xx, and p50/p99 of
 * publish-to-receipt latency (publish = the moment the POST was sent).
 *
 * Three rounds in one run, side by side: a baseline that POSTs signed bodies straight to the
 * receiver (the ceiling without Kafka), then publishes without an id (one Kafka write each), then
 * with an id (the idempotent path: claim + event + published marker).
 *
 *   KAFKA_BROKERS=127.0.0.1:9092 node bin/run-ts.js bench/dispatcher.ts [--events 5000] [--concurrency 32]
 */
import { createServer } from 'node:http';
import { randomBytes } from 'node:crypto';
import { cpus, totalmem } from 'node:os';
import { loadConfig } from '../core/config.ts';
import { createClient } from '../core/clients/provisioning.ts';
import { startNode } from '../cli/assemble.ts';
import { Scratch } from './harness/scratch.ts';
import { signDelivery } from '../outbound/signing.ts';
import { fetchToken } from '../test/helpers/sluice.ts';

const arg = (name: string, def: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const EVENTS = arg('events', 5000);
const CONCURRENCY = arg('concurrency', 32);
const brokersEnv = process.env.KAFKA_BROKERS;
if (!brokersEnv) {
  console.error(
    'KAFKA_BROKERS is not set: start one with `node bin/sluice.js kafka --port 9092` and ' +
      'pass KAFKA_BROKERS=127.0.0.1:9092',
  );
  process.exit(2);
}
const brokers = brokersEnv.split(',');

const received = new Map<string, number>();
let done: () => void = () => {};
const receiver = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const at = performance.now();
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: string; type: string };
    res.writeHead(body.type === 'ping' ? 200 : 204).end();
    if (body.type !== 'ping' && !received.has(body.id)) {
      received.set(body.id, at);
      if (received.size === EVENTS) done();
    }
  });
});
await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
const receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;

// The node's view stores go to a scratch directory removed on exit.
const scratch = new Scratch('bench-dispatcher');
const config = loadConfig({
  ...process.env,
  SLUICE_DATA_DIR: scratch.dataDir(),
  SLUICE_TOPIC_PREFIX: `bench-${randomBytes(4).toString('hex')}`,
  SLUICE_PORT: '0',
  SLUICE_ADMIN_PORT: '0',
  SLUICE_HOST: '127.0.0.1',
  SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
  SLUICE_LOG_LEVEL: 'error',
});
const node = await startNode(config, { brokers, ingress: true, dispatcher: true });
scratch.onSignal(() => node.close());
const base = `http://127.0.0.1:${node.ingress!.port}`;
const client = await createClient(node.ctx, { tenant: 'bench', role: 'admin' });
const token = await fetchToken(base, client);
const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
const reg = await fetch(`${base}/v1/webhooks/endpoints`, {
  method: 'POST',
  headers: auth,
  body: JSON.stringify({ url: receiverUrl, events: ['*'] }),
});
if (reg.status !== 201) throw new Error(`registration failed: ${reg.status} ${await reg.text()}`);

const sentAt = new Map<string, number>();

type Mode = 'direct' | 'no-id' | 'id';

async function round(mode: Mode): Promise<string> {
  received.clear();
  sentAt.clear();
  const finished = new Promise<void>((r) => (done = r));
  let next = 0;
  const tag = randomBytes(3).toString('hex');
  const t0 = performance.now();
  async function publisher(): Promise<void> {
    while (next < EVENTS) {
      const i = next++;
      const started = performance.now();
      const data = { i, pad: 'x'.repeat(200) };
      if (mode === 'direct') {
        const id = `direct-${tag}-${i}`;
        sentAt.set(id, started);
        const signed = signDelivery(
          'whsec_bench',
          { id, type: 'inference.completed', tenant_id: 'bench', data, created_at: Date.now() },
          1,
          Date.now(),
        );
        const res = await fetch(receiverUrl, { method: 'POST', headers: signed.headers, body: signed.rawBody });
        await res.arrayBuffer();
        continue;
      }
      const res = await fetch(`${base}/v1/webhooks/events`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({
          type: 'inference.completed',
          data,
          ...(mode === 'id' ? { id: `bench-${tag}-${i}` } : {}),
        }),
      });
      if (res.status !== 202) throw new Error(`publish failed: ${res.status} ${await res.text()}`);
      sentAt.set(((await res.json()) as { id: string }).id, started);
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, publisher));
  const publishedIn = performance.now() - t0;
  await Promise.race([
    finished,
    new Promise((_, rej) =>
      setTimeout(() => rej(new Error(`only ${received.size}/${EVENTS} delivered within 120 s`)), 120_000),
    ),
  ]);
  const total = Math.max(...received.values()) - t0;
  const lat = [...received].map(([id, at]) => at - sentAt.get(id)!).sort((a, b) => a - b);
  const pct = (p: number) => lat[Math.min(lat.length - 1, Math.floor((p / 100) * lat.length))].toFixed(1);
  const label = {
    direct: 'baseline: signed POST straight to the receiver',
    'no-id': 'Sluice: publish without id → Kafka → delivery',
    id: 'Sluice: publish with id (idempotent) → delivery',
  }[mode];
  return (
    `| ${label} | ${(EVENTS / (publishedIn / 1000)).toFixed(0)} | ` +
    `${(EVENTS / (total / 1000)).toFixed(0)} | ${pct(50)} | ${pct(99)} | ` +
    `${lat[lat.length - 1].toFixed(1)} |`
  );
}

console.log(
  `command: KAFKA_BROKERS=${brokersEnv} node bin/run-ts.js bench/dispatcher.ts --events ` +
    `${EVENTS} --concurrency ${CONCURRENCY}`,
);
console.log(
  `machine: ${cpus().length} cores (${cpus()[0]?.model ?? '?'}), ` +
    `${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}; ` +
    `one process runs ingress + dispatcher, Kafka on the same host`,
);
console.log(
  `${EVENTS} events per round by ${CONCURRENCY} concurrent clients, 1 endpoint, node:http receiver answering 204\n`,
);
console.log('| round | accepted/s | end to end events/s | p50 ms | p99 ms | max ms |');
console.log('|---|---:|---:|---:|---:|---:|');
for (const mode of ['direct', 'no-id', 'id'] as const) console.log(await round(mode));
await node.close();
receiver.close();
process.exit(0);
