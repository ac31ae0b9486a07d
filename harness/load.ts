/**
 * The benches' load generator, its own process (forked with IPC), on undici keep-alive pools. One
 * run per request (harness/ipc.ts), built from two loops: closed (N requests in flight, each
 * sent as soon as the previous answered) and open (requests leave on a fixed schedule whether or
 * not earlier ones answered, so a slow server shows up as latency, not as a lower rate).
 *   publish:    `inference.completed` events, single or batch, closed or open (the dispatch bench)
 *   probe:      a quiet tenant's open-model probe beside a noisy tenant's batches (noisy-neighbour)
 *   flood:      event types at once in batches, closed; ordered: keyed events in seq order (flow)
 *   tokens:     POST /v1/auth/token, closed; revocation: rounds of revoke-and-poll (edge-outside)
 * Published events carry `data.sent_at` (epoch ms, when their request left) for the receiver.
 */
import { performance } from 'node:perf_hooks';
import { Client, type Dispatcher, Pool } from 'undici';
import { serve } from './ipc.ts';
import { percentile } from './stats.ts';
import { closedLoop } from './wait.ts';

export interface Credentials {
  client_id: string;
  client_secret: string;
}

/** `publish`: `events` events, one per request or `batchSize` per batch request. */
export interface PublishSpec {
  base: string;
  client: Credentials;
  publish: 'single' | 'batch';
  batchSize: number;
  /** closed: `connections` requests in flight back to back; open: `rate` events/s on a fixed schedule. */
  model: 'closed' | 'open';
  connections: number;
  rate: number;
  events: number;
  padBytes: number;
  /** Each event carries its own publish id (the idempotent path). */
  ids?: boolean;
}

/** `probe`: the noisy-neighbour bench's two tenants at once. */
export interface ProbeSpec {
  base: string;
  /** The quiet tenant: one event per request on a fixed schedule, keyed `k<seq % keys>`. */
  probe: { client: Credentials; rate: number; seconds: number; keys: number };
  /** The noisy tenant: a batch of `batch` events every `everyMs` (null: none). */
  flood: { client: Credentials; batch: number; everyMs: number; keys: number } | null;
}

/** `flood`: event types at once, each `events` events in batches of `batch`, `connections` at once. */
export interface FloodSpec {
  base: string;
  client: Credentials;
  streams: { type: string; events: number; batch: number; connections: number }[];
}

/**
 * `ordered`: `keys` × `perKey` events, data `{key, seq, sent_at}`, seq-major, from one sequential
 * stream of batches (`batchMax` at most), paced at `rate` events/s (0: as fast as accepted).
 */
export interface OrderedSpec {
  base: string;
  client: Credentials;
  type: string;
  keys: number;
  perKey: number;
  rate: number;
  batchMax: number;
}

/** `tokens`: closed model, POST /v1/auth/token round-robin over `clients`; a warm-up not counted. */
export interface TokenSpec {
  base: string;
  clients: Credentials[];
  connections: number;
  warmUpSeconds: number;
  seconds: number;
}

/** `revocation`: rounds of a victim's token polled on both nodes while node 1 revokes it. */
export interface RevocationSpec {
  node1: string;
  node2: string;
  officer: Credentials;
  /** Revoked in one unreported round first. */
  warmUp: Credentials;
  victims: Credentials[];
  roundTimeoutMs: number;
}

export type LoadRequest =
  | { op: 'publish'; spec: PublishSpec }
  | { op: 'probe'; spec: ProbeSpec }
  | { op: 'flood'; spec: FloodSpec }
  | { op: 'ordered'; spec: OrderedSpec }
  | { op: 'tokens'; spec: TokenSpec }
  | { op: 'revocation'; spec: RevocationSpec };

export type PublishResult = Awaited<ReturnType<typeof publish>>;
export type StreamResult = ReturnType<typeof stream>;
export type TokenResult = Awaited<ReturnType<typeof tokenRun>>;
export type RevocationResult = Awaited<ReturnType<typeof revocation>>;
export interface LoadReply {
  publish?: PublishResult;
  probe?: Awaited<ReturnType<typeof probe>>;
  flood?: StreamResult[];
  ordered?: StreamResult;
  tokens?: TokenResult;
  revocation?: RevocationResult;
}

