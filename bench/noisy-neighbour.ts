/**
 * The noisy-neighbour bench: can one tenant's slow receivers (`--noisy`: plain endpoints, lanes or paused-ordered)
 * starve another tenant's deliveries? Every piece is a process of its own.
 *   npm run bench:noisy -- [--quick] [--noisy plain|lanes|paused-ordered] [--slow 100] [--hold-ms 15000]
 *       [--flood-batch 30] [--flood-every 5] [--rate 20] [--seconds 60] [--baseline-seconds 20]
 *       [--dispatchers 2] [--label current] [--results FILE] [--sluice-dir DIR]  (another checkout)
 * --quick: 10 slow endpoints, 5 s + 12 s. Writes `<!-- noisy-neighbour:<label> -->` of bench/RESULTS.md (with --quick
 * only to --results). Exits 1 when a quiet event was not received within 30 s of its phase's end, or out of order.
 */
import { BenchRun } from '../harness/bench.ts';
import { ROOT, sleep } from '../harness/cli.ts';
import { table } from '../harness/report.ts';
import { registerEndpoint } from '../harness/sluice-api.ts';
import { fmt } from '../harness/stats.ts';
import { awaitDelivered, benchArgs, cells, pct, portStats, scrape, startAll, writeReport } from './flow-common.ts';

const args = benchArgs(
  import.meta.url,
  {
    slow: [100, 10],
    'hold-ms': [15_000],
    'flood-batch': [30],
    'flood-every': [5],
    rate: [20],
    seconds: [60, 12],
    'baseline-seconds': [20, 5],
    dispatchers: [2],
  },
  ['noisy', 'sluice-dir'],
  ['dispatchers'],
);
const { n } = args;
const NOISY_KINDS = { plain: {}, lanes: { max_in_flight: 1000 }, 'paused-ordered': { ordering: 'key' } };
const noisyKind = (args.str.noisy ?? 'plain') as keyof typeof NOISY_KINDS;
if (!Object.hasOwn(NOISY_KINDS, noisyKind)) throw new Error('--noisy must be plain, lanes or paused-ordered');
/** The quiet tenant's endpoints, one of each kind; the ordered one's inversions are failures. */
const QUIET = [{}, { rate_limit_per_second: 100 }, { max_in_flight: 5 }, { ordering: 'key' }].map((body) => ({
  body,
  name: Object.entries(body).map(([k, v]) => `${k}: ${v}`)[0] ?? 'plain',
  ordered: 'ordering' in body,
}));
const QUIET_KEYS = 8;

const bench = new BenchRun('noisy', args.str['sluice-dir'] ?? ROOT);

