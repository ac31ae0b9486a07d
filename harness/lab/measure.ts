/**
 * What the regions lab measures (scripts/lab-regions.ts prints it; test/faults/regions.test.ts runs
 * short forms): revocation propagation from region a to b and c, the hot path per region, a region
 * cut off under load, and a region's broker killed under load. Every client of the lab (this
 * process) sits in the root namespace, next to every region: its requests to a region's ingress
 * are local ones.
 */
import { createServer, type Server } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Context } from '../../core/context.ts';
import { createClient, type CreatedClient } from '../../core/clients/provisioning.ts';
import { REGIONS, type Lab, type Region } from './regions.ts';
import { closedLoop, untilStalled } from '../wait.ts';

export interface Stats {
  n: number;
  p50: number;
  p99: number;
  max: number;
}

export function stats(xs: number[]): Stats {
  const s = [...xs].sort((a, b) => a - b);
  const at = (p: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? Number.NaN;
  return { n: s.length, p50: at(50), p99: at(99), max: s.length ? s[s.length - 1] : Number.NaN };
}

export const fmtStats = (s: Stats) =>
  `p50 ${s.p50.toFixed(1)} ms  p99 ${s.p99.toFixed(1)} ms  max ${s.max.toFixed(1)} ms  (n ${s.n})`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type ClientInput = Parameters<typeof createClient>[1];

/**
 * Creates the clients 8 at a time, in the order given: the audit writer serialises only the
 * transactions, so each client's wait for its entry and record to be seen (a few cross-region
 * round trips, ~1.2 s one by one at 80 ms RTT) overlaps the others'.
 */
export async function createClients(ctx: Context, inputs: ClientInput[]): Promise<CreatedClient[]> {
  const out: CreatedClient[] = new Array(inputs.length);
  let next = 0;
  await closedLoop(8, async () => {
    const i = next++;
    if (i >= inputs.length) return false;
    out[i] = await createClient(ctx, inputs[i]);
    return true;
  });
  return out;
}

async function call(base: string, method: string, path: string, token?: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await res.text();
  let json: any;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    /* not JSON */
  }
  return { status: res.status, json };
}

export async function tokenFor(base: string, c: CreatedClient): Promise<{ status: number; token: string }> {
  const r = await call(base, 'POST', '/v1/auth/token', undefined, {
    grant_type: 'client_credentials',
    client_id: c.client_id,
    client_secret: c.client_secret,
  });
  return { status: r.status, token: r.json?.access_token ?? '' };
}

/**
 * A token for a client just created: the region's views learn of it through Kafka, so its first
 * token requests may be refused until they do (30 s at most).
 */
export async function knownToken(base: string, c: CreatedClient): Promise<string> {
  let token = '';
  await until(
    async () => {
      const r = await tokenFor(base, c);
      token = r.token;
      return r.status === 200;
    },
    30_000,
    `a token for ${c.client_id} at ${base}`,
  );
  return token;
}

/** A scope-checked request answered from the node's own views (audit:read). */
export async function checked(base: string, token: string): Promise<number> {
  return (await call(base, 'GET', '/v1/audit?limit=1', token).catch(() => ({ status: 0 }))).status;
}

export interface RevocationResult {
  /** Per region (b, c): from sending the POST to a until that region's ingress answers 401. */
  fromSent: Record<'b' | 'c', Stats>;
  /** The POST until its 201 (region a's own view has the revocation by then). */
  post201: Stats;
  /** Revoked tokens the region still accepted 10 s after the POST (not in `fromSent`). */
  missed: Record<'b' | 'c', number>;
}

/**
 * `n` clients of region b and `n` of region c (a token is only accepted in its own region) revoked
 * one after the other through region a, alternating; the client's region is polled back to back
 * with its token from before the POST leaves.
 */
