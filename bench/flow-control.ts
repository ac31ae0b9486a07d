/**
 * The flow-control bench (issue 22, items 3 and 4, measured from outside): do an endpoint's
 * `rate_limit_per_second`, `max_in_flight`, a receiver's Retry-After and `ordering: "key"` hold
 * across a cluster of dispatchers? Every piece is its own OS process: Kafka (`sluice kafka`, unless
 * KAFKA_BROKERS is set), `sluice start` (one worker) and `--dispatchers N` extra `sluice dispatcher`
 * members (default 3), the receiver and the load generator (harness/receiver.ts, load.ts).
 * This process only orchestrates and reads the numbers. Sluice runs with
 * SLUICE_TIME_SCALE `--time-scale` (600: the ladder's 30 s first rung is 50 ms; rates, in-flight
 * limits and Retry-After stay real time).
 *
 * A. Flow control, tenant `flow`, each endpoint its own receiver port and event type:
 *    L50 `rate_limit_per_second: 50` (receiver answers at once), flooded with `--l50-events` (3,000);
 *    M4 `max_in_flight: 4` (receiver holds each request 50 ms), `--m4-events` (1,000);
 *    R `rate_limit_per_second: 50`, its receiver answering every `--r-every`-th request (10) 429 with
 *    `Retry-After: 2`, `--r-events` (200); U no limits (answers at once), `--u-events` (20,000).
 *    Phase 1 (after an unmeasured warm-up): U alone. Phase 2: all four flooded at once (batches).
 *    Reported: the most requests in any sliding 1 s window (L50, R: at most 55), the most open at
 *    once (M4: at most 4), events received, U's delivery rate in both phases and their ratio, the
 *    least time from a 429 to R's next request (at least 2 s, less 5 ms for whole-millisecond
 *    clocks), failed attempts (GET /v1/webhooks/stats), DLQ entries (GET /v1/webhooks/dlq) and the
 *    outcomes of sluice_deliveries_total over every dispatcher (`deferred` must stay 0).
 * B. Ordering, tenant `ordered`: one endpoint with `ordering: "key"` whose lane is owned by a
 *    `sluice dispatcher` process (endpoints are registered until one's partition of `sluice.lanes`
 *    belongs to one, by the consumer group's assignment); `--keys` (100) × `--per-key` (100) events
 *    published in seq order per key (one sequential stream of batches, keys interleaved,
 *    `--ordered-rate` events/s, 200; 0: as fast as accepted). The receiver answers `--fail-rate`
 *    (0.3) of requests 500 at random and the rest after a random 0-20 ms. Once half the events were
 *    received, the lane's owner is killed (SIGKILL). Reported: order inversions among first
 *    sightings per key (must be 0), events neither delivered nor dead-lettered (must be 0), repeats,
 *    and publish-to-first-2xx times before the kill (split by whether a failure of the key held the
 *    event back) and after it.
 *
 *   npm run bench:flow -- [--quick] [--dispatchers 3] [--time-scale 600] [--l50-events 3000]
 *       [--m4-events 1000] [--r-events 200] [--r-every 10] [--u-events 20000] [--keys 100]
 *       [--per-key 100] [--ordered-rate 200] [--fail-rate 0.3] [--ordered-in-flight N]
 *       [--label current] [--results FILE] [--sluice-dir DIR]  (another checkout, e.g. the baseline)
 *
 * --quick: L50 500, M4 200, R 50, U 5,000 events, 20 keys × 50. Writes its section of
 * bench/RESULTS.md (`<!-- flow-control:<label>:begin/end -->`), except with --quick unless
 * --results is given. Exits 1 when a must-hold check fails (listed under "Checks" in the report:
 * the windows, M4's requests open, R's gaps, every event received, no failed attempt at L50 and
 * M4, no DLQ entry and nothing deferred in A, no inversion and nothing lost in B); 2 on an error.
 */
import { parseArgs } from 'node:util';
import kafkajs from 'kafkajs';
import { createKafka } from '../core/kafka/client.ts';
import { freePort } from '../core/net/free-port.ts';
import { BenchRun } from '../harness/bench.ts';
import type { Launched } from '../harness/children.ts';
import { checkLabel, printHelp, ROOT, resultsFile, say, sleep, writeResults } from '../harness/cli.ts';
import type { StreamResult } from '../harness/load.ts';
import type { PortSpec, PortStats } from '../harness/receiver.ts';
import type { Latency } from '../harness/stats.ts';
import { settleGroups } from '../harness/kafka.ts';
import { RECEIVER_ENV, sluiceEnv, startDispatchers } from '../harness/sluice.ts';
import {
  adminClient,
  type Api,
  type BenchClient,
  bearerToken,
  dlqEventIds,
  registerEndpoint,
  sluiceApi,
} from '../harness/sluice-api.ts';
import { machineLine, measuredCommit } from '../harness/results-section.ts';
import { fmt } from '../harness/stats.ts';

