/**
 * A short form of `npm run lab:regions` (scripts/lab-regions.ts): three regions in network
 * namespaces, 40 ms each way between them through Toxiproxy, 20 revocations sent to region a
 * (b and c refuse the token within 250 ms), then region c cut off for 10 s under load (a and b go
 * on, c fails closed, revocations made meanwhile apply in c before it serves again, nothing lost).
 * Needs root for the namespaces: skipped with the reason otherwise.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { loadConfig } from '../../core/config.ts';
import { openContext } from '../../core/context.ts';
import { whyNoNamespaces } from '../../scripts/lab/net.ts';
import { startLab } from '../../scripts/lab/regions.ts';
import {
  fmtStats,
  knownToken,
  labReceiver,
  measureCut,
  measureRevocation,
  registerReceivers,
} from '../../scripts/lab/measure.ts';
import { createClient } from '../../core/clients/provisioning.ts';

const why = whyNoNamespaces();
// Three brokers, six Sluice processes and Toxiproxy started and stopped here: about 190 s on a quiet
// 2-core machine, and more beside the other lane of the suite; the suite's 300 s is too short for it.
t.setTimeout(600_000);

t.test('three regions at 80 ms RTT: revocation everywhere, a region cut off', { skip: why ?? false }, async (t) => {
  const workDir = mkdtempSync(join(tmpdir(), 'sluice-fault-regions-'));
  const lab = await startLab({
    oneWayMs: 40,
    workDir,
    topicPrefix: `regions-${Date.now().toString(36)}`,
    env: { SLUICE_KAFKA_STALE_MS: '6000', SLUICE_TOKEN_RATE_PER_MINUTE: '600000', SLUICE_TOKEN_RATE_BURST: '10000' },
    log: (l) => t.comment(l),
  });
  const config = loadConfig({
    ...lab.sluiceEnv('a'),
    SLUICE_LOG_LEVEL: 'error',
    SLUICE_DATA_DIR: join(workDir, 'state-test'),
  });
  const ctx = await openContext(config, { brokers: config.kafkaBrokers!, component: 'regions-test' });
  const receivers = await Promise.all(['a', 'b', 'c'].map((r) => labReceiver(lab.net.hostIp, r)));
  t.teardown(async () => {
    for (const r of receivers) await r.close().catch(() => {});
    await ctx.close().catch(() => {});
    await lab.stop();
    rmSync(workDir, { recursive: true, force: true });
    setTimeout(() => process.exit(), 1000).unref();
  });

  const rev = await measureRevocation(lab, ctx, 10, (l) => t.comment(l));
  for (const r of ['b', 'c'] as const) t.comment(`revocation reaches ${r}: ${fmtStats(rev.fromSent[r])}`);
  // Every revoked token is refused in b and c; how fast (p99 ≤ 250 ms at 80 ms RTT) is the lab's
  // measure (npm run lab:regions, bench/RESULTS.md), not this test's: a busy CI machine is slow.
  t.same(rev.missed, { b: 0, c: 0 }, 'b and c refuse every revoked token');
  t.equal(rev.fromSent.b.n + rev.fromSent.c.n, 10 * 2, 'each of the 20 revocations reached its region');

  const admin = await createClient(ctx, { tenant: 'lab', role: 'admin', region: 'a' });
  await registerReceivers(lab, await knownToken(lab.region('a').base, admin), receivers);
  const cut = await measureCut(lab, ctx, receivers, {
    cutMs: 10_000,
    rate: 100,
    revocations: 3,
    drainMs: 300_000,
    log: (l) => t.comment(l),
  });
  t.comment(JSON.stringify(cut));
  t.ok(
    cut.cFailClosedAfterMs > 0 && cut.cFailClosedAfterMs < 9500,
    `c fails closed once stale (${cut.cFailClosedAfterMs} ms)`,
  );
  t.equal(cut.staleAcceptsAfterReturn, 0, 'no token revoked during the cut is accepted by c after it returns');
  // While the controller fences c (a few seconds: the publish gaps above) a and b may refuse
  // probes; c, cut off, refuses from when it is stale until it is back. The full lab
  // (npm run lab:regions) measures the figure; beside the suite's load a and b refused up to a
  // third (a 19/60, b 17/60, the whole 10 s cut), so the test holds them to half and above c.
  const served = (r: 'a' | 'b' | 'c') => 1 - cut.failedProbes[r] / cut.probes[r];
  t.ok(
    served('a') >= 0.5 && served('b') >= 0.5,
    `a and b keep issuing tokens and checking scopes (failed probes: a ${cut.failedProbes.a}/${cut.probes.a}, ` +
      `b ${cut.failedProbes.b}/${cut.probes.b})`,
  );
  t.ok(served('c') < served('a') && served('c') < served('b'), 'c, cut off, served fewer than a and b');
  t.ok(cut.publish.accepted > 0, `${cut.publish.accepted} events accepted in a and b`);
  t.equal(cut.lost, 0, `every accepted event delivered to every endpoint (${cut.duplicates} duplicates)`);
});
