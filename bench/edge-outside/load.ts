/**
 * The load generator of the edge-from-outside bench, its own process (forked with IPC by
 * bench/edge-outside.ts), on undici keep-alive connections (pipelining 1). One case per request:
 *   tokens:     closed model, `connections` POST /v1/auth/token in flight, each sent as soon as the
 *               previous answered, for warmUpSeconds (not counted; a `{ event: 'measuring' }`
 *               message marks its end) and then `seconds`
 *   revocation: one round at a time: a fresh token of a victim from node 1, checked (200) on both
 *               nodes; then both nodes polled back to back (GET /v1/audit?limit=1, one connection
 *               each) while node 1 gets POST /v1/auth/revocations from the officer
 */
import { performance } from 'node:perf_hooks';
import { Client, Pool, type Dispatcher } from 'undici';
import { serve } from '../harness/ipc.ts';
import { bump } from '../harness/load-http.ts';
import { percentile } from '../harness/stats.ts';
import type {
  Credentials,
  LoadReply,
  LoadRequest,
  RevocationResult,
  RevocationSpec,
  TokenResult,
  TokenSpec,
} from './ipc.ts';

const TIMEOUTS = { headersTimeout: 30_000, bodyTimeout: 30_000, keepAliveTimeout: 60_000 };
const TOKEN_TTL_MS = 10 * 60_000; // tokens last 900 s; take a new one well before
const JSON_HEADERS = { 'content-type': 'application/json' };
const failure = (err: unknown) => {
  const e = err as { code?: string; cause?: { code?: string } };
  return `error:${e.cause?.code ?? e.code ?? 'unknown'}`;
};
/** sentAt: when the POST left (performance.now()); stop: the round is over without a refusal. */
type PollState = { sentAt: number; stop: 'timeout' | 'aborted' | null };
const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);

async function tokens(spec: TokenSpec): Promise<TokenResult> {
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

  const worker = async () => {
    for (let start = performance.now(); start < end; start = performance.now()) {
      const measured = start >= measureFrom;
      const body = bodies[next++ % bodies.length];
      let status: string | number;
      try {
        const res = await pool.request({ path: '/v1/auth/token', method: 'POST', headers: JSON_HEADERS, body });
        await res.body.dump();
        status = res.statusCode;
      } catch (err) {
        status = failure(err);
      }
      if (!measured) continue;
      const at = performance.now();
      lastAnswer = Math.max(lastAnswer, at);
      requests++;
      bump(statuses, status);
      if (status === 200) {
        ok++;
        latencies.push(at - start);
      }
    }
  };
  await Promise.all(Array.from({ length: spec.connections }, worker));
  clearTimeout(marker);
  await pool.close();
  const s = sorted(latencies);
  const seconds = (lastAnswer - measureFrom) / 1000;
  return { requests, ok, statuses, seconds, okPerSec: ok / seconds, p50: percentile(s, 50), p99: percentile(s, 99) };
}

async function revocation(spec: RevocationSpec): Promise<RevocationResult> {
  const opts = { pipelining: 1, ...TIMEOUTS };
  // node 1's API (tokens, the POST), and one polling connection per node.
  const api = new Client(spec.node1, opts);
  const polls = { 'node 1': new Client(spec.node1, opts), 'node 2': new Client(spec.node2, opts) };
  const out: RevocationResult = {
    node2Ms: [],
    node1Ms: [],
    postMs: [],
    pollP50: null,
    pollP99: null,
    polls: 0,
    unexpected: {},
  };
  const rtts: number[] = [];

  const call = async (c: Dispatcher, method: 'GET' | 'POST', path: string, token?: string, body?: unknown) => {
    const headers: Record<string, string> = body === undefined ? {} : { ...JSON_HEADERS };
    if (token) headers.authorization = `Bearer ${token}`;
    const res = await c.request({ method, path, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.statusCode, text: await res.body.text() };
  };
  const tokenOf = async (c: Credentials) => {
    const r = await call(api, 'POST', '/v1/auth/token', undefined, { grant_type: 'client_credentials', ...c });
    if (r.status !== 200) throw new Error(`POST /v1/auth/token for ${c.client_id} answered ${r.status}: ${r.text}`);
    return (JSON.parse(r.text) as { access_token: string }).access_token;
  };
  let officer = { token: '', at: 0 };
  const officerToken = async () => {
    if (Date.now() - officer.at > TOKEN_TTL_MS) officer = { token: await tokenOf(spec.officer), at: Date.now() };
    return officer.token;
  };

  /** One round; null when it went wrong (counted in `unexpected`). */
  async function round(victim: Credentials): Promise<{ node1: number; node2: number; post: number } | null> {
    const bearer = await officerToken();
    const token = await tokenOf(victim);
    // The token works on both nodes first (node 2 may take a moment to have the client's key and record).
    for (const [name, c] of Object.entries(polls)) {
      for (let i = 0; ; i++) {
        const r = await call(c, 'GET', '/v1/audit?limit=1', token);
        if (r.status === 200) break;
        if (i >= 40) throw new Error(`${name} answered ${r.status} to a fresh token: ${r.text}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    const state: PollState = { sentAt: Number.POSITIVE_INFINITY, stop: null };
    const pollers = Object.entries(polls).map(([name, c]) => poller(name, c, token, state));
    await Promise.all(pollers.map((p) => p.first)); // both polls are going back to back
    state.sentAt = performance.now();
    const timer = setTimeout(() => (state.stop ??= 'timeout'), spec.roundTimeoutMs);
    let post: number | null = null;
    try {
      const r = await call(api, 'POST', '/v1/auth/revocations', bearer, {
        client_id: victim.client_id,
        reason: 'bench:edge-outside',
      });
      if (r.status === 201) post = performance.now() - state.sentAt;
      else bump(out.unexpected, `POST /v1/auth/revocations: ${r.status}`);
    } catch (err) {
      bump(out.unexpected, `POST /v1/auth/revocations: ${failure(err)}`);
    }
    if (post === null) state.stop = 'aborted';
    const [node1, node2] = await Promise.all(pollers.map((p) => p.refused));
    clearTimeout(timer);
    return post === null ? null : { node1, node2, post };
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
          const r = await call(c, 'GET', '/v1/audit?limit=1', token);
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
  const s = sorted(rtts);
  return { ...out, pollP50: percentile(s, 50), pollP99: percentile(s, 99) };
}

serve<LoadRequest>(
  async (m): Promise<LoadReply> =>
    m.op === 'tokens' ? { tokens: await tokens(m.spec) } : { revocation: await revocation(m.spec) },
);