const { AssignerProtocol, Partitioners } = kafkajs;

const { values: opt } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    dispatchers: { type: 'string', default: '3' },
    'time-scale': { type: 'string', default: '600' },
    'l50-events': { type: 'string' },
    'm4-events': { type: 'string' },
    'r-events': { type: 'string' },
    'r-every': { type: 'string', default: '10' },
    'u-events': { type: 'string' },
    keys: { type: 'string' },
    'per-key': { type: 'string' },
    'ordered-rate': { type: 'string', default: '200' },
    'fail-rate': { type: 'string', default: '0.3' },
    'ordered-in-flight': { type: 'string' },
    label: { type: 'string', default: 'current' },
    results: { type: 'string' },
    'sluice-dir': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (opt.help) printHelp(import.meta.url);
const quick = opt.quick === true;
const DISPATCHERS = Number(opt.dispatchers);
const TIME_SCALE = Number(opt['time-scale']);
const L50_EVENTS = Number(opt['l50-events'] ?? (quick ? 500 : 3000));
const M4_EVENTS = Number(opt['m4-events'] ?? (quick ? 200 : 1000));
const R_EVENTS = Number(opt['r-events'] ?? (quick ? 50 : 200));
const R_EVERY = Number(opt['r-every']);
const U_EVENTS = Number(opt['u-events'] ?? (quick ? 5000 : 20_000));
const KEYS = Number(opt.keys ?? (quick ? 20 : 100));
const PER_KEY = Number(opt['per-key'] ?? (quick ? 50 : 100));
const ORDERED_RATE = Number(opt['ordered-rate']);
const FAIL_RATE = Number(opt['fail-rate']);
const ORDERED_IN_FLIGHT = opt['ordered-in-flight'] === undefined ? null : Number(opt['ordered-in-flight']);
checkLabel(opt.label);
for (const [name, v] of Object.entries({
  DISPATCHERS,
  TIME_SCALE,
  L50_EVENTS,
  M4_EVENTS,
  R_EVENTS,
  R_EVERY,
  U_EVENTS,
  KEYS,
  PER_KEY,
}))
  if (!Number.isInteger(v) || v <= 0) throw new Error(`${name} must be a positive integer`);
if (!(ORDERED_RATE >= 0)) throw new Error('--ordered-rate must be 0 or more');
if (!(FAIL_RATE >= 0 && FAIL_RATE < 1)) throw new Error('--fail-rate must be in [0, 1)');
if (ORDERED_IN_FLIGHT !== null && !(Number.isInteger(ORDERED_IN_FLIGHT) && ORDERED_IN_FLIGHT > 0))
  throw new Error('--ordered-in-flight must be a positive integer');

/** The policies under test and what must hold of them. */
const RATE = 50;
/** Date.now() is whole milliseconds, in Sluice and here: a Retry-After gap may look this much short. */
const CLOCK_SLACK_MS = 5;
const WINDOW_MAX = 55;
const IN_FLIGHT = 4;
const HOLD_MS = 50;
const RETRY_AFTER_S = 2;
const ORDERED_DELAY_MAX_MS = 20;

const bench = new BenchRun('flow', opt['sluice-dir'] ?? ROOT);
const { children, prefix, sluice: SLUICE } = bench;

/** A Sluice process with a dispatcher in it: its Kafka client id names it in the consumer groups. */
interface Node {
  name: string;
  clientId: string;
  adminPort: number;
  launched: Launched;
}

type Outcomes = Record<string, number>;

/** sluice_deliveries_total by outcome, summed over the nodes that answer. */
async function outcomes(nodes: Node[]): Promise<Outcomes> {
  const sum: Outcomes = {};
  for (const n of nodes) {
    if (n.launched.proc.exitCode !== null || n.launched.proc.signalCode !== null) continue;
    const text = await fetch(`http://127.0.0.1:${n.adminPort}/metrics`).then(
      (r) => r.text(),
      () => '',
    );
    for (const m of text.matchAll(/^sluice_deliveries_total\{([^}]*)\}\s+(\S+)/gm)) {
      const outcome = /outcome="([^"]*)"/.exec(m[1])?.[1];
      if (outcome) sum[outcome] = (sum[outcome] ?? 0) + Number(m[2]);
    }
  }
  return sum;
}

