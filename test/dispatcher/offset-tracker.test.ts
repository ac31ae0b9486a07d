/**
 * OffsetTracker's commits: a refused commit is tried again (not forgotten until the point moves),
 * and finished work waiting on commits that do not land stalls the consumer until one does.
 * The member is a stand-in for GroupConsumer's commit (what the tracker decides is under test here;
 * commits against a broker are covered by the crash and fault tests).
 */
import t from 'tap';
import { OffsetTracker } from '../../dispatcher/consume.ts';
import type { GroupConsumer } from '../../dispatcher/consume.ts';
import { createLogger } from '../../core/log.ts';
import { waitUntil } from '../../core/poll.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function member(land: () => boolean) {
  const commits: Array<Array<{ partition: number; offset: string }>> = [];
  const m = {
    opts: { groupId: 'g', sessionTimeoutMs: 30_000 },
    log: createLogger('error', 'test'),
    async commit(offsets: Array<{ partition: number; offset: string }>) {
      commits.push(offsets);
      return land();
    },
    async committed() {
      return new Map();
    },
  };
  return { m: m as unknown as GroupConsumer, commits };
}

t.test('a refused commit is made again without new work', async (t) => {
  let landing = false;
  const { m, commits } = member(() => landing);
  const tracker = new OffsetTracker(m, { commitEveryMs: 10 });
  tracker.retain({ d: [0] });
  t.ok(tracker.accept('d', 0, '5'), 'offset 5 handed out');
  tracker.finish('d', 0, '5');
  // Waited for as states (a loaded machine ran the 10 ms interval late: 1 try after a fixed 60 ms).
  await waitUntil(() => commits.length >= 2, 5000);
  t.ok(commits.length >= 2, `the refused commit was tried again (${commits.length} tries)`);
  landing = true;
  const refused = commits.length;
  await waitUntil(() => commits.length > refused, 5000);
  await sleep(20);
  const before = commits.length;
  t.same(commits[before - 1], [{ topic: 'd', partition: 0, offset: '6', metadata: 'r1:' }], 'offset 6 committed');
  await sleep(40);
  t.equal(commits.length, before, 'once it landed, nothing more is sent');
});

t.test('commits that do not land stall the consumer until one does', async (t) => {
  let landing = true;
  const { m } = member(() => landing);
  const calls: boolean[] = [];
  const tracker = new OffsetTracker(m, {
    commitEveryMs: 10,
    stallAfterMs: 200,
    freezes: { freeze: () => calls.push(true), thaw: () => calls.push(false) },
  });
  tracker.retain({ d: [0] });
  for (let o = 0; o < 10; o++) {
    tracker.accept('d', 0, String(o));
    tracker.finish('d', 0, String(o));
    await sleep(15);
  }
  t.same(calls, [], 'no stall while commits land');
  landing = false;
  for (let o = 10; o < 40; o++) {
    tracker.accept('d', 0, String(o));
    tracker.finish('d', 0, String(o));
    await sleep(15);
  }
  t.same(calls, [true], 'stalled once, finished work having waited past the limit');
  landing = true;
  await sleep(100);
  t.same(calls, [true, false], 'a landed commit ends the stall');
});

t.test('a stall ends when the work it waited on moved away, though commits still do not land', async (t) => {
  const { m, commits } = member(() => false);
  const calls: boolean[] = [];
  const tracker = new OffsetTracker(m, {
    commitEveryMs: 10,
    stallAfterMs: 100,
    freezes: { freeze: () => calls.push(true), thaw: () => calls.push(false) },
  });
  tracker.retain({ d: [0, 1] });
  for (let o = 0; o < 20; o++) {
    tracker.accept('d', o % 2, String(o));
    tracker.finish('d', o % 2, String(o));
    await sleep(10);
  }
  t.same(calls, [true], 'stalled: nothing lands');
  // A rebalance takes every partition away, then hands one back: nothing finished is waiting now.
  tracker.retain({});
  tracker.retain({ d: [1] });
  await sleep(60);
  t.same(calls, [true, false], 'thawed: no finished work waits for a commit');
  const tries = commits.length;
  await sleep(60);
  t.equal(commits.length, tries, 'and nothing is sent while nothing is finished');
  tracker.accept('d', 1, '100');
  tracker.finish('d', 1, '100');
  await sleep(200);
  t.same(calls, [true, false, true], 'new finished work that cannot be committed stalls again');
  await tracker.drain(0);
  const stopped = commits.length;
  await sleep(60);
  t.equal(commits.length, stopped, 'drained for a stop, it tries no more');
});
