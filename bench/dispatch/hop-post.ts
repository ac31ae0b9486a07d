/**
 * Hop ceiling 1 of the dispatch bench, its own process: signed webhook POSTs (signDelivery, as
 * the dispatcher signs them) from one Node process straight to the receiver over undici keep-alive
 * pools, `connections` in flight spread over the endpoint ports. No Kafka, no Sluice: what one
 * sender process and the receiver can do. The orchestrator counts the deliveries at the receiver.
 *
 *   spec (argv[2], JSON): HopPostSpec; answers one HopPostResult over IPC and exits.
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
  endedAt: number;
  ok: number;
  failed: number;
}

const spec = JSON.parse(process.argv[2]) as HopPostSpec;
const tag = randomBytes(4).toString('hex');
const pad = 'x'.repeat(spec.padBytes);
// Worker w posts to port w % ports, so each port's pool gets its share of the connections.
const share = (i: number) =>
  Math.floor(spec.connections / spec.ports.length) + (i < spec.connections % spec.ports.length ? 1 : 0);
const pools = spec.ports.map(
  (port, i) =>
    new Pool(`http://127.0.0.1:${port}`, {
      connections: Math.max(1, share(i)),
      pipelining: 1,
      keepAliveTimeout: 60_000,
    }),
);

const result: HopPostResult = { startedAt: Date.now(), endedAt: 0, ok: 0, failed: 0 };
let next = 0;
async function worker(w: number): Promise<void> {
  const pool = pools[w % pools.length];
  while (next < spec.posts) {
    const seq = next++;
    const now = Date.now();
    const signed = signDelivery(
      'whsec_bench_hop',
      {
        id: `hop-${tag}-${seq}`,
        type: 'inference.completed',
        tenant_id: 'bench',
        data: { sent_at: now, seq, pad },
        created_at: now,
      },
      1,
      now,
    );
    try {
      const res = await pool.request({ path: '/hook', method: 'POST', headers: signed.headers, body: signed.rawBody });
      await res.body.dump();
      if (res.statusCode >= 200 && res.statusCode < 300) result.ok++;
      else result.failed++;
    } catch {
      result.failed++;
    }
  }
}
await Promise.all(Array.from({ length: spec.connections }, (_, w) => worker(w)));
result.endedAt = Date.now();
await Promise.all(pools.map((p) => p.close()));
process.send!(result, () => process.exit(0));