const delta = (after: Outcomes, before: Outcomes): Outcomes =>
  Object.fromEntries(Object.keys(after).map((k) => [k, after[k] - (before[k] ?? 0)]));

/** Events/s from the first first-2xx to the last. */
const rateOf = (s: PortStats): number | null =>
  s.firstOkAt !== null && s.lastOkAt !== null && s.lastOkAt > s.firstOkAt
    ? (s.ok - 1) / ((s.lastOkAt - s.firstOkAt) / 1000)
    : null;
const secondsOf = (s: PortStats): number | null =>
  s.firstOkAt !== null && s.lastOkAt !== null ? (s.lastOkAt - s.firstOkAt) / 1000 : null;
const lat = (l: Latency) => `${fmt(l.p50)} / ${fmt(l.p99)} / ${fmt(l.max)}`;

async function main(): Promise<number> {
  const { startedAt, load1 } = bench;
  const { brokers } = await bench.startKafka();
  const receiver = bench.receiver().call;
  const load = bench.load().call;

  // Sluice: `sluice start` with one worker, and the extra dispatchers
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...sluiceEnv({ brokers, prefix, port, dataDir: bench.scratch.dataDir() }),
    ...RECEIVER_ENV,
    SLUICE_WORKERS: '1',
    SLUICE_TIME_SCALE: String(TIME_SCALE),
  };
  say(`starting sluice start (topic prefix ${prefix}, time scale ${TIME_SCALE}) and ${DISPATCHERS} dispatcher(s)...`);
  const nodes: Node[] = [];
  const started = await bench.sluiceStart(port, { ...env, SLUICE_KAFKA_CLIENT_ID: `${prefix}-start` });
  nodes.push({ name: 'sluice start', clientId: `${prefix}-start`, ...started });
  for (const d of await startDispatchers(children, SLUICE, env, DISPATCHERS, prefix))
    nodes.push({ ...d, clientId: d.clientId! });
  const base = `http://127.0.0.1:${port}`;
  const admin = createKafka(brokers, `${prefix}-bench`).admin();
  await admin.connect();
  bench.onShutdown(() => admin.disconnect());

  /** The node that owns the endpoint's partition of `sluice.lanes` now (by the group's assignment), or null. */
  const laneOwner = async (endpointId: string): Promise<Node | null> => {
    const topic = `${prefix}.lanes`;
    const meta = await admin.fetchTopicMetadata({ topics: [topic] });
    const partition = Partitioners.DefaultPartitioner()({
      topic,
      partitionMetadata: meta.topics[0].partitions,
      message: { key: endpointId, value: null },
    });
    const { groups } = await admin.describeGroups([`${prefix}.dispatch-lanes`]);
    for (const m of groups[0]?.members ?? []) {
      const a = AssignerProtocol.MemberAssignment.decode(m.memberAssignment);
      if (a?.assignment[topic]?.includes(partition)) return nodes.find((n) => n.clientId === m.clientId) ?? null;
    }
    return null;
  };

  // tenants and endpoints
  const createClient = (tenant: string) => adminClient(SLUICE, ROOT, env, tenant);

  const flow = await createClient('flow');
  const orderedClient = await createClient('ordered');
  const tokenOf = (c: BenchClient) => bearerToken(base, c);

  const patch = async (api: Api, id: string, policy: Record<string, unknown>): Promise<void> => {
    const res = await api('PATCH', `/v1/webhooks/endpoints/${id}`, policy);
    const echoed = Object.entries(policy).every(([k, v]) => res.body?.[k] === v);
    if (res.status !== 200 || !echoed)
      throw new Error(`PATCH ${id} ${JSON.stringify(policy)} answered ${res.status}: ${JSON.stringify(res.body)}`);
  };
  const failedAttempts = async (id: string): Promise<number | null> => {
    const res = await flowApi('GET', `/v1/webhooks/stats?endpoint_id=${encodeURIComponent(id)}`);
    return res.status === 200 ? (res.body.totals?.failed ?? null) : null;
  };

  const specs: PortSpec[] = [
    { name: 'L50' },
    { name: 'M4', holdMs: HOLD_MS },
    { name: 'R', tooManyEvery: R_EVERY, retryAfterS: RETRY_AFTER_S },
    { name: 'U' },
    { name: 'O', ordered: true, failRate: FAIL_RATE, delayMaxMs: ORDERED_DELAY_MAX_MS },
  ];
  const ports = (await receiver({ op: 'listen', ports: specs })).ports!;
  const urlOf = (name: string, query = '') =>
    `http://127.0.0.1:${ports[specs.findIndex((s) => s.name === name)]}/hook${query}`;
  const flowApi = sluiceApi(base, () => flowToken);
  const orderedApi = sluiceApi(base, () => orderedToken);
  const flowToken = await tokenOf(flow);
  const orderedToken = await tokenOf(orderedClient);
  const policies: Record<string, Record<string, unknown>> = {
    L50: { rate_limit_per_second: RATE },
    M4: { max_in_flight: IN_FLIGHT },
    R: { rate_limit_per_second: RATE },
  };
  const typeOf = (name: string) => `flow.${name.toLowerCase()}`;
  const ids: Record<string, string> = {};
  for (const name of ['L50', 'M4', 'R', 'U']) {
    ids[name] = await registerEndpoint(flowApi, urlOf(name), { events: [typeOf(name)] });
    if (policies[name]) await patch(flowApi, ids[name], policies[name]);
  }
  say(`registered L50, M4, R (limits set by PATCH) and U for tenant flow`);

  const notes: string[] = [];
  const members = 1 + DISPATCHERS;
  if (!(await settleGroups(brokers, prefix, members, ['fan-out', 'dispatch', 'dispatch-rungs', 'dispatch-lanes'])))
    notes.push(`the consumer groups were not Stable with ${members} members within 90 s; measured anyway.`);
  await sleep(1500); // every dispatcher's endpoint view has the endpoints and their policies
  const owners: Record<string, string> = {};
  for (const name of ['L50', 'M4', 'R']) owners[name] = (await laneOwner(ids[name]))?.name ?? '?';
  say(
    `lane owners: ${Object.entries(owners)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
  );

  const progress = async () => (await receiver({ op: 'progress' })).progress!;
  const portStats = async (splitAt?: number) => {
    const all = (await receiver({ op: 'stats', splitAt })).stats!;
    return Object.fromEntries(all.map((s) => [s.name, s])) as Record<string, PortStats>;
  };
  /** Waits until every named port answered 2xx to `want[name]` events, or the deadline; true when they all did. */
  const awaitDelivered = async (want: Record<string, number>, limitMs: number, label: string): Promise<boolean> => {
    const deadline = Date.now() + limitMs;
    for (let lastSay = Date.now(); ; await sleep(250)) {
      const ok = await progress();
      const done = Object.entries(want).every(([k, n]) => (ok[k] ?? 0) >= n);
      if (done) return true;
      if (Date.now() > deadline) return false;
      if (Date.now() - lastSay >= 5000) {
        lastSay = Date.now();
        say(
          `  ${label}: ${Object.keys(want)
            .map((k) => `${k} ${fmt(ok[k] ?? 0)}/${fmt(want[k])}`)
            .join(', ')}`,
        );
      }
    }
  };
  const flood = async (streams: { name: string; events: number; batch: number; connections: number }[]) => {
    const results = (
      await load({
        op: 'flood',
        spec: { base, client: flow, streams: streams.map((s) => ({ ...s, type: typeOf(s.name) })) },
      })
    ).flood!;
    return Object.fromEntries(streams.map((s, i) => [s.name, results[i]])) as Record<string, StreamResult>;
  };

  // A, phase 1: U alone
  const uStream = { name: 'U', events: U_EVENTS, batch: 500, connections: 4 };
  // A warm-up first (JIT, connections, the groups' first fetches), not measured.
  const warm = await flood([{ ...uStream, events: Math.min(U_EVENTS, 5000) }]);
  await awaitDelivered({ U: warm.U.accepted }, 120_000, 'U warm-up');
  say(`A, phase 1: U alone, ${fmt(U_EVENTS)} events...`);
  await receiver({ op: 'reset' });
  const before1 = await outcomes(nodes);
  const pub1 = await flood([uStream]);
  const all1 = await awaitDelivered({ U: pub1.U.accepted }, 120_000, 'U alone');
  const out1 = delta(await outcomes(nodes), before1);
  const alone = (await portStats()).U;
  say(
    `  U alone: ${fmt(alone.ok)}/${fmt(pub1.U.accepted)} received in ${fmt(secondsOf(alone), 1)} s, ` +
      `${fmt(rateOf(alone))} events/s${all1 ? '' : ' (NOT all within 120 s)'}`,
  );

  // A, phase 2: everything flooded at once
  const expectS = Math.max(
    L50_EVENTS / RATE,
    M4_EVENTS / (IN_FLIGHT * (1000 / HOLD_MS)),
    R_EVENTS / RATE + (R_EVENTS / R_EVERY) * RETRY_AFTER_S * 1.5,
  );
  say(
    `A, phase 2: L50 ${fmt(L50_EVENTS)}, M4 ${fmt(M4_EVENTS)}, R ${fmt(R_EVENTS)} and U ${fmt(U_EVENTS)} ` +
      `events at once (~${fmt(expectS)} s)...`,
  );
  await receiver({ op: 'reset' });
  const before2 = await outcomes(nodes);
  const pub2 = await flood([
    uStream,
    { name: 'L50', events: L50_EVENTS, batch: 250, connections: 1 },
    { name: 'M4', events: M4_EVENTS, batch: 250, connections: 1 },
    { name: 'R', events: R_EVENTS, batch: 50, connections: 1 },
  ]);
  const want2 = Object.fromEntries(Object.entries(pub2).map(([k, r]) => [k, r.accepted]));
  const all2 = await awaitDelivered(want2, (expectS + 60) * 1000, 'phase 2');
  const out2 = delta(await outcomes(nodes), before2);
  const s2 = await portStats();
  await sleep(3000); // the attempt history trails the attempts by a digest window and a fetch
  const failed: Record<string, number | null> = {};
  const dlq: Record<string, number> = {};
  for (const name of ['L50', 'M4', 'R', 'U']) {
    failed[name] = await failedAttempts(ids[name]);
    dlq[name] = (await dlqEventIds(flowApi, ids[name])).length;
  }
  for (const name of ['L50', 'M4', 'R', 'U'])
    say(
      `  ${name}: ${fmt(s2[name].ok)}/${fmt(pub2[name].accepted)} received, ${fmt(s2[name].requests)} requests, ` +
        `max ${fmt(s2[name].maxInWindow)} in 1 s, max ${fmt(s2[name].maxOpen)} open, ` +
        `${fmt(secondsOf(s2[name]), 1)} s, ${fmt(rateOf(s2[name]))} events/s; failed attempts ${fmt(failed[name])}, ` +
        `DLQ ${fmt(dlq[name])}`,
    );
  const uRatio = (rateOf(s2.U) ?? Number.NaN) / (rateOf(alone) ?? Number.NaN);
  say(
    `  U's rate with the others / alone: ${fmt(uRatio, 2)}; R: ${fmt(s2.R.tooMany)} × 429, ` +
      `least time to the next request ${fmt(s2.R.minGapAfter429, 1)} ms`,
  );
  say(`  outcomes (all dispatchers): ${JSON.stringify(out2)}`);

  // B: ordering, and the lane's owner killed halfway
  const total = KEYS * PER_KEY;
  let chosen: { id: string; type: string; owner: Node | null } | null = null;
  for (let c = 1; c <= 8 && chosen?.owner?.name.startsWith('dispatcher') !== true; c++) {
    const type = `ordered.c${c}`;
    const id = await registerEndpoint(orderedApi, urlOf('O', `?c=${c}`), { events: [type] });
    chosen = { id, type, owner: await laneOwner(id) };
  }
  const policy = { ordering: 'key', ...(ORDERED_IN_FLIGHT === null ? {} : { max_in_flight: ORDERED_IN_FLIGHT }) };
  await patch(orderedApi, chosen!.id, policy);
  const { id: orderedId, type: orderedType } = chosen!;
  await sleep(1500);
  say(
    `B: ${KEYS} keys × ${PER_KEY} events to an endpoint with ordering "key" ` +
      `(lane owner ${chosen!.owner?.name ?? '?'}), ${FAIL_RATE * 100} % of requests failing; ` +
      `${ORDERED_RATE > 0 ? `${ORDERED_RATE} events/s` : 'as fast as accepted'}...`,
  );
  await receiver({ op: 'reset' });
  const publishing = load({
    op: 'ordered',
    spec: {
      base,
      client: orderedClient,
      type: orderedType,
      keys: KEYS,
      perKey: PER_KEY,
      rate: ORDERED_RATE,
      batchMax: 500,
    },
  });
  let killed: { name: string; owner: boolean; at: number; after: number } | null = null;
  const publishDone: { result: StreamResult | null } = { result: null };
  publishing.then(
    (r) => (publishDone.result = r.ordered!),
    () => {},
  );
  for (const deadline = Date.now() + 600_000; killed === null && Date.now() < deadline; await sleep(50)) {
    const ok = (await progress()).O ?? 0;
    if (ok < total / 2) {
      if (publishDone.result !== null && ok >= publishDone.result.accepted) break;
      continue;
    }
    const owner = await laneOwner(orderedId);
    const victim = owner?.name.startsWith('dispatcher') ? owner : nodes[1];
    victim.launched.proc.kill('SIGKILL');
    killed = { name: victim.name, owner: victim === owner, at: Date.now(), after: ok };
    say(
      `  SIGKILL ${victim.name}${victim === owner ? ' (the lane owner)' : ` (not the owner: ${owner?.name ?? '?'})`} ` +
        `after ${fmt(ok)} events`,
    );
  }
  if (killed === null) notes.push('B: no dispatcher was killed (half the events were never received).');
  const published = (await publishing).ordered!;
  // Every event delivered or dead-lettered; after the kill the lane waits out the session timeout (30 s).
  let dlqIds: string[] = [];
  for (let lastOk = -1, lastChange = Date.now(), lastSay = Date.now(), lastDlq = 0; ; await sleep(500)) {
    const ok = (await progress()).O ?? 0;
    if (ok !== lastOk) {
      lastOk = ok;
      lastChange = Date.now();
    }
    if (ok >= published.accepted) break;
    if (Date.now() - lastChange > 5000 && Date.now() - lastDlq > 5000) {
      lastDlq = Date.now();
      dlqIds = await dlqEventIds(orderedApi, orderedId);
      if (ok + dlqIds.length >= published.accepted) break;
      if (Date.now() - lastChange > 120_000) {
        notes.push('B: no event delivered for 120 s; gave up waiting.');
        break;
      }
    }
    if (Date.now() - lastSay >= 5000) {
      lastSay = Date.now();
      say(`  ordered: ${fmt(ok)}/${fmt(published.accepted)} delivered`);
    }
  }
  await sleep(1000);
  const so = (await portStats(killed?.at)).O;
  dlqIds = await dlqEventIds(orderedApi, orderedId);
  const delivered = new Set((await receiver({ op: 'ids', name: 'O' })).ids!);
  const dlqSet = new Set(dlqIds);
  const lostB = published.ids.filter((id) => !delivered.has(id) && !dlqSet.has(id)).length;
  const bothB = dlqIds.filter((id) => delivered.has(id)).length;
  const ord = so.ordered!;
  const oSeconds = secondsOf(so);
  say(
    `  ordered: ${fmt(so.ok)}/${fmt(published.accepted)} delivered, ${fmt(dlqIds.length)} dead-lettered, ` +
      `${fmt(lostB)} lost; ` +
      `inversions ${fmt(ord.inversions)} (first sight), ${fmt(ord.okInversions)} (first 2xx); ` +
      `${fmt(so.duplicates)} repeats; ${fmt(so.failed)} requests failed; ${fmt(oSeconds, 1)} s`,
  );

  // report
  const commit = measuredCommit(opt['sluice-dir'] ?? ROOT);
  const A = ['L50', 'M4', 'R', 'U'];
  const gap = s2.R.minGapAfter429;
  const checks = (
    [
      ...['L50', 'R'].map((k) => [
        `${k}: at most ${WINDOW_MAX} requests in any 1 s window (${fmt(s2[k].maxInWindow)})`,
        s2[k].maxInWindow <= WINDOW_MAX,
      ]),
      [`M4: at most ${IN_FLIGHT} requests open at once (${fmt(s2.M4.maxOpen)})`, s2.M4.maxOpen <= IN_FLIGHT],
      [
        `R: nothing sent within ${RETRY_AFTER_S} s of a 429, ${CLOCK_SLACK_MS} ms allowed for clock granularity ` +
          `(least gap ${fmt(gap, 1)} ms)`,
        s2.R.tooMany === 0 || (gap !== null && gap >= RETRY_AFTER_S * 1000 - CLOCK_SLACK_MS),
      ],
      ...A.map((k) => [
        `A: ${k} received every event (${fmt(s2[k].ok)}/${fmt(pub2[k].accepted)})`,
        s2[k].ok >= pub2[k].accepted && all2,
      ]),
      [`A: U alone received every event (${fmt(alone.ok)}/${fmt(pub1.U.accepted)})`, alone.ok >= pub1.U.accepted],
      ...['L50', 'M4'].map((k) => [`A: ${k} had no failed attempt (${fmt(failed[k])})`, failed[k] === 0]),
      [`A: nothing dead-lettered (${A.map((k) => `${k} ${dlq[k]}`).join(', ')})`, A.every((k) => dlq[k] === 0)],
      [
        `A: no delivery deferred (${fmt(out1.deferred ?? 0)} alone, ${fmt(out2.deferred ?? 0)} with the others)`,
        !out1.deferred && !out2.deferred,
      ],
      [`B: no order inversion among first sightings (${fmt(ord.inversions)})`, ord.inversions === 0],
      [`B: every event delivered or dead-lettered (${fmt(lostB)} neither)`, lostB === 0],
    ] as [string, boolean][]
  ).map(([what, ok]) => ({ what, ok }));
  const failedChecks = checks.filter((c) => !c.ok);
  for (const [phase, r] of [
    ['A, phase 1', pub1.U],
    ...Object.values(pub2).map((x) => ['A, phase 2', x] as const),
    ['B', published],
  ] as const) {
    const odd = Object.entries(r.statuses).filter(([k]) => k !== '200' && k !== '202');
    if (odd.length > 0)
      notes.push(`${phase}: publishing ${r.type} met ${odd.map(([k, n]) => `${k} × ${n}`).join(', ')}`);
  }
  const policyText: Record<string, string> = {
    L50: `rate_limit_per_second ${RATE}`,
    M4: `max_in_flight ${IN_FLIGHT}`,
    R: `rate_limit_per_second ${RATE}`,
    U: 'none',
  };
  const receiverText: Record<string, string> = {
    L50: '204 at once',
    M4: `holds each ${HOLD_MS} ms`,
    R: `every ${R_EVERY}th request 429, Retry-After: ${RETRY_AFTER_S}`,
    U: '204 at once',
  };
  const rowA = (label: string, k: string, s: PortStats, pub: StreamResult, f: number | null, d: number | null) =>
    `| ${label} | ${policyText[k]} | ${receiverText[k]} | ${owners[k] ?? '—'} | ${fmt(pub.accepted)} | ` +
    `${fmt(s.ok)} | ${fmt(s.requests)} | ${fmt(s.duplicates)} | ${fmt(s.maxInWindow)} | ${fmt(s.maxOpen)} | ` +
    `${fmt(secondsOf(s), 1)} | ` +
    `${fmt(rateOf(s))} | ${lat(s.latency)} | ${fmt(f)} | ${fmt(d)} |`;
  const outcomeKeys = [...new Set(['deferred', 'dead-letter', ...Object.keys(out1), ...Object.keys(out2)])].sort();
  const publishS = (r: StreamResult) => (r.lastAnsweredAt - r.firstSentAt) / 1000;
  const beforeRate =
    killed && so.firstOkAt !== null && killed.at > so.firstOkAt
      ? ord.beforeSplit.count / ((killed.at - so.firstOkAt) / 1000)
      : rateOf(so);
  const drainRate =
    ord.longestGapEnd !== null && so.lastOkAt !== null && so.lastOkAt > ord.longestGapEnd
      ? (ord.okSinceGap - 1) / ((so.lastOkAt - ord.longestGapEnd) / 1000)
      : null;
  const rowB = (stage: string, l: Latency, rate: number | null) =>
    `| ${stage} | ${fmt(l.count)} | ${fmt(rate)} | ${lat(l)} |`;
  const section = [
    `### flow control: ${opt.label} (${startedAt.toISOString().slice(0, 10)}, Sluice at ${commit})`,
    '',
    `Command: \`${bench.command('bench:flow')}\`; ` +
      `${opt['sluice-dir'] ? `Sluice from another checkout (\`--sluice-dir\`); ` : ''}` +
      `machine: ${machineLine()}, load average ${load1.toFixed(2)} at start. ` +
      `Processes: Kafka, \`sluice start\` (1 worker) + ${DISPATCHERS} \`sluice dispatcher\`, receivers, ` +
      `load generator; SLUICE_TIME_SCALE=${TIME_SCALE} (the ladder's 30 s rung is ${fmt(30_000 / TIME_SCALE)} ms; ` +
      'rates, in-flight limits and Retry-After are real time).',
    '',
    `**A. Flow control** (issue 22 item 3). Tenant flow, one receiver port and event type per endpoint; ` +
      'limits set by PATCH. Phase 1: U alone; phase 2: all four flooded at once (batches). ' +
      '"max in 1 s": most requests in any sliding 1 s window at the receiver; "max open": most requests ' +
      'open there at once; duration and rate: first to last first receipt; latency: publish to first 2xx; ' +
      '"failed attempts": GET /v1/webhooks/stats; DLQ: GET /v1/webhooks/dlq.',
    '',
    '| endpoint | policy | receiver | lane owner | events | received | requests | dup | max in 1 s | max open | ' +
      's | events/s | p50 / p99 / max ms | failed attempts | DLQ |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    rowA('U alone (phase 1)', 'U', alone, pub1.U, null, null),
    ...['L50', 'M4', 'R', 'U'].map((k) =>
      rowA(`${k}${k === 'U' ? ' (phase 2)' : ''}`, k, s2[k], pub2[k], failed[k], dlq[k]),
    ),
    '',
    `U's delivery rate with the limited endpoints flooded / alone: **${fmt(uRatio, 2)}** (U's events were ` +
      `published in ${fmt(publishS(pub1.U), 1)} s alone, ${fmt(publishS(pub2.U), 1)} s with the others: batches ` +
      `of ${uStream.batch}, ${uStream.connections} at once, after an unmeasured warm-up of ` +
      `${fmt(warm.U.accepted)}). ` +
      `R: ${fmt(s2.R.tooMany)} answers 429 (\`Retry-After: ${RETRY_AFTER_S}\`); the least time from a 429 to R's ` +
      `next request: **${fmt(s2.R.minGapAfter429, 1)} ms**.`,
    '',
    'Outcomes over every dispatcher (`sluice_deliveries_total`, change over the phase):',
    '',
    `| phase | ${outcomeKeys.join(' | ')} |`,
    `|---|${outcomeKeys.map(() => '---|').join('')}`,
    `| U alone | ${outcomeKeys.map((k) => fmt(out1[k] ?? 0)).join(' | ')} |`,
    `| all four | ${outcomeKeys.map((k) => fmt(out2[k] ?? 0)).join(' | ')} |`,
    '',
    `**B. Ordering** (issue 22 item 4). Tenant ordered, one endpoint with \`ordering: "key"\`` +
      `${ORDERED_IN_FLIGHT === null ? '' : ` and \`max_in_flight: ${ORDERED_IN_FLIGHT}\``}; ` +
      `${KEYS} keys × ${PER_KEY} events ` +
      `published in seq order per key (one sequential stream of batches, keys interleaved, ` +
      `${ORDERED_RATE > 0 ? `${fmt(ORDERED_RATE)} events/s` : 'as fast as accepted'}). The receiver answers ` +
      `${fmt(FAIL_RATE * 100)} % of requests 500 at random, the rest after a random 0-${ORDERED_DELAY_MAX_MS} ms. ` +
      (killed
        ? `After ${fmt(killed.after)} events received, \`${killed.name}\` ` +
          `(${killed.owner ? "the owner of the endpoint's lane" : 'not the lane owner'}) was killed (SIGKILL).`
        : 'No dispatcher was killed.') +
      ' Inversions: the first sighting (or the first 2xx) of an event id whose seq is below an earlier one of ' +
      'its key. Repeats: requests for an event id already answered 2xx.',
    '',
    '| events | delivered | dead-lettered | lost | inversions (first sight / first 2xx) | repeats | ' +
      'failed requests | max open |',
    '|---|---|---|---|---|---|---|---|',
    `| ${fmt(published.accepted)} | ${fmt(so.ok)} | ${fmt(dlqIds.length)} | ${fmt(lostB)} | ` +
      `${fmt(ord.inversions)} / ${fmt(ord.okInversions)} | ${fmt(so.duplicates)} | ${fmt(so.failed)} | ` +
      `${fmt(so.maxOpen)} |`,
    '',
    'Publish to first 2xx; "behind a failure": a failure of its key (its own or an earlier event\'s) came ' +
      'between its publish and its first 2xx; events/s: first receipts over the time from the first one to the ' +
      'kill (after the kill: from the end of the pause below to the last one).',
    '',
    '| events | count | events/s | p50 / p99 / max ms |',
    '|---|---|---|---|',
    rowB(killed ? 'before the kill, not behind a failure' : 'not behind a failure', ord.clear, null),
    rowB(killed ? 'before the kill, behind a failure' : 'behind a failure', ord.behind, null),
    rowB(killed ? 'before the kill, all' : 'all', ord.beforeSplit, beforeRate),
    ...(killed
      ? [
          rowB('after the kill', ord.afterSplit, drainRate),
          '',
          `The longest pause between two first receipts: ${fmt((ord.longestGapMs ?? 0) / 1000, 1)} s, ending ` +
            `${fmt(((ord.longestGapEnd ?? Number.NaN) - killed.at) / 1000, 1)} s after the kill (the lane's ` +
            `partition waits for the consumer group's session timeout, 30 s); the last first receipt came ` +
            `${fmt(((so.lastOkAt ?? Number.NaN) - killed.at) / 1000, 1)} s after the kill.`,
        ]
      : []),
    ...(ord.examples.length ? ['', `Inversions seen: ${ord.examples.join('; ')}.`] : []),
    ...(bothB ? ['', `${fmt(bothB)} event(s) both delivered and dead-lettered.`] : []),
    '',
    'Checks:',
    '',
    ...checks.map((c) => `- ${c.ok ? 'ok' : '**FAILED**'}: ${c.what}`),
    ...(notes.length ? ['', ...notes.map((n) => `- ${n}`)] : []),
  ].join('\n');
  say();
  say(section);
  writeResults(resultsFile(opt.results, quick), `flow-control:${opt.label}`, section);
  return failedChecks.length > 0 ? 1 : 0;
}

bench.run(main);
