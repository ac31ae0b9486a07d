/**
 * A rolling restart under load: three `sluice dispatcher` processes, each in turn sent SIGTERM,
 * waited for, and replaced, while events are published at a steady rate. A stopping member
 * finishes and commits what it started before it leaves its group (test/receivers/sigterm.test.ts
 * checks that alone), and every member that rebalances because of it, or of its replacement,
 * finishes and commits its attempts and fan-out batches under way before it rejoins
 * (core/kafka/rejoin-patch.ts): nothing is lost and nothing is delivered twice (issue 32). Before
 * the rejoin hold, a run repeated 157 of 15,220.
 */
import t from 'tap';
import type { ChildProcess } from 'node:child_process';
import { spawnDispatcher, type DispatcherProcess } from '../../harness/sluice-cli.ts';
import { startTestNode, uniquePrefix } from '../helpers/sluice.ts';
import { receiver, registerEndpoint } from '../dispatcher/receiver.ts';
import { missing, publisher } from './harness.ts';

const prefix = uniquePrefix('rolling');
const env = { SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true', SLUICE_TIME_SCALE: '600' };
const node = await startTestNode(env, { prefix });
const r = await receiver(200);
const children = new Set<ChildProcess>();
t.teardown(async () => {
  for (const c of children) c.kill('SIGKILL');
  await r.close();
  await node.close();
});

const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));
const received = () => new Set(r.events().map((h) => h.body.id as string));

function dispatcher(): Promise<DispatcherProcess> {
  return spawnDispatcher(prefix, env, (c) => {
    children.add(c);
    c.once('exit', () => children.delete(c));
  });
}

t.test('SIGTERM one dispatcher at a time under load, each replaced: nothing lost, nothing repeated', async (t) => {
  const token = await node.token(await node.client('admin', 'rolling'));
  await registerEndpoint(node, token, r.url, ['inference.completed']);
  const members = await Promise.all([dispatcher(), dispatcher(), dispatcher()]);
  // About 400 events/s for the whole restart.
  const pub = publisher(node, () => token, 'roll', { perBatch: 20, everyMs: 50 });
  await sleep(4000);
  const exits: { code: number | null; signal: string | null }[] = [];
  for (const old of members) {
    const exited = new Promise<{ code: number | null; signal: string | null }>((res) =>
      old.child.once('exit', (code, signal) => res({ code, signal })),
    );
    const termAt = Date.now();
    old.child.kill('SIGTERM');
    const exit = await exited;
    exits.push(exit);
    // What a member that did not stop cleanly printed (its stderr is the test's own).
    const tail = exit.code === 0 ? '' : `; its output:\n${old.output().slice(-2000)}`;
    t.comment(
      `member ${old.child.pid} exited ${exit.code ?? exit.signal} ${Date.now() - termAt} ms after SIGTERM${tail}`,
    );
    await dispatcher();
    await sleep(3000);
  }
  await pub.stop();
  t.same(
    exits.map((e) => [e.code, e.signal]),
    [
      [0, null],
      [0, null],
      [0, null],
    ],
    'each member exited 0 by itself',
  );
  const lost = await missing(pub.stats.accepted, received, 120_000);
  t.same(lost.slice(0, 10), [], `every one of the ${pub.stats.accepted.size} accepted events was delivered`);
  t.same([...pub.stats.unexpected], [], 'publishing never failed');
  const receipts = r.events().length;
  const repeats = receipts - received().size;
  t.comment(`accepted ${pub.stats.accepted.size}, receipts ${receipts}, repeats ${repeats}`);
  t.equal(repeats, 0, 'no event delivered twice');
});