export async function measureRevocation(lab: Lab, ctx: Context, n: number, log: (s: string) => void) {
  const a = lab.region('a').base;
  const regions = Array.from({ length: 2 * n }, (_, i) => (i % 2 === 0 ? 'b' : 'c') as 'b' | 'c');
  const [officer, warm, ...created] = await createClients(
    ctx,
    ['a', 'a', ...regions].map((region) => ({ tenant: 'lab', role: 'security-officer', region })),
  );
  const victims = created.map((c, i) => ({ c, region: regions[i] }));
  log(`  ${created.length + 2} clients created`);
  let officerToken = await knownToken(a, officer);
  // Warm-up (`warm`): region a's first audit append claims the transactional audit writer.
  const last = victims[victims.length - 1];
  await until(
    async () => (await tokenFor(lab.region(last.region).base, last.c)).status === 200,
    30_000,
    'the new clients reach every region',
  );
  await knownToken(a, warm); // region a knows the client it revokes (else 404)
  const w = await call(a, 'POST', '/v1/auth/revocations', officerToken, { client_id: warm.client_id, reason: 'warm' });
  if (w.status !== 201) throw new Error(`warm-up revocation answered ${w.status}: ${JSON.stringify(w.json)}`);
  log('  every region knows the clients; the warm-up revocation is done');
  const fromSent = { b: [] as number[], c: [] as number[] };
  const post201: number[] = [];
  const missed = { b: 0, c: 0 };
  for (let i = 0; i < victims.length; i++) {
    if (i % 100 === 99) officerToken = (await tokenFor(a, officer)).token;
    const v = victims[i];
    const base = lab.region(v.region).base;
    const { token, status } = await tokenFor(base, v.c);
    if (status !== 200) throw new Error(`token in ${v.region} answered ${status}`);
    await until(async () => (await checked(base, token)) === 200, 10_000, `the token works in ${v.region}`);
    let stop = false;
    const poller = (async () => {
      for (;;) {
        const s = await checked(base, token);
        if (s === 401) return performance.now();
        if (stop) return Number.NaN;
      }
    })();
    const sent = performance.now();
    const res = await call(a, 'POST', '/v1/auth/revocations', officerToken, {
      client_id: v.c.client_id,
      reason: 'lab',
    });
    post201.push(performance.now() - sent);
    if (res.status !== 201) throw new Error(`revocation answered ${res.status}: ${JSON.stringify(res.json)}`);
    const timer = setTimeout(() => (stop = true), 10_000);
    const refusedAt = await poller;
    if (Number.isNaN(refusedAt)) missed[v.region]++;
    else fromSent[v.region].push(refusedAt - sent);
    clearTimeout(timer);
    if ((i + 1) % 100 === 0) log(`  ${i + 1}/${victims.length} revocations`);
  }
  return {
    fromSent: { b: stats(fromSent.b), c: stats(fromSent.c) },
    post201: stats(post201),
    missed,
  } satisfies RevocationResult;
}

export async function until(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(50);
  }
}

export interface HotPath {
  token: Stats;
  checked: Stats;
  publish: Stats;
}

/** Per region, one after the other: `n` token issuances, `n` scope-checked requests, `n` single-event publishes. */
export async function measureHotPath(
  lab: Lab,
  clients: Record<Region, CreatedClient>,
  n: number,
): Promise<Record<Region, HotPath>> {
  const out = {} as Record<Region, HotPath>;
  for (const r of lab.regions) {
    const client = clients[r.name];
    const tok: number[] = [];
    const chk: number[] = [];
    const pub: number[] = [];
    let token = '';
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const res = await tokenFor(r.base, client);
      tok.push(performance.now() - t0);
      if (res.status !== 200) throw new Error(`token in ${r.name} answered ${res.status}`);
      token = res.token;
    }
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const status = (await call(r.base, 'GET', '/v1/webhooks/endpoints?limit=1', token)).status;
      chk.push(performance.now() - t0);
      if (status !== 200) throw new Error(`scope-checked request in ${r.name} answered ${status}`);
    }
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const res = await call(r.base, 'POST', '/v1/webhooks/events', token, {
        type: 'lab.hotpath',
        data: { i },
      });
      pub.push(performance.now() - t0);
      if (res.status !== 202)
        throw new Error(`publish in ${r.name} answered ${res.status}: ${JSON.stringify(res.json)}`);
    }
    out[r.name] = { token: stats(tok), checked: stats(chk), publish: stats(pub) };
  }
  return out;
}

