/**
 * The flow-control bench (issue 22, items 3 and 4, from outside): do `rate_limit_per_second`, `max_in_flight`, a
 * receiver's Retry-After and `ordering: "key"` hold across a cluster of dispatchers, each a process of its own?
 *   npm run bench:flow -- [--quick] [--dispatchers 3] [--time-scale 600] [--l50-events 3000]
 *       [--m4-events 1000] [--r-events 200] [--r-every 10] [--u-events 20000] [--keys 100]
 *       [--per-key 100] [--ordered-rate 200] [--fail-rate 0.3] [--ordered-in-flight N]
 *       [--label current] [--results FILE] [--sluice-dir DIR]  (another checkout, e.g. the baseline)
 * --quick: L50 500, M4 200, R 50, U 5,000 events, 20 keys × 50. Writes `<!-- flow-control:<label> -->` of
 * bench/RESULTS.md (with --quick only to --results). Exits 1 when a check of the section fails, 2 on an error.
 */
import kafkajs from 'kafkajs';
import { createKafka } from '../core/kafka/client.ts';
import { BenchRun } from '../harness/bench.ts';
import { ROOT, sleep } from '../harness/cli.ts';
import type { StreamResult } from '../harness/load.ts';
import type { PortSpec, PortStats } from '../harness/receiver.ts';
import { table } from '../harness/report.ts';
import type { Dispatcher as Node } from '../harness/sluice.ts';
import { type Api, dlqEventIds, registerEndpoint } from '../harness/sluice-api.ts';
import { fmt } from '../harness/stats.ts';
import { awaitDelivered, benchArgs, cells, pct, portStats, scrape, startAll, writeReport } from './flow-common.ts';

const args = benchArgs(
  import.meta.url,
  {
    dispatchers: [3],
    'time-scale': [600],
    'l50-events': [3000, 500],
    'm4-events': [1000, 200],
    'r-events': [200, 50],
    'r-every': [10],
    'u-events': [20_000, 5000],
    keys: [100, 20],
    'per-key': [100, 50],
    'ordered-rate': [200],
    'fail-rate': [0.3],
  },
  ['ordered-in-flight', 'sluice-dir'],
  ['ordered-rate', 'fail-rate'],
);
const { n } = args;
for (const [k, v] of Object.entries(n))
  if (!k.endsWith('-rate') && !Number.isInteger(v)) throw new Error(`--${k} must be a whole number`);
if (n['fail-rate'] >= 1) throw new Error('--fail-rate must be in [0, 1)');
const orderedInFlight = args.str['ordered-in-flight'] === undefined ? null : Number(args.str['ordered-in-flight']);
if (orderedInFlight !== null && !(Number.isInteger(orderedInFlight) && orderedInFlight > 0))
  throw new Error('--ordered-in-flight must be a positive integer');

/** The policies under test and what must hold of them. */
const RATE = 50;
const WINDOW_MAX = 55;
const IN_FLIGHT = 4;
const HOLD_MS = 50;
const RETRY_AFTER_S = 2;
/** Date.now() is whole milliseconds, in Sluice and here: a Retry-After gap may look this much short. */
const CLOCK_SLACK_MS = 5;
const ORDERED_DELAY_MAX_MS = 20;

/** An endpoint of A: the policy PATCHed onto it, how its receiver port answers, its flood stream. */
interface Endpoint {
  name: string;
  policy: Record<string, number>;
  port: Omit<PortSpec, 'name'>;
  events: number;
  batch: number;
  connections?: number;
}
const A: Endpoint[] = [
  { name: 'L50', policy: { rate_limit_per_second: RATE }, port: {}, events: n['l50-events'], batch: 250 },
  { name: 'M4', policy: { max_in_flight: IN_FLIGHT }, port: { holdMs: HOLD_MS }, events: n['m4-events'], batch: 250 },
  {
    name: 'R',
    policy: { rate_limit_per_second: RATE },
    port: { tooManyEvery: n['r-every'], retryAfterS: RETRY_AFTER_S },
    events: n['r-events'],
    batch: 50,
  },
  { name: 'U', policy: {}, port: {}, events: n['u-events'], batch: 500, connections: 4 },
];
const [L50, M4, R, U] = A;
const answers = ({ port: p }: Endpoint) =>
  p.holdMs ? `holds each ${p.holdMs} ms` : p.tooManyEvery ? `every ${p.tooManyEvery}th request 429` : '204 at once';
const typeOf = (name: string) => `flow.${name.toLowerCase()}`;

