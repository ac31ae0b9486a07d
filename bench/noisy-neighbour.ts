/**
 * The noisy-neighbour bench: can one tenant's slow receivers starve another tenant's deliveries?
 * Every piece is its own OS process: Kafka (`sluice kafka`, unless KAFKA_BROKERS is set),
 * `sluice start` (one worker) and `--dispatchers N` extra `sluice dispatcher` members (default 2:
 * three dispatchers in all), the receiver and the load generator (harness/receiver.ts, load.ts).
 * This process only orchestrates and reads the numbers.
 *
 * Tenant `noisy` registers `--slow` endpoints (default 100) whose receivers answer the ping at
 * once and hold every other request for `--hold-ms` (15,000; Sluice gives up at 10 s), and floods
 * them with a batch of `--flood-batch` events (30) every `--flood-every` seconds (5). What its
 * endpoints are (`--noisy`): `plain` (no delivery policy), `lanes` (`max_in_flight: 1000`, so
 * every delivery is a lane delivery) or `paused-ordered` (`ordering: key`, then paused: all their
 * deliveries wait, 36,000 with the defaults). Tenant `quiet` has four fast endpoints, one of each
 * kind: plain, `rate_limit_per_second: 100`, `max_in_flight: 5` and `ordering: key`, and publishes
 * `--rate` events/s (20), one per request on a fixed schedule, over 8 ordering keys. Two phases of
 * one run: the quiet tenant alone (`--baseline-seconds`, 20), then the same with the flood
 * (`--seconds`, 60). Reported per quiet endpoint: publish-to-receipt p50, p99 and max in each
 * phase, lost and repeated deliveries, order inversions; and the most attempts in flight.
 *
 *   npm run bench:noisy -- [--quick] [--noisy plain|lanes|paused-ordered] [--slow 100] [--hold-ms 15000]
 *       [--flood-batch 30] [--flood-every 5] [--rate 20] [--seconds 60] [--baseline-seconds 20]
 *       [--dispatchers 2] [--label current] [--results FILE] [--sluice-dir DIR]  (another checkout)
 *
 * Writes its section of bench/RESULTS.md (`<!-- noisy-neighbour:<label>:begin/end -->`), except
 * with --quick unless --results is given. Exits 1 when a quiet-tenant event was not received within
 * 30 s of its phase's end, or arrived out of order at its ordered endpoint.
 */
import { parseArgs } from 'node:util';
import { freePort } from '../core/net/free-port.ts';
import { BenchRun } from '../harness/bench.ts';
import { checkLabel, printHelp, ROOT, resultsFile, say, sleep, writeResults } from '../harness/cli.ts';
import { settleGroups } from '../harness/kafka.ts';
import { RECEIVER_ENV, sluiceEnv, startDispatchers } from '../harness/sluice.ts';
import { adminClient, type BenchClient, bearerToken, registerEndpoint, sluiceApi } from '../harness/sluice-api.ts';
import { machineLine, measuredCommit } from '../harness/results-section.ts';
import { fmt } from '../harness/stats.ts';

const { values: opt } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    noisy: { type: 'string', default: 'plain' },
    slow: { type: 'string' },
    'hold-ms': { type: 'string', default: '15000' },
    'flood-batch': { type: 'string', default: '30' },
    'flood-every': { type: 'string', default: '5' },
    rate: { type: 'string', default: '20' },
    seconds: { type: 'string' },
    'baseline-seconds': { type: 'string' },
    dispatchers: { type: 'string', default: '2' },
    label: { type: 'string', default: 'current' },
    results: { type: 'string' },
    'sluice-dir': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (opt.help) printHelp(import.meta.url);