const TIMEOUTS = { headersTimeout: 30_000, bodyTimeout: 30_000, keepAliveTimeout: 60_000 };
const TOKEN_TTL_MS = 10 * 60_000; // tokens last 900 s; take a new one well before
const JSON_HEADERS = { 'content-type': 'application/json' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sorted = (xs: number[]) => Array.from(Float64Array.from(xs).sort());
const counts = (): Record<string, number> => ({});
const bump = (m: Record<string, number>, k: string | number): void => {
  m[k] = (m[k] ?? 0) + 1;
};
const failure = (err: unknown) => {
  const e = err as { code?: string; cause?: { code?: string } };
  return `error:${e.cause?.code ?? e.code ?? 'unknown'}`;
};

/** `send(i)` at t0 + i × intervalMs for i = 0, 1, … while `more(i, dueAt)`; resolves once all answered. */
async function openLoop(
  intervalMs: number,
  more: (i: number, dueAt: number) => boolean,
  send: (i: number) => Promise<void>,
) {
  const t0 = performance.now();
  const inflight: Promise<void>[] = [];
  for (let i = 0; more(i, t0 + i * intervalMs); i++) {
    const wait = t0 + i * intervalMs - performance.now();
    if (wait > 1) await sleep(wait);
    inflight.push(send(i));
  }
  await Promise.all(inflight);
}

/** An access token over `pool`, taken again every 10 minutes. */
function tokens(pool: Dispatcher, c: Credentials): () => Promise<string> {
  let token: Promise<string> | null = null;
  let at = 0;
  return () => {
    if (!token || Date.now() - at > TOKEN_TTL_MS) {
      at = Date.now();
      token = (async () => {
        const res = await pool.request({
          path: '/v1/auth/token',
          method: 'POST',
          headers: JSON_HEADERS,
          body: JSON.stringify({
            grant_type: 'client_credentials',
            client_id: c.client_id,
            client_secret: c.client_secret,
          }),
        });
        const body = (await res.body.json()) as { access_token?: string };
        if (res.statusCode !== 200 || !body.access_token) throw new Error(`token request answered ${res.statusCode}`);
        return body.access_token;
      })();
    }
    return token;
  };
}

const post = async (pool: Dispatcher, token: string, path: string, body: unknown) => {
  const res = await pool.request({
    path,
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, ...JSON_HEADERS },
    body: JSON.stringify(body),
  });
  return { status: res.statusCode, text: await res.body.text() };
};

type Item = { id?: unknown; error?: any; matched_endpoints?: unknown };

/** The per-item results of a batch answer, wherever the route puts them. */
function batchItems(text: string): Item[] {
  const body = JSON.parse(text) as unknown;
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

async function publish(spec: PublishSpec) {
  const pool = new Pool(spec.base, { connections: spec.connections, pipelining: 1, keepAliveTimeout: 60_000 });
  const token = tokens(pool, spec.client);
  await token();
  const batch = spec.publish === 'batch';
  const perRequest = batch ? spec.batchSize : 1;
  const requests = Math.ceil(spec.events / perRequest);
  const pad = 'x'.repeat(spec.padBytes);
  const out = {
    sent: 0,
    /** 202 (single), or items with an id and no error in a 200/202 (batch). */
    accepted: 0,
    statuses: counts(),
    /** Batch items refused inside an accepted response, by their error code. */
    itemErrors: counts(),
    /** `matched_endpoints` of accepted events (by count). */
    matched: counts(),
    firstSentAt: 0,
    lastAnsweredAt: 0,
    acceptedPerSec: 0,
    batchUnavailable: false,
  };
  let seq = 0;
  /** Publish ids unique to this run: a repeated id would be a duplicate publish. */
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
      const res = await post(pool, bearer, batch ? '/v1/webhooks/events/batch' : '/v1/webhooks/events', {
        ...(batch ? { events } : events[0]),
      });
      out.lastAnsweredAt = Date.now();
      bump(out.statuses, res.status);
      if (!batch && res.status === 202) {
        out.accepted++;
        bump(out.matched, (JSON.parse(res.text) as { matched_endpoints?: number }).matched_endpoints ?? '?');
      } else if (batch && (res.status === 200 || res.status === 202)) {
        for (const item of batchItems(res.text)) {
          if (typeof item.id === 'string' && item.error === undefined) {
            out.accepted++;
            if (item.matched_endpoints !== undefined) bump(out.matched, String(item.matched_endpoints));
          } else bump(out.itemErrors, errorCode(item.error));
        }
      } else if (batch && res.status === 404) out.batchUnavailable = true;
    } catch (err) {
      out.lastAnsweredAt = Date.now();
      bump(out.statuses, failure(err));
    }
  }

  let next = 0;
  if (spec.model === 'closed')
    await closedLoop(spec.connections, async () => {
      if (next >= requests || out.batchUnavailable) return false;
      await one(next++);
      return true;
    });
  else await openLoop((perRequest / spec.rate) * 1000, (r) => r < requests && !out.batchUnavailable, one);
  await pool.close();
  out.acceptedPerSec = out.accepted / (Math.max(1, out.lastAnsweredAt - out.firstSentAt) / 1000);
  return out;
}