/** A webhook receiver in the root namespace (every region reaches it directly): counts each event id. */
export async function labReceiver(host: string, name: string) {
  const hits = new Map<string, number>();
  /** Each event's copies after the first: when each arrived and from which address (a region's dispatcher). */
  const repeats = new Map<string, { at: number; from: string; attempt: string }[]>();
  const first = new Map<string, { at: number; from: string; attempt: string }>();
  let pings = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString()) as { id?: string; type?: string };
        if (body.type === 'ping') pings++;
        else if (body.id) {
          const n = (hits.get(body.id) ?? 0) + 1;
          hits.set(body.id, n);
          const attempt = String(req.headers['x-service-delivery-attempt'] ?? '?');
          const copy = { at: Date.now(), from: req.socket.remoteAddress ?? '?', attempt };
          if (n === 1) first.set(body.id, copy);
          else repeats.set(body.id, [...(repeats.get(body.id) ?? []), copy]);
        }
      } catch {
        /* counted as nothing */
      }
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  const port = (server.address() as { port: number }).port;
  return {
    name,
    url: `http://${host}:${port}/hook/${name}`,
    hits,
    first,
    repeats,
    get pings() {
      return pings;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
export type LabReceiver = Awaited<ReturnType<typeof labReceiver>>;

export interface Publisher {
  accepted: Set<string>;
  /** When each accepted event's publish was answered (epoch ms). */
  acceptedAt: Map<string, number>;
  refused: number;
  errors: number;
  /** Longest time without an accepted event (ms). */
  longestGapMs: number;
  stop(): Promise<void>;
}

/**
 * Publishes `perBatch` events every `everyMs` to a region's ingress (ids `${tag}-${n}`), without
 * waiting for the previous batch (a steady rate whatever the latency; at most 50 batches in flight).
 */
export function publish(base: string, token: () => string, tag: string, perBatch: number, everyMs: number): Publisher {
  let running = true;
  let n = 0;
  let lastAccepted = Date.now();
  const inFlight = new Set<Promise<void>>();
  const p: Publisher = {
    accepted: new Set(),
    acceptedAt: new Map(),
    refused: 0,
    errors: 0,
    longestGapMs: 0,
    async stop() {
      running = false;
      await loop;
      await Promise.all(inFlight);
      p.longestGapMs = Math.max(p.longestGapMs, Date.now() - lastAccepted);
    },
  };
  const one = async () => {
    const events = Array.from({ length: perBatch }, () => ({ type: 'lab.event', id: `${tag}-${n++}`, data: {} }));
    const res = await call(base, 'POST', '/v1/webhooks/events/batch', token(), { events }).catch(() => null);
    if (res?.status === 202) {
      for (const r of res.json.results as { id?: string; error?: { status: number } }[]) {
        if (r.id) {
          p.accepted.add(r.id);
          p.acceptedAt.set(r.id, Date.now());
        } else p.refused++;
      }
      p.longestGapMs = Math.max(p.longestGapMs, Date.now() - lastAccepted);
      lastAccepted = Date.now();
    } else if (res?.status === 503) p.refused += perBatch;
    else p.errors += perBatch;
  };
  const loop = (async () => {
    let next = Date.now();
    while (running) {
      if (inFlight.size < 50) {
        const b = one();
        inFlight.add(b);
        void b.finally(() => inFlight.delete(b));
      } else p.errors += perBatch;
      next += everyMs;
      await sleep(Math.max(0, next - Date.now()));
    }
  })();
  return p;
}

/** (endpoint, event) pairs expected but never received, and pairs received more than once. */
export function tally(accepted: Iterable<string>, receivers: LabReceiver[]) {
  let lost = 0;
  let duplicates = 0;
  let expected = 0;
  const lostSample: string[] = [];
  /** Per receiver: events delivered more than once, and the most times one event was. */
  const repeated: Record<string, { events: number; most: number }> = {};
  for (const id of accepted)
    for (const r of receivers) {
      expected++;
      const c = r.hits.get(id) ?? 0;
      repeated[r.name] ??= { events: 0, most: 0 };
      if (c === 0) {
        lost++;
        if (lostSample.length < 5) lostSample.push(`${id}→${r.name}`);
      } else if (c > 1) {
        duplicates += c - 1;
        repeated[r.name].events++;
        repeated[r.name].most = Math.max(repeated[r.name].most, c);
      }
    }
  return { expected, lost, duplicates, lostSample, repeated };
}

export async function registerReceivers(lab: Lab, adminToken: string, receivers: LabReceiver[]) {
  for (const r of receivers) {
    const res = await call(lab.region('a').base, 'POST', '/v1/webhooks/endpoints', adminToken, {
      url: r.url,
      events: ['lab.event'],
    });
    if (res.status !== 201) throw new Error(`registering ${r.url}: ${res.status} ${JSON.stringify(res.json)}`);
  }
  await until(async () => receivers.every((r) => r.pings > 0), 30_000, 'the endpoints verified');
}

export interface CutResult {
  /** The repeated events by when their publish was answered: seconds before the cut, `cut+s`, `healed+s`. */
  repeatedAt: Record<string, number>;
  /** Repeats by who sent the first copy and when → who sent the repeat and when. */
  repeatedBy: Record<string, number>;
  cutMs: number;
  /** Probes (a token and a scope-checked request every 200 ms) that did not answer 200, per region. */
  failedProbes: Record<Region, number>;
  probes: Record<Region, number>;
  /** From the cut until c first answered 503 (its view stale), and its longest staleness seen. */
  cFailClosedAfterMs: number;
  /** From the end of the cut until c served a valid token again. */
  cServingAfterMs: number;
  /**
   * Requests with a token revoked during the cut that c accepted: before it failed closed (it
   * cannot know; bounded by SLUICE_KAFKA_STALE_MS), and after it came back (must be 0).
   */
  staleAcceptsBeforeFailClosed: number;
  staleAcceptsAfterReturn: number;
  revokedDuringCut: number;
  /** Revocations sent during the cut that went through only once it had ended. */
  confirmedAfterCut: number;
  /** Attempts answered 503 (each sent again until one went through). */
  refusedDuringCut: number;
  publish: { accepted: number; refused: number; longestGapMs: Record<string, number> };
  lost: number;
  duplicates: number;
  expected: number;
  lostSample: string[];
  repeated: Record<string, { events: number; most: number }>;
  /** From the end of the cut until every accepted event was delivered (or the drain gave up). */
  drainedAfterMs: number;
}

/**
 * Region c cut off for `cutMs` (every proxy into and out of it disabled) while a and b publish
 * `rate` events/s between them to endpoints of `receivers`; revocations made in a during the cut
 * must apply in c before c serves again.
 */
export async function measureCut(
  lab: Lab,
  ctx: Context,
  receivers: LabReceiver[],
  opts: { cutMs: number; rate: number; revocations: number; drainMs?: number; log: (s: string) => void },
): Promise<CutResult> {
  const { log } = opts;
  const a = lab.region('a').base;
  const c = lab.region('c').base;
  const officerIn = (region: Region) => ({ tenant: 'lab', role: 'security-officer', region });
  const [pubA, pubB, officer, ...rest] = await createClients(ctx, [
    { tenant: 'lab', role: 'admin', region: 'a' },
    { tenant: 'lab', role: 'admin', region: 'b' },
    officerIn('a'),
    ...REGIONS.map(officerIn),
    ...Array.from({ length: opts.revocations }, () => officerIn('c')),
  ]);
  const publishers = { a: pubA, b: pubB };
  const probe = Object.fromEntries(REGIONS.map((r, i) => [r, rest[i]])) as Record<Region, CreatedClient>;
  const victims = rest.slice(REGIONS.length);
  await until(async () => (await tokenFor(c, victims[victims.length - 1])).status === 200, 30_000, 'clients in c');
  const pubTokens = {
    a: await knownToken(a, publishers.a),
    b: await knownToken(lab.region('b').base, publishers.b),
  };
  const officerToken = await knownToken(a, officer);
  const victimTokens: string[] = [];
  for (const v of victims) victimTokens.push((await tokenFor(c, v)).token);
  for (const t of victimTokens) await until(async () => (await checked(c, t)) === 200, 10_000, 'victim token in c');
  const validInC = (await tokenFor(c, probe.c)).token;

  const perRegion = opts.rate / 2;
  const batch = Math.max(1, Math.round(perRegion / 10));
  const pubs = [
    publish(a, () => pubTokens.a, 'cut-a', batch, 100),
    publish(lab.region('b').base, () => pubTokens.b, 'cut-b', batch, 100),
  ];
  const failedProbes = { a: 0, b: 0, c: 0 } as Record<Region, number>;
  const probes = { a: 0, b: 0, c: 0 } as Record<Region, number>;
  let probing = true;
  let cutAt = 0;
  let healedAt = 0;
  let cFailClosedAt = 0;
  let cServingAt = 0;
  const revokedAt = new Map<number, number>();
  let staleBefore = 0;
  let staleAfter = 0;
  const probeLoop = (async () => {
    while (probing) {
      await Promise.all(
        lab.regions.map(async (r) => {
          if (r.name === 'c') return;
          const t = await tokenFor(r.base, probe[r.name]).catch(() => ({ status: 0, token: '' }));
          const s = t.status === 200 ? await checked(r.base, t.token) : t.status;
          probes[r.name]++;
          if (t.status !== 200 || s !== 200) failedProbes[r.name]++;
        }),
      );
      await sleep(200);
    }
  })();
  // Region c, watched every 100 ms with a valid token and every token revoked so far.
  const watchC = (async () => {
    while (probing) {
      const now = Date.now();
      const s = await checked(c, validInC);
      probes.c++;
      if (s !== 200) failedProbes.c++;
      if (cutAt && !cFailClosedAt && s === 503) cFailClosedAt = now;
      if (healedAt && !cServingAt && s === 200) cServingAt = now;
      for (const [i, at] of revokedAt)
        if ((await checked(c, victimTokens[i])) === 200 && Date.now() > at) {
          if (healedAt) {
            staleAfter++;
            log(`  c accepted token ${i} after its return, revoked ${Date.now() - at} ms before`);
          } else staleBefore++;
        }
      await sleep(100);
    }
  })();
  await sleep(5000);
  log(`  cutting region c off for ${opts.cutMs / 1000} s`);
  await lab.cut('c');
  cutAt = Date.now();
  const spacing = Math.max(200, (opts.cutMs - 3000) / Math.max(1, opts.revocations));
  // While c's brokers are being fenced and their partitions (the audit chain's, the transaction
  // coordinator's) led elsewhere, a revocation answers 503 (its audit entry not taken, or not seen,
  // within SLUICE_REVOCATION_ANSWER_MS) and goes on in the background. The caller sends it again, as
  // a client would: 201, or 200 once the earlier attempt had gone through. One not through
  // when the cut ends is sent again once c is back (it counts from then); each re-send is counted.
  let refusedDuringCut = 0;
  const unconfirmed: number[] = [];
  const revoke = async (i: number) => {
    const res = await call(a, 'POST', '/v1/auth/revocations', officerToken, {
      client_id: victims[i].client_id,
      reason: 'lab cut',
    });
    if (res.status !== 201 && res.status !== 200 && res.status !== 503)
      throw new Error(`revocation ${i} answered ${res.status}: ${JSON.stringify(res.json)}`);
    return res.status;
  };
  for (let i = 0; i < victims.length; i++) {
    await sleep(i === 0 ? 1000 : spacing);
    for (let sent = 0; ; sent++) {
      const status = await revoke(i);
      // 200 after a re-send: that attempt had revoked after all (the same record comes back).
      if (status === 201 || (status === 200 && sent > 0)) {
        revokedAt.set(i, Date.now());
        break;
      }
      if (status === 200) throw new Error(`revocation ${i} answered 200 the first time: revoked before?`);
      refusedDuringCut++;
      log(`  revocation ${i}: 503 ${Date.now() - cutAt} ms into the cut; sent again`);
      if (Date.now() > cutAt + opts.cutMs) {
        unconfirmed.push(i);
        break;
      }
      await sleep(500);
    }
  }
  await sleep(Math.max(0, cutAt + opts.cutMs - Date.now()));
  await lab.cut('c', false);
  healedAt = Date.now();
  log('  region c back; publishing 10 s more');
  for (const i of unconfirmed) {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const status = await revoke(i);
      if (status === 201 || status === 200) break;
      if (Date.now() > deadline) throw new Error(`revocation ${i} did not go through within 60 s of the cut's end`);
      refusedDuringCut++;
      await sleep(500);
    }
    log(`  revocation ${i} went through ${Date.now() - healedAt} ms after the cut`);
    // c serves by then: it refuses the token once the revocation reaches it (within 250 ms), not at once.
    revokedAt.set(i, Date.now() + 1000);
  }
  await until(async () => cServingAt > 0, 120_000, 'c serving again');
  await sleep(Math.max(0, 10_000 - (Date.now() - healedAt)));
  for (const p of pubs) await p.stop();
  probing = false;
  await Promise.all([probeLoop, watchC]);
  const accepted = new Set([...pubs[0].accepted, ...pubs[1].accepted]);
  log(`  waiting for ${accepted.size} events × ${receivers.length} endpoints`);
  // Waited for while deliveries still arrive (a loaded machine drains slowly), up to drainMs in all;
  // 30 s without one ends the wait.
  const expected = accepted.size * receivers.length;
  const arrived = () => expected - tally(accepted, receivers).lost;
  await untilStalled(arrived, expected, { maxMs: opts.drainMs ?? 180_000, everyMs: 500 });
  const drainedAfterMs = Date.now() - healedAt;
  await sleep(3000); // late duplicates
  const t = tally(accepted, receivers);
  // A moment as the second from the cut ("-2", "cut+5") or from the heal ("healed+3").
  const phase = (at: number) =>
    at < cutAt
      ? `${Math.floor((at - cutAt) / 1000)}`
      : at < healedAt
        ? `cut+${Math.floor((at - cutAt) / 1000)}`
        : `healed+${Math.floor((at - healedAt) / 1000)}`;
  // When the repeated events were published (where to look for the cause).
  const repeatedAt: Record<string, number> = {};
  for (const id of accepted) {
    if (!receivers.some((r) => (r.hits.get(id) ?? 0) > 1)) continue;
    const key = phase(pubs[0].acceptedAt.get(id) ?? pubs[1].acceptedAt.get(id) ?? 0);
    repeatedAt[key] = (repeatedAt[key] ?? 0) + 1;
  }
  // Who sent each repeat and when: the first copy's region → the repeat's region, by the second each
  // arrived (a rebalance, a takeover after a crash, a record written twice differ here).
  const regionOf = (ip: string) => lab.regions.find((r) => ip.endsWith(r.ip))?.name ?? ip.replace(/^::ffff:/, '');
  const repeatedBy: Record<string, number> = {};
  for (const r of receivers)
    for (const [id, copies] of r.repeats) {
      const one = r.first.get(id);
      for (const copy of copies) {
        const key =
          `${regionOf(one?.from ?? '?')}@${phase(one?.at ?? 0)}#${one?.attempt ?? '?'}` +
          `→${regionOf(copy.from)}@${phase(copy.at)}#${copy.attempt}`;
        repeatedBy[key] = (repeatedBy[key] ?? 0) + 1;
      }
    }
  return {
    repeatedAt,
    repeatedBy,
    cutMs: opts.cutMs,
    failedProbes,
    probes,
    cFailClosedAfterMs: cFailClosedAt ? cFailClosedAt - cutAt : Number.NaN,
    cServingAfterMs: cServingAt - healedAt,
    staleAcceptsBeforeFailClosed: staleBefore,
    staleAcceptsAfterReturn: staleAfter,
    revokedDuringCut: revokedAt.size - unconfirmed.length,
    confirmedAfterCut: unconfirmed.length,
    refusedDuringCut,
    publish: {
      accepted: accepted.size,
      refused: pubs[0].refused + pubs[1].refused + pubs[0].errors + pubs[1].errors,
      longestGapMs: { a: pubs[0].longestGapMs, b: pubs[1].longestGapMs },
    },
    ...t,
    drainedAfterMs,
  };
}

export interface KillResult {
  region: Region;
  downMs: number;
  accepted: number;
  refused: number;
  longestGapMs: Record<string, number>;
  lost: number;
  duplicates: number;
  expected: number;
  lostSample: string[];
  repeated: Record<string, { events: number; most: number }>;
}

/** A region's broker SIGKILLed for `downMs` under `rate` events/s published in every region. */
export async function measureBrokerKill(
  lab: Lab,
  ctx: Context,
  receivers: LabReceiver[],
  opts: { region: Region; downMs: number; rate: number; log: (s: string) => void },
): Promise<KillResult> {
  const tokens = {} as Record<Region, string>;
  for (const r of lab.regions) {
    const publisher = await createClient(ctx, { tenant: 'lab', role: 'admin', region: r.name });
    tokens[r.name] = await knownToken(r.base, publisher);
  }
  const batch = Math.max(1, Math.round(opts.rate / 30));
  const pubs = lab.regions.map((r) => publish(r.base, () => tokens[r.name], `kill-${r.name}`, batch, 100));
  await sleep(5000);
  opts.log(`  SIGKILL broker ${opts.region} for ${opts.downMs / 1000} s`);
  await lab.killBroker(opts.region);
  await sleep(opts.downMs);
  await lab.startBroker(opts.region);
  await sleep(10_000);
  for (const p of pubs) await p.stop();
  const accepted = new Set(pubs.flatMap((p) => [...p.accepted]));
  const deadline = Date.now() + 180_000;
  while (tally(accepted, receivers).lost > 0 && Date.now() < deadline) await sleep(500);
  await sleep(3000);
  return {
    region: opts.region,
    downMs: opts.downMs,
    accepted: accepted.size,
    refused: pubs.reduce((n, p) => n + p.refused + p.errors, 0),
    longestGapMs: Object.fromEntries(lab.regions.map((r, i) => [r.name, pubs[i].longestGapMs])),
    ...tally(accepted, receivers),
  };
}