const quick = opt.quick === true;
const SLOW = Number(opt.slow ?? (quick ? 10 : 100));
const HOLD_MS = Number(opt['hold-ms']);
const FLOOD_BATCH = Number(opt['flood-batch']);
const FLOOD_EVERY_MS = Number(opt['flood-every']) * 1000;
const RATE = Number(opt.rate);
const SECONDS = Number(opt.seconds ?? (quick ? 12 : 60));
const BASELINE_SECONDS = Number(opt['baseline-seconds'] ?? (quick ? 5 : 20));
const DISPATCHERS = Number(opt.dispatchers);
const NOISY_KINDS = {
  plain: {},
  lanes: { max_in_flight: 1000 },
  'paused-ordered': { ordering: 'key' },
} as const;
const NOISY = opt.noisy as keyof typeof NOISY_KINDS;
if (!Object.hasOwn(NOISY_KINDS, NOISY)) throw new Error('--noisy must be plain, lanes or paused-ordered');
/** The quiet tenant's endpoints, one of each kind, in the order of the fast ports. */
const QUIET_KINDS: Array<{ name: string; body: Record<string, unknown> }> = [
  { name: 'plain', body: {} },
  { name: 'rate_limit_per_second: 100', body: { rate_limit_per_second: 100 } },
  { name: 'max_in_flight: 5', body: { max_in_flight: 5 } },
  { name: 'ordering: key', body: { ordering: 'key' } },
];
const QUIET_KEYS = 8;
/** Whether the quiet endpoint at this index keeps order (its inversions are failures). */
const ordered = (i: number) => QUIET_KINDS[i].body.ordering === 'key';
checkLabel(opt.label);
for (const [name, v] of Object.entries({ SLOW, HOLD_MS, FLOOD_BATCH, FLOOD_EVERY_MS, RATE, SECONDS, BASELINE_SECONDS }))
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${name} must be a positive number`);

const bench = new BenchRun('noisy', opt['sluice-dir'] ?? ROOT);
const { children, prefix, sluice: SLUICE } = bench;

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
  };
  say(`starting sluice start (topic prefix ${prefix}) and ${DISPATCHERS} extra dispatcher(s)...`);
  const adminPorts = [(await bench.sluiceStart(port, env)).adminPort];
  for (const d of await startDispatchers(children, SLUICE, env, DISPATCHERS)) adminPorts.push(d.adminPort);
  const base = `http://127.0.0.1:${port}`;

  // Two tenants, their endpoints
  const createClient = (tenant: string) => adminClient(SLUICE, ROOT, env, tenant);

  const noisy = await createClient('noisy');
  const quiet = await createClient('quiet');
  const tokenOf = (c: BenchClient) => bearerToken(base, c);

  // The noisy tenant's ports share one tally ('slow'): its requests held at once are over all of them.
  const specs = [
    ...Array.from({ length: SLOW }, () => ({ name: 'slow', holdMs: HOLD_MS })),
    ...QUIET_KINDS.map((k) => ({ name: k.name, ordered: true })),
  ];
  const ports = (await receiver({ op: 'listen', ports: specs })).ports!;
  const noisyToken = await tokenOf(noisy);
  const quietToken = await tokenOf(quiet);
  const noisyApi = sluiceApi(base, () => noisyToken);
  const quietApi = sluiceApi(base, () => quietToken);
  const slowPorts = ports.slice(0, SLOW);
  for (let i = 0; i < slowPorts.length; i += 10)
    await Promise.all(
      slowPorts.slice(i, i + 10).map(async (p) => {
        const id = await registerEndpoint(noisyApi, `http://127.0.0.1:${p}/hook`, NOISY_KINDS[NOISY]);
        if (NOISY !== 'paused-ordered') return;
        const r = await noisyApi('PATCH', `/v1/webhooks/endpoints/${id}`, { disabled: true });
        if (r.status !== 200) throw new Error(`pausing ${id} answered ${r.status}: ${JSON.stringify(r.body)}`);
      }),
    );
  for (const [i, kind] of QUIET_KINDS.entries())
    await registerEndpoint(quietApi, `http://127.0.0.1:${ports[SLOW + i]}/hook`, kind.body);
  say(`registered ${SLOW} ${NOISY} endpoints (tenant noisy) and ${QUIET_KINDS.length} fast endpoints (tenant quiet)`);

  const notes: string[] = [];
  if (!(await settleGroups(brokers, prefix, 1 + DISPATCHERS)))
    notes.push(`the consumer groups were not Stable with ${1 + DISPATCHERS} members within 90 s; measured anyway.`);
  await sleep(1000); // every dispatcher's endpoint view has the endpoints

  // The two phases
  const inFlightMax = new Map<number, number>();
  const lagMax = new Map<number, number>();
  const sampleInFlight = async () => {
    for (const p of adminPorts) {
      const text = await fetch(`http://127.0.0.1:${p}/metrics`).then(
        (r) => r.text(),
        () => '',
      );
      const m = /^sluice_deliveries_in_flight (\d+)/m.exec(text);
      if (m) inFlightMax.set(p, Math.max(inFlightMax.get(p) ?? 0, Number(m[1])));
      // prom-client's event-loop delay: the longest since the last scrape.
      const lag = /^nodejs_eventloop_lag_max_seconds (\S+)/m.exec(text);
      if (lag) lagMax.set(p, Math.max(lagMax.get(p) ?? 0, Math.round(Number(lag[1]) * 1000)));
    }
  };
  const readStats = async () => {
    const all = (await receiver({ op: 'stats' })).stats!;
    const slow = all.find((p) => p.name === 'slow');
    return {
      fast: QUIET_KINDS.map((k) => all.find((p) => p.name === k.name)!),
      slowReceived: slow?.requests ?? 0,
      slowHeldMax: slow?.maxOpen ?? 0,
    };
  };
  const phase = async (name: string, flood: boolean, seconds: number) => {
    await receiver({ op: 'reset', names: QUIET_KINDS.map((k) => k.name) });
    // One scrape first: prom-client's delay is the longest since the last scrape (or the start).
    await sampleInFlight();
    inFlightMax.clear();
    lagMax.clear();
    const timer = setInterval(() => void sampleInFlight(), 500);
    const spec = {
      base,
      probe: { client: quiet, rate: RATE, seconds, keys: QUIET_KEYS },
      flood: flood ? { client: noisy, batch: FLOOD_BATCH, everyMs: FLOOD_EVERY_MS, keys: 10 } : null,
    };
    say(`${name}: ${seconds} s...`);
    const result = (await load({ op: 'probe', spec })).probe!;
    // The quiet tenant's last deliveries: wait for them (30 s at most).
    let stats = await readStats();
    const missing = () => stats.fast.some((f) => f.seen < result.probeAccepted);
    for (const deadline = Date.now() + 30_000; missing() && Date.now() < deadline; ) {
      await sleep(250);
      stats = await readStats();
    }
    clearInterval(timer);
    const lost = stats.fast.map((f) => result.probeAccepted - f.seen);
    for (const [i, f] of stats.fast.entries())
      say(
        `${name}: quiet ${QUIET_KINDS[i].name}: ${fmt(f.seen)}/${fmt(result.probeAccepted)} delivered, ` +
          `p50 ${fmt(f.latency.p50)} ms, p99 ${fmt(f.latency.p99)} ms, max ${fmt(f.latency.max)} ms` +
          (ordered(i) ? `, ${fmt(f.ordered!.inversions)} inversions` : ''),
      );
    say(
      `${name}: quiet publish answered in p50 ${fmt(result.probeAnswerP50)} ms, p99 ${fmt(result.probeAnswerP99)} ms`,
    );
    say(
      `${name}: noisy tenant ${fmt(result.floodAccepted)} events → ${fmt(result.floodDeliveries)} deliveries, ` +
        `${fmt(stats.slowReceived)} requests reached its receivers, ${fmt(stats.slowHeldMax)} held at once`,
    );
    const lag = [...lagMax.values()];
    say(`${name}: longest event-loop delay per Sluice process: ${lag.join(' / ')} ms`);
    return { name, flood, seconds, result, stats, lost, inFlight: [...inFlightMax.values()], lag };
  };
  const alone = await phase('quiet tenant alone', false, BASELINE_SECONDS);
  const flooded = await phase('with the flood', true, SECONDS);

  // Report
  const commit = measuredCommit(opt['sluice-dir'] ?? ROOT);
  const rows = [alone, flooded].flatMap((p) =>
    p.stats.fast.map(
      (f, i) =>
        `| ${p.name} | ${QUIET_KINDS[i].name} | ${fmt(p.result.probeAccepted)} | ${fmt(f.latency.p50)} | ` +
        `${fmt(f.latency.p99)} | ${fmt(f.latency.max)} | ${fmt(p.lost[i])} | ${fmt(f.duplicates)} | ` +
        `${ordered(i) ? fmt(f.ordered!.inversions) : '—'} | ` +
        `${p.flood && i === 0 ? `${fmt(p.result.floodAccepted)} → ${fmt(p.result.floodDeliveries)}` : '—'} | ` +
        `${p.flood && i === 0 ? fmt(p.stats.slowHeldMax) : '—'} | ` +
        `${i === 0 ? p.inFlight.map((n) => fmt(n)).join(' / ') || '—' : '—'} | ` +
        `${i === 0 ? p.lag.map((n) => fmt(n)).join(' / ') || '—' : '—'} | ` +
        `${i === 0 ? `${fmt(p.result.probeAnswerP50)} / ${fmt(p.result.probeAnswerP99)}` : '—'} |`,
    ),
  );
  const section = [
    `### noisy neighbour: ${opt.label} (${startedAt.toISOString().slice(0, 10)}, Sluice at ${commit})`,
    '',
    `Command: \`${bench.command('bench:noisy')}\`; ` +
      `${opt['sluice-dir'] ? `Sluice from another checkout (\`--sluice-dir\`); ` : ''}` +
      `machine: ${machineLine()}, load average ${load1.toFixed(2)} at start. ` +
      `Processes: Kafka, \`sluice start\` (1 worker) + ${DISPATCHERS} \`sluice dispatcher\`, ` +
      'receivers, load generator. ' +
      `Tenant noisy: ${SLOW} ${NOISY} endpoints (${JSON.stringify(NOISY_KINDS[NOISY])}` +
      `${NOISY === 'paused-ordered' ? ', then paused' : ''}) holding each event ${fmt(HOLD_MS)} ms ` +
      `(the ping answered at once), a batch of ${FLOOD_BATCH} events every ${FLOOD_EVERY_MS / 1000} s. ` +
      `Tenant quiet: ${QUIET_KINDS.length} fast endpoints (one of each kind below), ${RATE} events/s, ` +
      `one per request on a fixed schedule, ${QUIET_KEYS} ordering keys.`,
    '',
    '| phase | quiet endpoint | quiet events | p50 ms | p99 ms | max ms | not received 30 s after | dup | ' +
      'inversions | ' +
      'noisy events → deliveries | noisy requests held at once (max) | in flight per dispatcher (max) | ' +
      'longest event-loop delay per process (ms) | ' +
      'quiet publish answered p50 / p99 ms |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows,
    ...(notes.length ? ['', ...notes.map((n) => `- ${n}`)] : []),
  ].join('\n');
  say();
  say(section);
  writeResults(resultsFile(opt.results, quick), `noisy-neighbour:${opt.label}`, section);
  const failed = [alone, flooded].some(
    (p) => p.lost.some((n) => n > 0) || p.stats.fast.some((f, i) => ordered(i) && f.ordered!.inversions > 0),
  );
  return failed ? 1 : 0;
}

bench.run(main);