async function probe(spec: ProbeSpec) {
  const out = {
    probeAccepted: 0,
    probeStatuses: counts(),
    floodAccepted: 0,
    floodStatuses: counts(),
    /** matched_endpoints of the flood's events, summed. */
    floodDeliveries: 0,
  };
  const probePool = new Pool(spec.base, { connections: 16, keepAliveTimeout: 60_000 });
  const floodPool = new Pool(spec.base, { connections: 4, keepAliveTimeout: 60_000 });
  const probeToken = await tokens(probePool, spec.probe.client)();
  const floodToken = spec.flood ? await tokens(floodPool, spec.flood.client)() : '';
  const endAt = Date.now() + spec.probe.seconds * 1000;
  const pending: Promise<void>[] = [];
  /** How long each accepted probe publish took to be answered (ms). */
  const answered: number[] = [];
  let floodSeq = 0;
  const floodOne = async () => {
    const { batch, keys } = spec.flood!;
    const events = Array.from({ length: batch }, (_, i) => ({
      type: 'inference.completed',
      data: { flood: i, pad: 'x'.repeat(200) },
      ordering_key: `f${floodSeq++ % keys}`,
    }));
    try {
      const res = await post(floodPool, floodToken, '/v1/webhooks/events/batch', { events });
      bump(out.floodStatuses, res.status);
      for (const r of batchItems(res.text)) {
        if (typeof r.matched_endpoints !== 'number') continue;
        out.floodAccepted++;
        out.floodDeliveries += r.matched_endpoints;
      }
    } catch (err) {
      bump(out.floodStatuses, failure(err));
    }
  };
  // The flood goes first, so the probe is measured with it under way.
  let floodTimer: NodeJS.Timeout | null = null;
  if (spec.flood) {
    pending.push(floodOne());
    floodTimer = setInterval(() => {
      if (Date.now() < endAt) pending.push(floodOne());
    }, spec.flood.everyMs);
  }
  const startedAt = performance.now();
  await openLoop(
    1000 / spec.probe.rate,
    (_, due) => due < startedAt + spec.probe.seconds * 1000,
    async (seq) => {
      const sentAt = Date.now();
      const key = `k${seq % spec.probe.keys}`;
      try {
        const res = await post(probePool, probeToken, '/v1/webhooks/events', {
          type: 'inference.completed',
          data: { sent_at: sentAt, seq, key },
          ordering_key: key,
        });
        bump(out.probeStatuses, res.status);
        if (res.status === 202) {
          out.probeAccepted++;
          answered.push(Date.now() - sentAt);
        }
      } catch (err) {
        bump(out.probeStatuses, failure(err));
      }
    },
  );
  if (floodTimer) clearInterval(floodTimer);
  await Promise.all(pending);
  await Promise.all([probePool.close(), floodPool.close()]);
  const s = sorted(answered);
  // Request sent to 202 read.
  return { ...out, probeAnswerP50: percentile(s, 50), probeAnswerP99: percentile(s, 99) };
}

/** Statuses: responses by status; network failures as `error:<code>`; refused items as `item:<code>`. */
const stream = (type: string) => ({
  type,
  sent: 0,
  accepted: 0,
  statuses: counts(),
  firstSentAt: 0,
  lastAnsweredAt: 0,
  /** The ids accepted (`ordered` only). */
  ids: [] as string[],
});

/** One batch request; counts its statuses into `out` and returns the ids accepted (null for a refused item). */
async function batch(pool: Pool, token: string, events: object[], out: StreamResult): Promise<(string | null)[]> {
  out.sent += events.length;
  if (out.firstSentAt === 0) out.firstSentAt = Date.now();
  try {
    const res = await post(pool, token, '/v1/webhooks/events/batch', { events });
    bump(out.statuses, res.status);
    out.lastAnsweredAt = Date.now();
    if (res.status !== 200 && res.status !== 202) return events.map(() => null);
    return batchItems(res.text).map((r) => {
      if (typeof r.id === 'string' && !r.error) {
        out.accepted++;
        return r.id;
      }
      bump(out.statuses, `item:${r.error?.code ?? 'unknown'}`);
      return null;
    });
  } catch (err) {
    bump(out.statuses, failure(err));
    return events.map(() => null);
  }
}

