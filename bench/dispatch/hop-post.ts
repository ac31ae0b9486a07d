/**
 * Hop ceiling of bench:dispatch, its own process: webhook POSTs signed as the dispatcher signs them, from
 * this one process straight to the receiver's ports over undici keep-alive pools, `connections` in flight.
 * No Kafka, no Sluice; the bench counts the deliveries at the receiver. Spec: argv[2] (JSON); answers over IPC.
 */
import { randomBytes } from 'node:crypto';
import { Pool } from 'undici';
import { signDelivery } from '../../outbound/signing.ts';

export interface HopPostSpec {
  ports: number[];
  connections: number;
  posts: number;
  padBytes: number;
}
export interface HopPostResult {
  startedAt: number;
  failed: number;
}

const spec = JSON.parse(process.argv[2]) as HopPostSpec;
const tag = randomBytes(4).toString('hex');
const pad = 'x'.repeat(spec.padBytes);
// Worker w posts to port w % ports: a pool opens at most as many connections as its workers have in flight.
const perPort = Math.ceil(spec.connections / spec.ports.length);
const options = { connections: perPort, pipelining: 1, keepAliveTimeout: 60_000 };
const pools = spec.ports.map((port) => new Pool(`http://127.0.0.1:${port}`, options));

const result: HopPostResult = { startedAt: Date.now(), failed: 0 };
let next = 0;
async function worker(pool: Pool): Promise<void> {
  while (next < spec.posts) {
    const seq = next++;
    const now = Date.now();
    const data = { sent_at: now, seq, pad };
    const event = { id: `hop-${tag}-${seq}`, type: 'inference.completed', tenant_id: 'bench', data, created_at: now };
    const { headers, rawBody } = signDelivery('whsec_bench_hop', event, 1, now);
    try {
      const res = await pool.request({ path: '/hook', method: 'POST', headers, body: rawBody });
      await res.body.dump();
      if (res.statusCode < 200 || res.statusCode >= 300) result.failed++;
    } catch {
      result.failed++;
    }
  }
}
await Promise.all(Array.from({ length: spec.connections }, (_, w) => worker(pools[w % pools.length])));
await Promise.all(pools.map((p) => p.close()));
process.send!(result, () => process.exit(0));
