/**
 * `npm run lab:regions`: three simulated regions on this machine (harness/lab/regions.ts), with
 * Toxiproxy adding the delay between them, and what Sluice does there: revocation propagation from
 * region a, the hot path per region with and without the delay, region c cut off under load, and
 * a region's broker killed under load. Prints the figures and writes them to bench/RESULTS.md
 * ("Regions"). Needs root (network namespaces); tears everything down however it ends.
 *
 *   sudo npm run lab:regions -- [--one-way-ms 40] [--revocations 200] [--cut-seconds 60]
 *       [--rate 200] [--hot 200] [--kill-seconds 20] [--only revocation,hot,cut,kill]
 *       [--no-push] (revocations travel through Kafka only) [--broker-prop key=value ...]
 *       [--no-results] [--keep-logs] [--log-level info] (every Sluice process's; info names each
 *       group join and its partitions)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../core/config.ts';
import { openContext, type Context } from '../core/context.ts';
import { createClient } from '../core/clients/provisioning.ts';
import { machineLine, measuredCommit, writeMarkedSection } from '../harness/results-section.ts';
import { startLab, REGIONS, type Lab } from '../harness/lab/regions.ts';
import { whyNoNamespaces } from '../harness/lab/net.ts';
import {
  fmtStats,
  labReceiver,
  measureBrokerKill,
  measureCut,
  measureHotPath,
  measureRevocation,
  registerReceivers,
  knownToken,
  tokenFor,
  until,
  type LabReceiver,
} from '../harness/lab/measure.ts';
import { PROJECT_ROOT } from '../core/paths.ts';

const root = PROJECT_ROOT;
const { values } = parseArgs({
  options: {
    'one-way-ms': { type: 'string', default: '40' },
    revocations: { type: 'string', default: '200' },
    'cut-seconds': { type: 'string', default: '60' },
    rate: { type: 'string', default: '200' },
    hot: { type: 'string', default: '200' },
    'kill-seconds': { type: 'string', default: '20' },
    only: { type: 'string' },
    'no-results': { type: 'boolean', default: false },
    'keep-logs': { type: 'boolean', default: false },
    'log-level': { type: 'string', default: 'warn' },
    'no-push': { type: 'boolean', default: false },
    'broker-prop': { type: 'string', multiple: true },
  },
});
const oneWayMs = Number(values['one-way-ms']);
const only = new Set((values.only ?? 'revocation,hot,cut,kill').split(','));
const say = (line: string) => process.stdout.write(`${line}\n`);
const WHAT = { token: 'token issuance', checked: 'scope-checked request', publish: 'publish (acks=all)' };

const why = whyNoNamespaces();
if (why) {
  process.stderr.write(`lab:regions: ${why}\n`);
  process.exit(2);
}

const workDir = mkdtempSync(join(tmpdir(), 'sluice-lab-regions-'));
const prefix = `lab-${Date.now().toString(36)}`;
const env = {
  SLUICE_TOKEN_RATE_PER_MINUTE: '6000000',
  SLUICE_TOKEN_RATE_BURST: '100000',
  SLUICE_RATE_LIMIT_PER_CLIENT: '1000000',
  SLUICE_RATE_LIMIT_BURST: '1000000',
  ...(process.env.SLUICE_STATE_FETCH_WAIT_MS
    ? { SLUICE_STATE_FETCH_WAIT_MS: process.env.SLUICE_STATE_FETCH_WAIT_MS }
    : {}),
  ...(process.env.SLUICE_KAFKA_STALE_MS ? { SLUICE_KAFKA_STALE_MS: process.env.SLUICE_KAFKA_STALE_MS } : {}),
};
let lab: Lab | null = null;
let ctx: Context | null = null;
const receivers: LabReceiver[] = [];
let finishing = false;
async function finish(code: number) {
  if (finishing) return;
  finishing = true;
  for (const r of receivers) await r.close().catch(() => {});
  await ctx?.close().catch(() => {});
  await lab?.stop().catch(() => {});
  if (code !== 0 || values['keep-logs']) say(`logs kept in ${workDir}`);
  else rmSync(workDir, { recursive: true, force: true });
  process.exit(code);
}
for (const [signal, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
] as const)
  process.once(signal, () => {
    process.stderr.write(`${signal}: tearing the lab down\n`);
    void finish(code);
  });
process.on('uncaughtException', (err) => {
  process.stderr.write(`lab:regions failed: ${err.stack ?? err}\n`);
  void finish(1);
});

const lines: string[] = [];
const out = (line: string) => {
  lines.push(line);
  say(line);
};

try {
  const started = Date.now();
  lab = await startLab({
    oneWayMs,
    workDir,
    topicPrefix: prefix,
    env,
    push: !values['no-push'],
    logLevel: values['log-level'],
    brokerProps: values['broker-prop'] ?? [],
    log: (l) => say(`# ${l}`),
  });
  say(`# lab up in ${((Date.now() - started) / 1000).toFixed(0)} s (logs: ${workDir}/logs)`);
  const config = loadConfig({
    ...process.env,
    ...lab.sluiceEnv('a'),
    SLUICE_LOG_LEVEL: 'error',
    SLUICE_DATA_DIR: join(workDir, 'state-lab'),
  });
  ctx = await openContext(config, { brokers: config.kafkaBrokers!, component: 'lab' });
  const staleMs = config.kafkaStaleMs;
  out(
    `3 regions (a, b, c) on one ${process.arch} host, ${oneWayMs} ms each way between regions ` +
      `(${2 * oneWayMs} ms RTT) through Toxiproxy; SLUICE_KAFKA_STALE_MS ${staleMs}, ` +
      `SLUICE_STATE_FETCH_WAIT_MS ${config.stateFetchWaitMs}; revocations pushed to the other regions: ` +
      `${values['no-push'] ? 'no (Kafka only)' : 'yes (SLUICE_PEERS)'}` +
      `${values['broker-prop']?.length ? `; brokers: ${values['broker-prop'].join(' ')}` : ''}`,
  );
  out('');

  if (only.has('revocation')) {
    const n = Number(values.revocations);
    say(`revocation: ${n} clients revoked through region a`);
    const r = await measureRevocation(lab, ctx, n, say);
    out(`### Revocation (${n} clients of region b and ${n} of c revoked through region a, ${2 * oneWayMs} ms RTT)`);
    out('');
    out("From sending `POST /v1/auth/revocations` to a until the client's region's ingress answers 401:");
    out('');
    for (const reg of ['b', 'c'] as const)
      out(`- ${reg}: ${fmtStats(r.fromSent[reg])}${r.missed[reg] ? `; ${r.missed[reg]} not refused within 10 s` : ''}`);
    out(`- a (the POST until its 201, a's own view has it then): ${fmtStats(r.post201)}`);
    out('');
  }

  const admins = {} as Record<(typeof REGIONS)[number], Awaited<ReturnType<typeof createClient>>>;
  for (const reg of REGIONS) admins[reg] = await createClient(ctx, { tenant: 'lab', role: 'admin', region: reg });
  const admin = admins.a;
  if (only.has('hot')) {
    const n = Number(values.hot);
    await until(async () => (await tokenFor(lab!.region('c').base, admins.c)).status === 200, 30_000, 'admin in c');
    say(`hot path: ${n} tokens, scope-checked requests and publishes per region, at 0 ms then ${oneWayMs} ms`);
    await lab.setLatency(0);
    await new Promise((r) => setTimeout(r, 2000));
    const zero = await measureHotPath(lab, admins, n);
    await lab.setLatency(oneWayMs);
    await new Promise((r) => setTimeout(r, 2000));
    const far = await measureHotPath(lab, admins, n);
    out(`### Hot path per region (${n} each; the client in the region), 0 ms vs ${2 * oneWayMs} ms RTT`);
    out('');
    out('| region | what | 0 ms p50 / p99 | 80 ms p50 / p99 |'.replace('80', String(2 * oneWayMs)));
    out('|---|---|---|---|');
    const cell = (s: { p50: number; p99: number }) => `${s.p50.toFixed(1)} / ${s.p99.toFixed(1)} ms`;
    for (const reg of REGIONS)
      for (const what of ['token', 'checked', 'publish'] as const)
        out(`| ${reg} | ${WHAT[what]} ` + `| ${cell(zero[reg][what])} | ${cell(far[reg][what])} |`);
    out('');
  }

  if (only.has('cut') || only.has('kill')) {
    for (const reg of REGIONS) receivers.push(await labReceiver(lab.net.hostIp, reg));
    const adminToken = await knownToken(lab.region('a').base, admin);
    await registerReceivers(lab, adminToken, receivers);
  }
  if (only.has('cut')) {
    const cutMs = Number(values['cut-seconds']) * 1000;
    say(`cut: region c off for ${cutMs / 1000} s under ${values.rate} events/s published in a and b`);
    const c = await measureCut(lab, ctx, receivers, {
      cutMs,
      rate: Number(values.rate),
      revocations: 5,
      log: say,
    });
    out(`### Region c cut off for ${cutMs / 1000} s (${values.rate} events/s published in a and b, 3 endpoints)`);
    out('');
    out(
      `- probes (token + scope-checked request every 200 ms) not answered 200: ` +
        REGIONS.map((reg) => `${reg} ${c.failedProbes[reg]}/${c.probes[reg]}`).join(', '),
    );
    out(
      `- c failed closed (503) ${c.cFailClosedAfterMs} ms after the cut; ` +
        `served again ${c.cServingAfterMs} ms after it ended`,
    );
    out(
      `- ${c.revokedDuringCut} clients revoked in a during the cut (${c.refusedDuringCut} attempts answered 503 ` +
        `first and were sent again): their tokens accepted by c before it failed ` +
        `closed ${c.staleAcceptsBeforeFailClosed} times, after it came back ${c.staleAcceptsAfterReturn} times`,
    );
    out(
      `- events accepted ${c.publish.accepted}, refused ${c.publish.refused}; longest time without an accepted ` +
        `batch: a ${c.publish.longestGapMs.a} ms, b ${c.publish.longestGapMs.b} ms`,
    );
    out(
      `- deliveries expected ${c.expected}: lost ${c.lost}, duplicates ${c.duplicates} ` +
        `(events delivered more than once, per receiver: ${JSON.stringify(c.repeated)}); ` +
        `all delivered ${c.drainedAfterMs} ms after the cut ended`,
    );
    out(`- the repeated events by when they were published (second from the cut): ${JSON.stringify(c.repeatedAt)}`);
    out(
      '- the repeats by first copy → repeat, each as the sending region @ the second it arrived # attempt: ' +
        JSON.stringify(c.repeatedBy),
    );
    out('');
    if (c.lost > 0) {
      say(`lost, e.g.: ${c.lostSample.join(' ')}`);
    }
  }
  if (only.has('kill')) {
    const downMs = Number(values['kill-seconds']) * 1000;
    say(`kill: broker b SIGKILLed for ${downMs / 1000} s under ${values.rate} events/s published in a, b and c`);
    const k = await measureBrokerKill(lab, ctx, receivers, {
      region: 'b',
      downMs,
      rate: Number(values.rate),
      log: say,
    });
    out(`### Broker of region b SIGKILLed for ${downMs / 1000} s (${values.rate} events/s published in a, b, c)`);
    out('');
    out(
      `- events accepted ${k.accepted}, refused ${k.refused}; longest time without an accepted batch: ` +
        Object.entries(k.longestGapMs)
          .map(([r, ms]) => `${r} ${ms} ms`)
          .join(', '),
    );
    out(
      `- deliveries expected ${k.expected}: lost ${k.lost}, duplicates ${k.duplicates} ` +
        `(per receiver: ${JSON.stringify(k.repeated)})`,
    );
    if (k.lost > 0) say(`lost, e.g.: ${k.lostSample.join(' ')}`);
    out('');
  }
  if (!values['no-results']) {
    const args = process.argv.slice(2).join(' ');
    const command = `sudo npm run lab:regions${args ? ` -- ${args}` : ''}`;
    writeMarkedSection(
      join(root, 'bench', 'RESULTS.md'),
      'regions',
      `## Regions\n\n\`${command}\` (${new Date().toISOString().slice(0, 10)}, Sluice at ${measuredCommit(root)}; ` +
        `machine: ${machineLine()}):\n\n${lines.join('\n')}`,
    );
    say('written to bench/RESULTS.md ("Regions")');
  }
  await finish(0);
} catch (err) {
  process.stderr.write(`lab:regions failed: ${(err as Error).stack ?? err}\n`);
  await finish(1);
}