async function flood(spec: FloodSpec) {
  const connections = spec.streams.reduce((n, s) => n + s.connections, 0);
  const pool = new Pool(spec.base, { connections, keepAliveTimeout: 60_000 });
  try {
    const token = await tokens(pool, spec.client)();
    return await Promise.all(
      spec.streams.map(async (s) => {
        const out = stream(s.type);
        let next = 0;
        await closedLoop(s.connections, async () => {
          const from = next;
          if (from >= s.events) return false;
          next = Math.min(s.events, from + s.batch);
          const sentAt = Date.now();
          const events = Array.from({ length: next - from }, (_, i) => ({
            type: s.type,
            data: { n: from + i, sent_at: sentAt },
          }));
          await batch(pool, token, events, out);
          return true;
        });
        return out;
      }),
    );
  } finally {
    await pool.close();
  }
}

async function ordered(spec: OrderedSpec) {
  const pool = new Pool(spec.base, { connections: 1, keepAliveTimeout: 60_000 });
  const out = stream(spec.type);
  try {
    const token = await tokens(pool, spec.client)();
    const total = spec.keys * spec.perKey;
    // Paced: every 100 ms of the schedule is one batch (at most batchMax events); unpaced: full batches back to back.
    const perTick = spec.rate > 0 ? Math.max(1, Math.round(spec.rate / 10)) : spec.batchMax;
    const started = Date.now();
    for (let i = 0; i < total; ) {
      if (spec.rate > 0) {
        const wait = started + (i / spec.rate) * 1000 - Date.now();
        if (wait > 0) await sleep(wait);
      }
      const sentAt = Date.now();
      const events: object[] = [];
      for (const end = Math.min(total, i + Math.min(perTick, spec.batchMax)); i < end; i++) {
        const key = `key-${String(i % spec.keys).padStart(3, '0')}`;
        events.push({
          type: spec.type,
          data: { key, seq: Math.floor(i / spec.keys), sent_at: sentAt },
          ordering_key: key,
        });
      }
      for (const id of await batch(pool, token, events, out)) if (id !== null) out.ids.push(id);
    }
    return out;
  } finally {
    await pool.close();
  }
}

async function tokenRun(spec: TokenSpec) {
  const pool = new Pool(spec.base, { connections: spec.connections, pipelining: 1, ...TIMEOUTS });
  const bodies = spec.clients.map((c) => JSON.stringify({ grant_type: 'client_credentials', ...c }));
  const statuses: Record<string, number> = {};
  const latencies: number[] = [];
  let next = 0;
  let requests = 0;
  let ok = 0;
  const measureFrom = performance.now() + spec.warmUpSeconds * 1000;
  const end = measureFrom + spec.seconds * 1000;
  let lastAnswer = measureFrom;
  const marker = setTimeout(() => process.send!({ event: 'measuring' }), spec.warmUpSeconds * 1000);
  await closedLoop(spec.connections, async () => {
    const start = performance.now();
    if (start >= end) return false;
    const body = bodies[next++ % bodies.length];
    let status: string | number;
    try {
      const res = await pool.request({ path: '/v1/auth/token', method: 'POST', headers: JSON_HEADERS, body });
      await res.body.dump();
      status = res.statusCode;
    } catch (err) {
      status = failure(err);
    }
    if (start < measureFrom) return true;
    const at = performance.now();
    lastAnswer = Math.max(lastAnswer, at);
    requests++;
    bump(statuses, status);
    if (status === 200) {
      ok++;
      latencies.push(at - start);
    }
    return true;
  });
  clearTimeout(marker);
  await pool.close();
  const s = [...latencies].sort((a, b) => a - b);
  const seconds = (lastAnswer - measureFrom) / 1000;
  return { requests, ok, statuses, seconds, okPerSec: ok / seconds, p50: percentile(s, 50), p99: percentile(s, 99) };
}

/** sentAt: when the POST left (performance.now()); stop: the round is over without a refusal. */
type PollState = { sentAt: number; stop: 'timeout' | 'aborted' | null };

