/**
 * The load generator of the dispatch bench, its own process (forked with IPC by
 * bench/dispatch.ts). Publishes `inference.completed` events to Sluice over an undici keep-alive
 * Pool, one event per `POST /v1/webhooks/events` or up to B per `POST /v1/webhooks/events/batch`.
 *   closed model: `connections` requests in flight, each sent as soon as the previous answered
 *   open model:   requests leave on a fixed schedule (`rate` events/s) whether or not earlier
 *                 ones answered, so a slow server shows up as latency, not as a lower rate
 * Every event carries `data.sent_at` (epoch ms, when its request left) for the receiver; with
 * `ids`, its own publish id too (the idempotent path).
 */
import { Pool } from 'undici';
import { serve } from '../harness/ipc.ts';
import { bump, tokenFor } from '../harness/load-http.ts';
import type { LoadRequest, LoadResult, LoadSpec } from './ipc.ts';

const TOKEN_TTL_MS = 10 * 60_000; // tokens last 900 s; take a new one well before

function tokens(pool: Pool, spec: LoadSpec) {
  let token: Promise<string> | null = null;
  let at = 0;
  return () => {
    if (!token || Date.now() - at > TOKEN_TTL_MS) {
      at = Date.now();
      token = tokenFor(pool, spec.clientId, spec.clientSecret);
    }
    return token;
  };
}

async function run(spec: LoadSpec): Promise<LoadResult> {
  const pool = new Pool(spec.base, { connections: spec.connections, pipelining: 1, keepAliveTimeout: 60_000 });
  const token = tokens(pool, spec);
  await token();
  const batch = spec.publish === 'batch';
  const perRequest = batch ? spec.batchSize : 1;
  const requests = Math.ceil(spec.events / perRequest);
  const pad = 'x'.repeat(spec.padBytes);
  const out: LoadResult = {
    sent: 0,
    accepted: 0,
    statuses: {},
    itemErrors: {},
    matched: {},
    firstSentAt: 0,
    lastAnsweredAt: 0,
    acceptedPerSec: 0,
    batchUnavailable: false,
  };
  let seq = 0;
  /** Publish ids unique to this run (--ids scenarios): a repeated id would be a duplicate publish. */
  const runTag = `bench-${process.pid}-${Date.now().toString(36)}`;

  async function one(r: number): Promise<void> {
    const n = Math.min(perRequest, spec.events - r * perRequest);
    const bearer = await token();
    const sentAt = Date.now();
    out.firstSentAt ||= sentAt;
    const events = Array.from({ length: n }, () => ({
      ...(spec.ids ? { id: `${runTag}-${seq}` } : {}),
      type: 'inference.completed',
      data: { sent_at: sentAt, seq: seq++, pad },
    }));
    out.sent += n;
    try {
      const res = await pool.request({
        path: batch ? '/v1/webhooks/events/batch' : '/v1/webhooks/events',
        method: 'POST',
        headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
        body: JSON.stringify(batch ? { events } : events[0]),
      });
      const text = await res.body.text();
      out.lastAnsweredAt = Date.now();
      bump(out.statuses, res.statusCode);
      if (!batch && res.statusCode === 202) {
        out.accepted++;
        bump(out.matched, (JSON.parse(text) as { matched_endpoints?: number }).matched_endpoints ?? '?');
      } else if (batch && (res.statusCode === 200 || res.statusCode === 202)) {
        for (const item of batchItems(JSON.parse(text))) {
          if (typeof item.id === 'string' && item.error === undefined) {
            out.accepted++;
            if (item.matched_endpoints !== undefined) bump(out.matched, String(item.matched_endpoints));
          } else bump(out.itemErrors, errorCode(item.error));
        }
      } else if (batch && res.statusCode === 404) {
        out.batchUnavailable = true;
      }
    } catch (err) {
      out.lastAnsweredAt = Date.now();
      const e = err as { code?: string; cause?: { code?: string } };
      bump(out.statuses, `error:${e.cause?.code ?? e.code ?? 'unknown'}`);
    }
  }

  if (spec.model === 'closed') {
    let next = 0;
    const worker = async () => {
      while (next < requests && !out.batchUnavailable) await one(next++);
    };
    await Promise.all(Array.from({ length: spec.connections }, worker));
  } else {
    const intervalMs = (perRequest / spec.rate) * 1000;
    const t0 = performance.now();
    const inflight: Promise<void>[] = [];
    for (let r = 0; r < requests && !out.batchUnavailable; r++) {
      const wait = t0 + r * intervalMs - performance.now();
      if (wait > 1) await new Promise((res) => setTimeout(res, wait));
      inflight.push(one(r));
    }
    await Promise.all(inflight);
  }
  await pool.close();
  out.acceptedPerSec = out.accepted / (Math.max(1, out.lastAnsweredAt - out.firstSentAt) / 1000);
  return out;
}

type Item = { id?: unknown; error?: unknown; matched_endpoints?: unknown };

/** The per-item results of a batch answer, wherever the route puts them. */
function batchItems(body: unknown): Item[] {
  if (Array.isArray(body)) return body as Item[];
  const b = body as Record<string, unknown> | null;
  for (const k of ['results', 'events', 'data', 'items']) if (Array.isArray(b?.[k])) return b[k] as Item[];
  return [];
}

function errorCode(error: unknown): string {
  if (error === undefined) return 'no-id';
  if (typeof error === 'string') return error;
  const e = error as { code?: unknown; status?: unknown };
  return String(e.code ?? e.status ?? 'error');
}

serve<LoadRequest>(async (m) => ({ result: await run(m.spec) }));
