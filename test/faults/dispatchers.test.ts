/**
 * Dispatcher processes coming and going under load: SIGKILL five times during a run, members
 * joining and leaving (rebalances). Every accepted event is delivered; duplicates are counted and
 * bounded by what each kill and rebalance may repeat. SLUICE_FAULT_EVENTS sets the run's size
 * (20,000 here and in `npm run soak`).
 */
import t from 'tap';
import type { ChildProcess } from 'node:child_process';
import { spawnDispatcher } from '../../harness/sluice-cli.ts';
import { startTestNode, uniquePrefix } from '../helpers/sluice.ts';
import { receiver, registerEndpoint } from '../dispatcher/receiver.ts';
import { publisher, missing } from './harness.ts';
import { COMMIT_STALL_MS } from '../../dispatcher/consume.ts';

const EVENTS = Number(process.env.SLUICE_FAULT_EVENTS ?? 20_000);
const prefix = uniquePrefix('kills');
// A killed member's partitions move once its session times out: 15 s here instead of 30 s, so five
// kills take about a minute, not three. Lower (8 s) evicted members the busy machine had stalled, and
// each eviction repeats what the member had not committed (7,001 repeats in one full run).
const env = {
  SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
  SLUICE_TIME_SCALE: '600',
  SLUICE_DISPATCH_SESSION_TIMEOUT_MS: '15000',
};
const node = await startTestNode(env, { prefix });
const r = await receiver(200);
const children = new Set<ChildProcess>();
/** Members that have started (killing one still starting proves nothing). */
const ready = new Set<ChildProcess>();
t.teardown(async () => {
  for (const c of children) c.kill('SIGKILL');
  await r.close();
  await node.close();
});

async function dispatcher(): Promise<ChildProcess> {
  const { child } = await spawnDispatcher(prefix, env, (c) => {
    children.add(c);
    c.once('exit', () => {
      children.delete(c);
      ready.delete(c);
    });
  });
  ready.add(child);
  return child;
}

const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));
const received = () => new Set(r.events().map((h) => h.body.id as string));

t.test(
  `SIGKILL of a dispatcher five times during ${EVENTS} events, with members joining and leaving: nothing lost`,
  async (t) => {
    const token = await node.token(await node.client('admin', 'kills'));
    await registerEndpoint(node, token, r.url, ['inference.completed']);
    await Promise.all([dispatcher(), dispatcher()]);
    // ~1,000 events/s, so the run spans the kills below.
    const pub = publisher(node, () => token, 'k', { perBatch: 50, everyMs: 50 });
    const publishStarted = Date.now();
    let publishSeconds = 0;
    let kills = 0;
    let outstandingAtKills = 0;
    const joining: Promise<ChildProcess>[] = [];
    let stopped = false;
    while (pub.stats.accepted.size < EVENTS || kills < 5) {
      await sleep(1500);
      if (!stopped && pub.stats.accepted.size >= EVENTS) {
        stopped = true;
        await pub.stop();
        publishSeconds = (Date.now() - publishStarted) / 1000;
      }
      if (kills < 5 && ready.size >= 2) {
        const victim = [...ready][0];
        outstandingAtKills += pub.stats.accepted.size - received().size;
        victim.kill('SIGKILL');
        kills++;
        joining.push(dispatcher()); // a member joins as one dies: a rebalance each time
      }
    }
    await Promise.all(joining);
    if (!stopped) {
      await pub.stop();
      publishSeconds = (Date.now() - publishStarted) / 1000;
    }
    t.equal(kills, 5, 'five dispatchers were killed mid-run');
    t.ok(outstandingAtKills > 0, `deliveries were outstanding at the kills (${outstandingAtKills} in all)`);
    // One more member joins and one leaves cleanly while the backlog drains.
    await dispatcher();
    [...ready][0].kill('SIGTERM');
    const lost = await missing(pub.stats.accepted, received, 180_000);
    t.same(
      lost.slice(0, 10),
      [],
      `every one of the ${pub.stats.accepted.size} accepted events was delivered (${lost.length} missing)`,
    );
    t.same([...pub.stats.unexpected], [], 'publishing never failed');
    const hits = r.events().length;
    const duplicates = hits - received().size;
    t.comment(`accepted ${pub.stats.accepted.size}, receipts ${hits}, duplicates ${duplicates}`);
    // A killed member repeats what it had not committed: its in-flight attempts (256 at most) and
    // what it finished whose commit had not landed, which a member lets run COMMIT_STALL_MS at most
    // before it starts nothing new (a starved machine's commits take that long). Each member that
    // joins or leaves moves partitions once more, with the attempts in flight on them.
    const rate = pub.stats.accepted.size / Math.max(1, publishSeconds);
    const perKill = 256 + Math.ceil((rate * COMMIT_STALL_MS) / 1000);
    const rebalances = kills + 2;
    const bound = kills * perKill + rebalances * 256;
    t.ok(
      duplicates <= bound,
      `duplicates bounded: ${duplicates} ≤ ${bound} (${kills} kills × ${perKill} + ${rebalances} rebalances × 256; ` +
        `${Math.round(rate)} events/s)`,
    );
  },
);