async function revocation(spec: RevocationSpec) {
  const opts = { pipelining: 1, ...TIMEOUTS };
  // node 1's API (tokens, the POST), and one polling connection per node.
  const api = new Client(spec.node1, opts);
  const polls = { 'node 1': new Client(spec.node1, opts), 'node 2': new Client(spec.node2, opts) };
  // Per measured round, ms from sending the POST (NaN: not refused within the timeout).
  const out = {
    node2Ms: [] as number[],
    node1Ms: [] as number[],
    postMs: [] as number[],
    pollP50: null as number | null,
    pollP99: null as number | null,
    polls: 0,
    unexpected: counts(),
  };
  const rtts: number[] = [];
  const get = async (c: Dispatcher, token: string) => {
    const res = await c.request({
      method: 'GET',
      path: '/v1/audit?limit=1',
      headers: { authorization: `Bearer ${token}` },
    });
    return { status: res.statusCode, text: await res.body.text() };
  };
  const officerToken = tokens(api, spec.officer);

  /** One round; null when it went wrong (counted in `unexpected`). */
  async function round(victim: Credentials): Promise<{ node1: number; node2: number; post: number } | null> {
    const bearer = await officerToken();
    const token = await tokens(api, victim)();
    // The token works on both nodes first (node 2 may take a moment to have the client's key and record).
    for (const [name, c] of Object.entries(polls)) {
      for (let i = 0; ; i++) {
        const r = await get(c, token);
        if (r.status === 200) break;
        if (i >= 40) throw new Error(`${name} answered ${r.status} to a fresh token: ${r.text}`);
        await sleep(50);
      }
    }
    const state: PollState = { sentAt: Number.POSITIVE_INFINITY, stop: null };
    const pollers = Object.entries(polls).map(([name, c]) => poller(name, c, token, state));
    await Promise.all(pollers.map((p) => p.first)); // both polls are going back to back
    state.sentAt = performance.now();
    const timer = setTimeout(() => (state.stop ??= 'timeout'), spec.roundTimeoutMs);
    let postMs: number | null = null;
    try {
      const r = await post(api, bearer, '/v1/auth/revocations', {
        client_id: victim.client_id,
        reason: 'bench:edge-outside',
      });
      if (r.status === 201) postMs = performance.now() - state.sentAt;
      else bump(out.unexpected, `POST /v1/auth/revocations: ${r.status}`);
    } catch (err) {
      bump(out.unexpected, `POST /v1/auth/revocations: ${failure(err)}`);
    }
    if (postMs === null) state.stop = 'aborted';
    const [node1, node2] = await Promise.all(pollers.map((p) => p.refused));
    clearTimeout(timer);
    return postMs === null ? null : { node1, node2, post: postMs };
  }

  /**
   * Polls back to back. `first` resolves at the first answer; `refused`, with ms from the POST's
   * sending to the first TOKEN_REVOKED 401 (NaN: none before `stop`). Only a 401 counts: a 200
   * answered after the POST left (a poll in flight, or a node not there yet) is one more poll.
   */
  function poller(name: string, c: Client, token: string, state: PollState) {
    let answered = () => {};
    const first = new Promise<void>((r) => (answered = r));
    const refused = (async () => {
      try {
        for (;;) {
          const start = performance.now();
          const r = await get(c, token);
          const at = performance.now();
          answered();
          out.polls++;
          if (r.status === 200) rtts.push(at - start);
          else if (r.status === 401 && r.text.includes('TOKEN_REVOKED') && start >= state.sentAt)
            return at - state.sentAt;
          else {
            const why = r.status === 401 ? (/"code":"([A-Z_]+)"/.exec(r.text)?.[1] ?? '?') : '';
            const before = start < state.sentAt ? ' (sent before the POST)' : '';
            bump(out.unexpected, `poll ${name}: ${r.status}${why ? ` ${why}` : ''}${before}`);
            return Number.NaN;
          }
          if (state.stop === 'timeout') bump(out.unexpected, `poll ${name}: not refused in ${spec.roundTimeoutMs} ms`);
          if (state.stop) return Number.NaN;
        }
      } catch (err) {
        bump(out.unexpected, `poll ${name}: ${failure(err)}`);
        return Number.NaN;
      } finally {
        answered();
      }
    })();
    return { first, refused };
  }

  try {
    await round(spec.warmUp); // the first audit append claims node 1's transactional audit writer: not reported
    rtts.length = 0;
    out.polls = 0;
    out.unexpected = {};
    for (const victim of spec.victims) {
      const r = await round(victim);
      if (!r) continue;
      out.node1Ms.push(r.node1);
      out.node2Ms.push(r.node2);
      out.postMs.push(r.post);
    }
  } finally {
    await Promise.all([api, ...Object.values(polls)].map((c) => c.close()));
  }
  const s = [...rtts].sort((a, b) => a - b);
  return { ...out, pollP50: percentile(s, 50), pollP99: percentile(s, 99) };
}

serve<LoadRequest>(async (m): Promise<LoadReply> => {
  if (m.op === 'publish') return { publish: await publish(m.spec) };
  if (m.op === 'probe') return { probe: await probe(m.spec) };
  if (m.op === 'flood') return { flood: await flood(m.spec) };
  if (m.op === 'ordered') return { ordered: await ordered(m.spec) };
  if (m.op === 'tokens') return { tokens: await tokenRun(m.spec) };
  return { revocation: await revocation(m.spec) };
});
