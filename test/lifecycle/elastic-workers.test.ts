/**
 * `sluice start --workers auto` adds and retires workers under load (cli/primary.ts). Told to grow
 * at any load and shrink at any load, with 1-2 s windows, the node comes and goes between one
 * worker and two every few seconds while events stream to a receiver: every event is delivered
 * once, the node's /readyz never fails, its delivery counter never falls (a retiring worker hands
 * its counters over), and a worker that dies unasked still stops the node.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { freePort, freePorts, spawnStart, startTestNode, uniquePrefix } from '../helpers/sluice.ts';
import { sumSeries } from '../helpers/prometheus.ts';
import { processTree } from '../../harness/proc-cpu.ts';
import { receiver, registerEndpoint } from '../dispatcher/receiver.ts';
import { missing, publisher } from '../faults/harness.ts';
import { cliEnv } from '../../harness/sluice-cli.ts';

const prefix = uniquePrefix('elastic');
const insecure = { SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true' };
const node = await startTestNode(insecure, { prefix });
const r = await receiver(200);
t.teardown(async () => {
  await r.close();
  await node.close();
});
const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));
const received = () => new Set(r.events().map((h) => h.body.id as string));

const changes = (page: string, change: string) => sumSeries(page, 'sluice_node_worker_changes_total', { change });

t.test('workers come and go under load: nothing lost or repeated, always ready, counters kept', async (t) => {
  const token = await node.token(await node.client('admin', 'elastic'));
  await registerEndpoint(node, token, r.url, ['inference.completed']);
  const adminPort = await freePorts(3);
  const start = spawnStart(
    t,
    ['--workers', 'auto'],
    cliEnv(node.config, {
      ...insecure,
      SLUICE_PORT: String(await freePort()),
      SLUICE_ADMIN_PORT: String(adminPort),
      SLUICE_HOST: '127.0.0.1',
      SLUICE_WORKERS_MAX: '2',
      // Grow at any load, shrink at any load: the node changes every few seconds.
      SLUICE_WORKERS_GROW_BUSY: '0',
      SLUICE_WORKERS_SHRINK_BUSY: '1',
      SLUICE_WORKERS_GROW_AFTER_MS: '1000',
      SLUICE_WORKERS_SHRINK_AFTER_MS: '2000',
    }),
  );
  const admin = (path: string) =>
    fetch(`http://127.0.0.1:${adminPort}${path}`).then(
      async (res) => ({ status: res.status, text: await res.text() }),
      () => ({ status: 0, text: '' }),
    );
  for (let i = 0; i < 240 && (await admin('/readyz')).status !== 200; i++) await sleep(250);
  t.equal((await admin('/readyz')).status, 200, 'the node is ready with its first worker');

  const pub = publisher(node, () => token, 'elastic', { perBatch: 10, everyMs: 50 });
  const notReady: number[] = [];
  const unscraped: string[] = [];
  const delivered: number[] = [];
  let page = '';
  const until = Date.now() + 90_000;
  while (Date.now() < until && !(changes(page, 'grow') >= 3 && changes(page, 'shrink') >= 2)) {
    const ready = await admin('/readyz');
    if (ready.status !== 200) notReady.push(ready.status);
    const metrics = await admin('/metrics');
    if (metrics.status === 200) {
      page = metrics.text;
      delivered.push(sumSeries(page, 'sluice_deliveries_total') || 0);
    } else unscraped.push(`${metrics.status} ${metrics.text.slice(0, 200)}`);
    await sleep(250);
  }
  await pub.stop();
  const cycled = changes(page, 'grow') >= 3 && changes(page, 'shrink') >= 2;
  t.ok(cycled, `grew and shrank by turns${cycled ? '' : `\n${start.output()}`}`);
  t.same(notReady, [], 'the node answered /readyz 200 throughout');
  t.same(unscraped, [], 'and /metrics 200');
  const falls = delivered.filter((v, i) => i > 0 && v < delivered[i - 1]);
  t.same(falls, [], `the node's delivery count never fell (${delivered[0]} … ${delivered.at(-1)})`);
  const lost = await missing(pub.stats.accepted, received, 120_000);
  t.same(lost.slice(0, 10), [], `every one of the ${pub.stats.accepted.size} accepted events was delivered`);
  t.same([...pub.stats.unexpected], [], 'publishing never failed');
  const receipts = r.events().length;
  const repeats = receipts - received().size;
  t.comment(`accepted ${pub.stats.accepted.size}, receipts ${r.events().length}, repeats ${repeats}`);
  t.equal(repeats, 0, 'no event delivered twice');
  // Every delivery is counted once, whichever worker made it and whether it has retired since.
  let total = 0;
  for (let i = 0; i < 40 && total < receipts; i++, await sleep(250))
    total = sumSeries((await admin('/metrics')).text, 'sluice_deliveries_total', { outcome: 'delivered' });
  t.equal(total, receipts, `the node counts all ${receipts} deliveries, retired workers' included (${total})`);

  // Worker 0 is never retired; killed, it takes the node down as before.
  const first = processTree(start.child.pid!)
    .slice(1)
    .find((pid) => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes('SLUICE_WORKER_INDEX=0'));
  t.ok(first, 'worker 0 runs');
  process.kill(Number(first), 'SIGKILL');
  t.equal(await start.exited, 1, 'a worker killed unasked stops the node, which exits 1');
  t.match(start.output(), /exited \(SIGKILL\); stopping the others/);
});
