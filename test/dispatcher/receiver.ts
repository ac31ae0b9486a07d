/**
 * Test receivers for the dispatcher: real node:http servers on 127.0.0.1 that record every
 * request (raw body, headers, arrival time, the answer it got) and answer as told: a status, a
 * connection reset, or a hang. The verification ping gets `pingStatus` (200 by default) so
 * endpoints register ACTIVE. A 3xx points at `redirectTo`: give it a live receiver's URL to prove
 * a redirect is not followed (that receiver must get nothing).
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { call, type TestNode } from '../helpers/sluice.ts';

export interface Hit {
  headers: IncomingHttpHeaders;
  rawBody: string;
  body: { id: string; type: string; tenant_id: string; created_at: string; timestamp: number; data: unknown };
  at: number;
  /** What the receiver answered (or did instead). */
  answer: Answer;
}

export type Answer = number | 'reset' | 'hang';

export interface TestReceiver {
  url: string;
  hits: Hit[];
  /** Hits other than the verification ping. */
  events(): Hit[];
  answer: Answer;
  /** Decides per request when set (e.g. fail only first attempts). */
  answerFor?: (hit: Hit) => Answer;
  /** Extra response headers per request (e.g. Retry-After). */
  headersFor?: (hit: Hit) => Record<string, string>;
  pingStatus: number;
  /** The Location of a 3xx answer. */
  redirectTo: string;
  /** Hits (not the ping) this receiver answered with a 2xx: real receipts. */
  receipts(): Hit[];
  until(check: (events: Hit[]) => boolean, timeoutMs?: number, what?: string): Promise<Hit[]>;
  close(): Promise<void>;
}

export async function receiver(answer: Answer = 200): Promise<TestReceiver> {
  const hits: Hit[] = [];
  const hanging = new Set<ServerResponse>();
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks).toString('utf8');
      let body: Hit['body'];
      try {
        body = JSON.parse(rawBody);
      } catch {
        body = {} as Hit['body'];
      }
      const hit: Hit = { headers: req.headers, rawBody, body, at: Date.now(), answer: 'hang' };
      const a = body.type === 'ping' ? r.pingStatus : (r.answerFor?.(hit) ?? r.answer);
      hit.answer = a;
      hits.push(hit);
      if (a === 'hang') return void hanging.add(res);
      if (a === 'reset') return void req.socket.destroy();
      res
        .writeHead(a, { ...(a >= 300 && a < 400 ? { location: r.redirectTo } : {}), ...(r.headersFor?.(hit) ?? {}) })
        .end('ok');
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const r: TestReceiver = {
    url: `http://127.0.0.1:${port}/hook`,
    hits,
    answer,
    pingStatus: 200,
    redirectTo: 'http://127.0.0.1:1/elsewhere',
    events: () => hits.filter((h) => h.body.type !== 'ping'),
    receipts: () =>
      hits.filter((h) => h.body.type !== 'ping' && typeof h.answer === 'number' && h.answer >= 200 && h.answer < 300),
    async until(check, timeoutMs = 30_000, what = 'deliveries') {
      const deadline = Date.now() + timeoutMs;
      while (!check(r.events())) {
        if (Date.now() > deadline)
          throw new Error(`${what}: not there within ${timeoutMs} ms (have ${r.events().length} events)`);
        await new Promise((res) => setTimeout(res, 25));
      }
      return r.events();
    },
    async close() {
      for (const res of hanging) res.destroy();
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return r;
}

/** An independent check of the signature (node:crypto only, nothing from Sluice). */
export function signatureValid(hit: Hit, secret: string): boolean {
  const expected = Buffer.from(`sha256=${createHmac('sha256', secret).update(hit.rawBody).digest('hex')}`);
  const got = Buffer.from(String(hit.headers['x-service-signature-256'] ?? ''));
  return got.length === expected.length && timingSafeEqual(got, expected);
}

export async function registerEndpoint(
  node: TestNode,
  token: string,
  url: string,
  events: string[],
): Promise<{ id: string; secret: string; state: string }> {
  const res = await call(node.base, 'POST', '/v1/webhooks/endpoints', { token, body: { url, events } });
  if (res.status !== 201) throw new Error(`registration failed: ${res.status} ${res.text}`);
  return res.json;
}

export async function publish(node: TestNode, token: string, body: unknown) {
  return call(node.base, 'POST', '/v1/webhooks/events', { token, body });
}

/**
 * The barrier that proves "nothing more came" (instead of a sleep): publishes a marker event of
 * `type`, which the endpoint at `r` takes, and waits for its delivery there. The fan-out reads a
 * tenant's events in publish order, so a delivery an earlier publish or decision caused was on
 * its way before the marker's. Returns `r`'s events other than the marker.
 */
export async function awaitMarker(node: TestNode, token: string, r: TestReceiver, type: string): Promise<Hit[]> {
  const id = `marker-${randomUUID()}`;
  const res = await publish(node, token, { type, id, data: { marker: true } });
  if (res.status !== 202 || res.json.matched_endpoints < 1)
    throw new Error(`the marker was not accepted for an endpoint: ${res.status} ${res.text}`);
  await r.until((e) => e.some((h) => h.body.id === id), 30_000, `the marker ${type}`);
  return r.events().filter((h) => h.body.id !== id);
}

/** Publishes `n` events of `type` (data `{n}`, optional ordering keys) in batches of 500. */
export async function publishMany(
  node: TestNode,
  token: string,
  type: string,
  n: number,
  key?: (i: number) => string,
): Promise<void> {
  for (let i = 0; i < n; i += 500) {
    const events = Array.from({ length: Math.min(500, n - i) }, (_, j) => ({
      type,
      data: { n: i + j },
      ...(key ? { ordering_key: key(i + j) } : {}),
    }));
    const res = await call(node.base, 'POST', '/v1/webhooks/events/batch', { token, body: { events } });
    if (res.status !== 202 && res.status !== 200) throw new Error(`batch: ${res.status} ${res.text}`);
  }
}

/** The `n` of an event publishMany sent. */
export const nOf = (h: Pick<Hit, 'body'>) => (h.body.data as { n: number }).n;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