async function main(): Promise<number> {
  const { from, notes, receiver, load, base, nodes, tenant } = await startAll(bench, 'bench:noisy', n.dispatchers);
  const noisy = await tenant('noisy');
  const quiet = await tenant('quiet');
  // The noisy tenant's ports share one tally ('slow'): its requests held at once are over all of them.
  const specs = [
    ...Array.from({ length: n.slow }, () => ({ name: 'slow', holdMs: n['hold-ms'] })),
    ...QUIET.map((q) => ({ name: q.name, ordered: true })),
  ];
  const ports = (await receiver({ op: 'listen', ports: specs })).ports!;
  const url = (port: number) => `http://127.0.0.1:${port}/hook`;
  for (const port of ports.slice(0, n.slow)) {
    const id = await registerEndpoint(noisy.api, url(port), NOISY_KINDS[noisyKind]);
    if (noisyKind !== 'paused-ordered') continue;
    const r = await noisy.api('PATCH', `/v1/webhooks/endpoints/${id}`, { disabled: true });
    if (r.status !== 200) throw new Error(`pausing ${id} answered ${r.status}: ${JSON.stringify(r.body)}`);
  }
  for (const [i, q] of QUIET.entries()) await registerEndpoint(quiet.api, url(ports[n.slow + i]), q.body);
  await sleep(1000); // every dispatcher's endpoint view has the endpoints

  // Per Sluice process, the most deliveries in flight and the longest event-loop delay, scraped every 500 ms
  let peak = { inFlight: [] as number[], lagMs: [] as number[] };
  const sample = async () => {
    for (const [i, node] of nodes.entries()) {
      const metric = await scrape(node.adminPort);
      const inFlight = metric('sluice_deliveries_in_flight')[0]?.value;
      if (inFlight !== undefined) peak.inFlight[i] = Math.max(peak.inFlight[i] ?? 0, inFlight);
      const lag = metric('nodejs_eventloop_lag_max_seconds')[0]?.value;
      if (lag !== undefined) peak.lagMs[i] = Math.max(peak.lagMs[i] ?? 0, Math.round(lag * 1000));
    }
  };
  const phase = async (name: string, flood: boolean, seconds: number) => {
    await receiver({ op: 'reset', names: QUIET.map((q) => q.name) });
    await sample(); // prom-client's event-loop delay is the longest since the last scrape (or the start)
    peak = { inFlight: [], lagMs: [] };
    const timer = setInterval(() => void sample(), 500);
    const probe = { client: quiet.client, rate: n.rate, seconds, keys: QUIET_KEYS };
    const noise = { client: noisy.client, batch: n['flood-batch'], everyMs: n['flood-every'] * 1000, keys: 10 };
    const result = (await load({ op: 'probe', spec: { base, probe, flood: flood ? noise : null } })).probe!;
    // The quiet tenant's last deliveries, 30 s at most
    await awaitDelivered(receiver, Object.fromEntries(QUIET.map((q) => [q.name, result.probeAccepted])), 30_000);
    clearInterval(timer);
    const stats = await portStats(receiver);
    return { name, flood, result, ...peak, slow: stats.slow, quiet: QUIET.map((q) => stats[q.name]) };
  };
  const alone = await phase('quiet tenant alone', false, n['baseline-seconds']);
  const phases = [alone, await phase('with the flood', true, n.seconds)];

  const lost = (p: typeof alone, i: number) => p.result.probeAccepted - p.quiet[i].seen;
  /** Order inversions at the ordered endpoint (null at the others: they keep no order). */
  const inv = (p: typeof alone, i: number) => (QUIET[i].ordered ? p.quiet[i].ordered!.inversions : null);
  const kind = `${JSON.stringify(NOISY_KINDS[noisyKind])}${noisyKind === 'paused-ordered' ? ', then paused' : ''}`;
  writeReport(args, 'noisy-neighbour', 'noisy neighbour', notes, [
    from,
    `Tenant noisy: ${n.slow} ${noisyKind} endpoints (${kind}) holding each event ` +
      `${fmt(n['hold-ms'])} ms (the ping answered at once), a batch of ${n['flood-batch']} events every ` +
      `${n['flood-every']} s. Tenant quiet: ${QUIET.length} fast endpoints, ${n.rate} events/s, one per request ` +
      `on a fixed schedule, ${QUIET_KEYS} ordering keys. Latency: publish to receipt.`,
    table(
      [
        ...['phase', 'quiet endpoint', 'quiet events', 'p50 / p99 / max ms'],
        ...['not received 30 s after', 'dup', 'inversions'],
      ],
      phases.flatMap((p) =>
        p.quiet.map((f, i) =>
          cells(p.name, QUIET[i].name, p.result.probeAccepted, pct(f.latency), lost(p, i), f.duplicates, inv(p, i)),
        ),
      ),
    ),
    table(
      [
        ...['phase', 'noisy events → deliveries', 'noisy requests held at once (max)', 'in flight per process (max)'],
        ...['longest event-loop delay per process (ms)', 'quiet publish answered p50 / p99 ms'],
      ],
      phases.map((p) => [
        p.name,
        p.flood ? `${fmt(p.result.floodAccepted)} → ${fmt(p.result.floodDeliveries)}` : null,
        p.flood ? fmt(p.slow.maxOpen) : null,
        p.inFlight.map((x) => fmt(x)).join(' / '),
        p.lagMs.map((x) => fmt(x)).join(' / '),
        `${fmt(p.result.probeAnswerP50)} / ${fmt(p.result.probeAnswerP99)}`,
      ]),
    ),
  ]);
  return phases.some((p) => QUIET.some((_, i) => lost(p, i) > 0 || (inv(p, i) ?? 0) > 0)) ? 1 : 0;
}

bench.run(main);