const bench = new BenchRun('flow', args.str['sluice-dir'] ?? ROOT);

/** Events/s from the first first-2xx to the last. */
const rateOf = (s: PortStats): number | null =>
  s.firstOkAt !== null && s.lastOkAt !== null && s.lastOkAt > s.firstOkAt
    ? (s.ok - 1) / ((s.lastOkAt - s.firstOkAt) / 1000)
    : null;

async function main(): Promise<number> {
  const timeScale = n['time-scale'];
  const env = { SLUICE_TIME_SCALE: String(timeScale) };
  const { from, notes, receiver, load, base, nodes, tenant } = await startAll(bench, 'bench:flow', n.dispatchers, env);
  const admin = createKafka(bench.brokers, `${bench.prefix}-bench`).admin();
  await admin.connect();
  bench.onShutdown(() => admin.disconnect());
  /** The node that owns the endpoint's partition of `sluice.lanes` now (by the group's assignment), or null. */
  const laneOwner = async (endpointId: string): Promise<Node | null> => {
    const topic = `${bench.prefix}.lanes`;
    const meta = await admin.fetchTopicMetadata({ topics: [topic] });
    const partitionMetadata = meta.topics[0].partitions;
    const message = { key: endpointId, value: null };
    const partition = kafkajs.Partitioners.DefaultPartitioner()({ topic, partitionMetadata, message });
    const { groups } = await admin.describeGroups([`${bench.prefix}.dispatch-lanes`]);
    for (const m of groups[0]?.members ?? []) {
      const a = kafkajs.AssignerProtocol.MemberAssignment.decode(m.memberAssignment);
      if (a?.assignment[topic]?.includes(partition)) return nodes.find((x) => x.clientId === m.clientId) ?? null;
    }
    return null;
  };
  const patch = async (api: Api, id: string, policy: Record<string, unknown>): Promise<void> => {
    const res = await api('PATCH', `/v1/webhooks/endpoints/${id}`, policy);
    if (res.status !== 200 || Object.entries(policy).some(([k, v]) => res.body?.[k] !== v))
      throw new Error(`PATCH ${id} ${JSON.stringify(policy)} answered ${res.status}: ${JSON.stringify(res.body)}`);
  };
  /** sluice_deliveries_total by outcome, summed over the nodes (used in A, before any is killed). */
  const outcomes = async (): Promise<Record<string, number>> => {
    const sum: Record<string, number> = {};
    for (const node of nodes)
      for (const s of (await scrape(node.adminPort))('sluice_deliveries_total')) {
        const outcome = /outcome="([^"]*)"/.exec(s.labels)?.[1];
        if (outcome) sum[outcome] = (sum[outcome] ?? 0) + s.value;
      }
    return sum;
  };

  const flow = await tenant('flow');
  const ordered = await tenant('ordered');
  const specs: PortSpec[] = [
    ...A.map((e) => ({ name: e.name, ...e.port })),
    { name: 'O', ordered: true, failRate: n['fail-rate'], delayMaxMs: ORDERED_DELAY_MAX_MS },
  ];
  const ports = (await receiver({ op: 'listen', ports: specs })).ports!;
  const urlOf = (name: string) => `http://127.0.0.1:${ports[specs.findIndex((s) => s.name === name)]}/hook`;
  const ids: Record<string, string> = {};
  for (const e of A) {
    ids[e.name] = await registerEndpoint(flow.api, urlOf(e.name), { events: [typeOf(e.name)] });
    if (e !== U) await patch(flow.api, ids[e.name], e.policy);
  }
  await sleep(1500); // every dispatcher's endpoint view has the endpoints and their policies
  const owners: Record<string, string> = {};
  for (const e of [L50, M4, R]) owners[e.name] = (await laneOwner(ids[e.name]))?.name ?? '?';

  // A: a warm-up of U (JIT, connections, the groups' first fetches), not measured; U alone; all four at once
  const flood = async (endpoints: Endpoint[]) => {
    const streams = endpoints.map((e) => ({ ...e, type: typeOf(e.name), connections: e.connections ?? 1 }));
    const results = (await load({ op: 'flood', spec: { base, client: flow.client, streams } })).flood!;
    return Object.fromEntries(endpoints.map((e, i) => [e.name, results[i]]));
  };
  const warm = await flood([{ ...U, events: Math.min(U.events, 5000) }]);
  await awaitDelivered(receiver, { U: warm.U.accepted }, 120_000);
  const phaseA = async (endpoints: Endpoint[], limitMs: number) => {
    await receiver({ op: 'reset' });
    const before = await outcomes();
    const pub = await flood(endpoints);
    const want = Object.fromEntries(endpoints.map((e) => [e.name, pub[e.name].accepted]));
    const all = await awaitDelivered(receiver, want, limitMs);
    const after = await outcomes();
    const out = Object.fromEntries(Object.keys(after).map((k) => [k, after[k] - (before[k] ?? 0)]));
    return { pub, all, out, stats: await portStats(receiver) };
  };
  const p1 = await phaseA([U], 120_000);
  const rS = R.events / RATE + (R.events / n['r-every']) * RETRY_AFTER_S * 1.5;
  const expectS = Math.max(L50.events / RATE, M4.events / (IN_FLIGHT * (1000 / HOLD_MS)), rS);
  const p2 = await phaseA([U, L50, M4, R], (expectS + 60) * 1000);
  const s2 = p2.stats;
  await sleep(3000); // the attempt history trails the attempts by a digest window and a fetch
  const failed: Record<string, number | null> = {};
  const dlq: Record<string, number> = {};
  for (const { name } of A) {
    const res = await flow.api('GET', `/v1/webhooks/stats?endpoint_id=${encodeURIComponent(ids[name])}`);
    failed[name] = res.status === 200 ? (res.body.totals?.failed ?? null) : null;
    dlq[name] = (await dlqEventIds(flow.api, ids[name])).length;
  }

  // B: an `ordering: "key"` endpoint whose lane a `sluice dispatcher` owns; the owner killed halfway
  let chosen: { id: string; type: string; owner: Node | null } | null = null;
  for (let c = 1; c <= 8 && chosen?.owner?.name.startsWith('dispatcher') !== true; c++) {
    const type = `ordered.c${c}`;
    const id = await registerEndpoint(ordered.api, `${urlOf('O')}?c=${c}`, { events: [type] });
    chosen = { id, type, owner: await laneOwner(id) };
  }
  const { id: orderedId, type } = chosen!;
  const policyB = { ordering: 'key', ...(orderedInFlight === null ? {} : { max_in_flight: orderedInFlight }) };
  await patch(ordered.api, orderedId, policyB);
  await sleep(1500);
  const { keys, 'per-key': perKey, 'ordered-rate': rate } = n;
  await receiver({ op: 'reset' });
  const progress = async () => (await receiver({ op: 'progress' })).progress!.O ?? 0;
  const spec = { base, client: ordered.client, type, keys, perKey, rate, batchMax: 500 };
  const publishing = load({ op: 'ordered', spec });
  let killed: { name: string; owner: boolean; at: number; after: number } | null = null;
  if (await awaitDelivered(receiver, { O: (keys * perKey) / 2 }, 600_000)) {
    const owner = await laneOwner(orderedId);
    const victim = owner?.name.startsWith('dispatcher') ? owner : nodes[1];
    const after = await progress();
    victim.launched.proc.kill('SIGKILL');
    killed = { name: victim.name, owner: victim === owner, at: Date.now(), after };
  } else notes.push('B: no dispatcher was killed (half the events were never received).');
  const published = (await publishing).ordered!;
  // Every event delivered or dead-lettered; after the kill the lane waits out the session timeout (30 s).
  let dlqIds: string[] = [];
  for (let lastOk = -1, grewAt = Date.now(); ; await sleep(5000)) {
    const ok = await progress();
    dlqIds = ok < published.accepted ? await dlqEventIds(ordered.api, orderedId) : [];
    if (ok + dlqIds.length >= published.accepted) break;
    if (ok > lastOk) grewAt = Date.now();
    else if (Date.now() - grewAt > 120_000) {
      notes.push('B: no event delivered for 120 s; gave up waiting.');
      break;
    }
    lastOk = ok;
  }
  await sleep(1000);
  const so = (await portStats(receiver, killed?.at)).O;
  const ord = so.ordered!;
  dlqIds = await dlqEventIds(ordered.api, orderedId);
  const delivered = new Set((await receiver({ op: 'ids', name: 'O' })).ids!);
  const dead = new Set(dlqIds);
  const lostB = published.ids.filter((id) => !delivered.has(id) && !dead.has(id)).length;
  const bothB = dlqIds.filter((id) => delivered.has(id)).length;

  // Report
  const checks: string[] = [];
  let failures = 0;
  const check = (ok: boolean, what: string, measured: number | string | null) => {
    checks.push(`- ${ok ? 'ok' : '**FAILED**'}: ${what} (${typeof measured === 'string' ? measured : fmt(measured)})`);
    if (!ok) failures++;
  };
  const gap = s2.R.minGapAfter429;
  for (const k of ['L50', 'R'])
    check(s2[k].maxInWindow <= WINDOW_MAX, `${k}: at most ${WINDOW_MAX} requests in any 1 s window`, s2[k].maxInWindow);
  check(s2.M4.maxOpen <= IN_FLIGHT, `M4: at most ${IN_FLIGHT} requests open at once`, s2.M4.maxOpen);
  check(
    s2.R.tooMany === 0 || (gap !== null && gap >= RETRY_AFTER_S * 1000 - CLOCK_SLACK_MS),
    `R: nothing sent within ${RETRY_AFTER_S} s of a 429, ${CLOCK_SLACK_MS} ms allowed for clock granularity`,
    `least gap ${fmt(gap, 1)} ms`,
  );
  const received = (s: PortStats, pub: StreamResult) => `${fmt(s.ok)}/${fmt(pub.accepted)}`;
  for (const { name: k } of A)
    check(s2[k].ok >= p2.pub[k].accepted && p2.all, `A: ${k} received every event`, received(s2[k], p2.pub[k]));
  check(p1.stats.U.ok >= p1.pub.U.accepted, 'A: U alone received every event', received(p1.stats.U, p1.pub.U));
  for (const k of ['L50', 'M4']) check(failed[k] === 0, `A: ${k} had no failed attempt`, failed[k]);
  const noDlq = A.every((e) => dlq[e.name] === 0);
  check(noDlq, 'A: nothing dead-lettered', A.map((e) => `${e.name} ${dlq[e.name]}`).join(', '));
  const [d1, d2] = [p1.out.deferred ?? 0, p2.out.deferred ?? 0];
  check(!d1 && !d2, 'A: no delivery deferred', `${fmt(d1)} alone, ${fmt(d2)} with the others`);
  check(ord.inversions === 0, 'B: no order inversion among first sightings', ord.inversions);
  check(lostB === 0, 'B: every event delivered or dead-lettered', `${fmt(lostB)} neither`);
  const phases = { 'A, phase 1': [p1.pub.U], 'A, phase 2': Object.values(p2.pub), B: [published] };
  for (const [phase, r] of Object.entries(phases).flatMap(([p, rs]) => rs.map((x) => [p, x] as const))) {
    const odd = Object.entries(r.statuses).filter(([k]) => k !== '200' && k !== '202');
    if (odd.length) notes.push(`${phase}: publishing ${r.type} met ${odd.map(([k, c]) => `${k} × ${c}`).join(', ')}`);
  }

  const rowA = (label: string, e: Endpoint, s: PortStats, pub: StreamResult, f?: number | null, d?: number) => [
    ...cells(label, e === U ? 'none' : JSON.stringify(e.policy), answers(e), owners[e.name], pub.accepted, s.ok),
    ...cells(s.requests, s.duplicates, s.maxInWindow, s.maxOpen),
    s.firstOkAt === null ? null : fmt((s.lastOkAt! - s.firstOkAt) / 1000, 1),
    ...cells(rateOf(s), pct(s.latency), f, d),
  ];
  const publishS = (r: StreamResult) => fmt((r.lastAnsweredAt - r.firstSentAt) / 1000, 1);
  const uRatio = fmt((rateOf(s2.U) ?? Number.NaN) / (rateOf(p1.stats.U) ?? Number.NaN), 2);
  const sinceKill = (t: number | null) => fmt(((t ?? Number.NaN) - (killed?.at ?? Number.NaN)) / 1000, 1);
  const beforeRate =
    killed && so.firstOkAt !== null && killed.at > so.firstOkAt
      ? ord.beforeSplit.count / ((killed.at - so.firstOkAt) / 1000)
      : rateOf(so);
  const drainRate =
    ord.longestGapEnd !== null && so.lastOkAt !== null && so.lastOkAt > ord.longestGapEnd
      ? (ord.okSinceGap - 1) / ((so.lastOkAt - ord.longestGapEnd) / 1000)
      : null;
  const pre = killed ? 'before the kill, ' : '';
  const kill = killed
    ? `After ${fmt(killed.after)} events received, \`${killed.name}\` (${killed.owner ? '' : 'not '}the owner of ` +
      "the endpoint's lane) was killed (SIGKILL)."
    : 'No dispatcher was killed.';
  writeReport(args, 'flow-control', 'flow control', notes, [
    from,
    `SLUICE_TIME_SCALE=${timeScale}: the ladder's 30 s rung is ${fmt(30_000 / timeScale)} ms; ` +
      'rates, in-flight limits and Retry-After are real time.',
    '**A. Flow control** (issue 22 item 3). Tenant flow, one receiver port and event type per endpoint, limits ' +
      'set by PATCH; U flooded alone, then all four at once (batches). "max in 1 s" / "max open": most requests ' +
      'in any sliding 1 s window / open at once at the receiver; s and events/s: first to last first receipt; ' +
      'latency: publish to first 2xx; failed attempts: GET /v1/webhooks/stats; DLQ: GET /v1/webhooks/dlq.',
    table(
      [
        ...['endpoint', 'policy', 'receiver', 'lane owner', 'events', 'received', 'requests', 'dup', 'max in 1 s'],
        ...['max open', 's', 'events/s', 'p50 / p99 / max ms', 'failed attempts', 'DLQ'],
      ],
      [
        rowA('U alone (phase 1)', U, p1.stats.U, p1.pub.U),
        ...A.map((e) =>
          rowA(e === U ? 'U (phase 2)' : e.name, e, s2[e.name], p2.pub[e.name], failed[e.name], dlq[e.name]),
        ),
      ],
    ),
    `U's delivery rate with the limited endpoints flooded / alone: **${uRatio}** (published in ` +
      `${publishS(p1.pub.U)} s alone, ${publishS(p2.pub.U)} s with the others: batches of ${U.batch}, ` +
      `${U.connections} at once, after an unmeasured warm-up of ${fmt(warm.U.accepted)}). R: ` +
      `${fmt(s2.R.tooMany)} answers 429 with \`Retry-After: ${RETRY_AFTER_S}\`; the least time from a 429 to ` +
      `R's next request: **${fmt(gap, 1)} ms**. Outcomes over every dispatcher (\`sluice_deliveries_total\`, change ` +
      `over the phase): U alone ${JSON.stringify(p1.out)}; all four ${JSON.stringify(p2.out)}.`,
    `**B. Ordering** (issue 22 item 4). Tenant ordered, one endpoint with policy ${JSON.stringify(policyB)}; ` +
      `${keys} keys × ${perKey} events in seq order per key (one sequential stream of batches, keys interleaved, ` +
      `${rate > 0 ? `${fmt(rate)} events/s` : 'as fast as accepted'}). The receiver answers ` +
      `${fmt(n['fail-rate'] * 100)} % of requests 500 at random, the rest after a random 0-${ORDERED_DELAY_MAX_MS} ` +
      `ms. ${kill}`,
    `Of ${fmt(published.accepted)} events: ${fmt(so.ok)} delivered, ${fmt(dlqIds.length)} dead-lettered, ` +
      `${fmt(lostB)} lost${bothB ? ` (${fmt(bothB)} both delivered and dead-lettered)` : ''}; ` +
      `${fmt(ord.inversions)} inversions among first sightings (an event's seq below an earlier one of its key), ` +
      `${fmt(ord.okInversions)} among first 2xx; ${fmt(so.duplicates)} repeats (requests for an event already ` +
      `answered 2xx); ${fmt(so.failed)} failed requests; at most ${fmt(so.maxOpen)} open at once.` +
      (ord.examples.length ? ` Inversions seen: ${ord.examples.join('; ')}.` : ''),
    'Publish to first 2xx; "behind a failure": a failure of its key came between its publish and its first 2xx; ' +
      'events/s: first receipts from the first one to the kill (after it: from the end of the pause below).',
    table(
      ['events', 'count', 'events/s', 'p50 / p99 / max ms'],
      [
        [`${pre}not behind a failure`, fmt(ord.clear.count), null, pct(ord.clear)],
        [`${pre}behind a failure`, fmt(ord.behind.count), null, pct(ord.behind)],
        [`${pre}all`, fmt(ord.beforeSplit.count), fmt(beforeRate), pct(ord.beforeSplit)],
        ...(killed ? [['after the kill', fmt(ord.afterSplit.count), fmt(drainRate), pct(ord.afterSplit)]] : []),
      ],
    ),
    !!killed &&
      `The longest pause between two first receipts: ${fmt((ord.longestGapMs ?? 0) / 1000, 1)} s, ending ` +
        `${sinceKill(ord.longestGapEnd)} s after the kill (the lane's partition waits for the consumer group's ` +
        `session timeout, 30 s); the last first receipt came ${sinceKill(so.lastOkAt)} s after the kill.`,
    ['Checks:', '', ...checks],
  ]);
  return failures > 0 ? 1 : 0;
}

bench.run(main);
