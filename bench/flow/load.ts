/**
 * The load generator of the flow-control bench, its own process (forked with IPC by
 * bench/flow-control.ts), one keep-alive pool to the ingress:
 *   flood:   several event types at once, each `events` events in batches (`POST /v1/webhooks/events/batch`),
 *            `connections` batches of a type in flight at once, each event's data carrying `sent_at`;
 *   ordered: `keys` × `perKey` events with `ordering_key`, data `{key, seq, sent_at}`, from one
 *            sequential stream of batches in seq-major order (a key's events in seq order, every
 *            batch acknowledged before the next is sent), paced at `rate` events/s or as fast as accepted.
 */
import { Pool } from 'undici';
import { serve } from '../harness/ipc.ts';
import { bump, tokenFor } from '../harness/load-http.ts';
import type { FloodSpec, FlowLoadRequest, OrderedResult, OrderedSpec, StreamResult } from './ipc.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Item {
  type: string;
  data: unknown;
  ordering_key?: string;
}

/** One batch request; counts its statuses into `out` and returns the ids accepted (null for a refused item). */
async function publish(pool: Pool, token: string, events: Item[], out: StreamResult): Promise<(string | null)[]> {
  out.sent += events.length;
  if (out.firstSentAt === 0) out.firstSentAt = Date.now();
  try {
    const res = await pool.request({
      path: '/v1/webhooks/events/batch',
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ events }),
    });
    const body = (await res.body.json()) as { results?: { id?: string; error?: { code?: string } }[] };
    bump(out.statuses, res.statusCode);
    out.lastAnsweredAt = Date.now();
    if (res.statusCode !== 200 && res.statusCode !== 202) return events.map(() => null);
    return (body.results ?? []).map((r) => {
      if (typeof r.id === 'string' && !r.error) {
        out.accepted++;
        return r.id;
      }
      bump(out.statuses, `item:${r.error?.code ?? 'unknown'}`);
      return null;
    });
  } catch (err) {
    bump(out.statuses, `error:${(err as { code?: string }).code ?? 'unknown'}`);
    return events.map(() => null);
  }
}

const newResult = (type: string): StreamResult => ({
  type,
  sent: 0,
  accepted: 0,
  statuses: {},
  firstSentAt: 0,
  lastAnsweredAt: 0,
});

async function flood(spec: FloodSpec): Promise<StreamResult[]> {
  const connections = spec.streams.reduce((n, s) => n + s.connections, 0);
  const pool = new Pool(spec.base, { connections, keepAliveTimeout: 60_000 });
  try {
    const token = await tokenFor(pool, spec.clientId, spec.clientSecret);
    return await Promise.all(
      spec.streams.map(async (s) => {
        const out = newResult(s.type);
        let next = 0;
        const worker = async () => {
          for (;;) {
            const from = next;
            if (from >= s.events) return;
            next = Math.min(s.events, from + s.batch);
            const sentAt = Date.now();
            const events = Array.from({ length: next - from }, (_, i) => ({
              type: s.type,
              data: { n: from + i, sent_at: sentAt },
            }));
            await publish(pool, token, events, out);
          }
        };
        await Promise.all(Array.from({ length: s.connections }, worker));
        return out;
      }),
    );
  } finally {
    await pool.close();
  }
}

async function ordered(spec: OrderedSpec): Promise<OrderedResult> {
  const pool = new Pool(spec.base, { connections: 1, keepAliveTimeout: 60_000 });
  const out: OrderedResult = { ...newResult(spec.type), ids: [] };
  try {
    const token = await tokenFor(pool, spec.clientId, spec.clientSecret);
    const total = spec.keys * spec.perKey;
    const keyName = (k: number) => `key-${String(k).padStart(3, '0')}`;
    // Paced: every 100 ms of the schedule is one batch (at most batchMax events); unpaced: full batches back to back.
    const perTick = spec.rate > 0 ? Math.max(1, Math.round(spec.rate / 10)) : spec.batchMax;
    const started = Date.now();
    for (let i = 0; i < total; ) {
      if (spec.rate > 0) {
        const wait = started + (i / spec.rate) * 1000 - Date.now();
        if (wait > 0) await sleep(wait);
      }
      const sentAt = Date.now();
      const events: Item[] = [];
      for (const end = Math.min(total, i + Math.min(perTick, spec.batchMax)); i < end; i++) {
        const key = keyName(i % spec.keys);
        const seq = Math.floor(i / spec.keys);
        events.push({ type: spec.type, data: { key, seq, sent_at: sentAt }, ordering_key: key });
      }
      for (const id of await publish(pool, token, events, out)) if (id !== null) out.ids.push(id);
    }
    return out;
  } finally {
    await pool.close();
  }
}

serve<FlowLoadRequest>(async (m) => {
  if (m.op === 'flood') return { results: await flood(m.spec) };
  return { result: await ordered(m.spec) };
});
