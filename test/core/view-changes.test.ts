/** Waiting for a view to show a write: re-checked on announcements, not polled. */
import t from 'tap';
import { ViewChanges } from '../../core/kafka/view-changes.ts';
import { waitFor } from '../../core/context.ts';

t.test('a waiter re-checks on each announcement and resolves once its check holds', async (t) => {
  const changes = new ViewChanges();
  let applied = 0;
  let checks = 0;
  const waiting = changes.until(() => {
    checks++;
    return applied >= 2;
  }, 10_000);
  t.equal(changes.waiting, 1);
  applied = 1;
  changes.announce();
  applied = 2;
  changes.announce();
  t.equal(await waiting, true);
  t.equal(checks, 3, 'checked at once and on each of the two announcements, never in between');
  t.equal(changes.waiting, 0, 'the waiter is gone');
  changes.announce();
  t.equal(checks, 3, 'an announcement after it resolved checks nothing');
});

t.test('a check that already holds resolves without waiting', async (t) => {
  const changes = new ViewChanges();
  t.equal(await changes.until(() => true, 0), true);
  t.equal(changes.waiting, 0);
});

t.test('without an announcement the wait ends at its timeout, false', async (t) => {
  const changes = new ViewChanges();
  t.equal(await changes.until(() => false, 20), false);
  t.equal(changes.waiting, 0);
});

t.test('a check that throws rejects the wait', async (t) => {
  const changes = new ViewChanges();
  let broken = false;
  const waiting = changes.until(() => {
    if (broken) throw new Error('view is not open');
    return false;
  }, 10_000);
  broken = true;
  changes.announce();
  await t.rejects(waiting, /view is not open/);
  t.equal(changes.waiting, 0);
});

t.test('waitFor answers a 503 to retry when the view never shows the write', async (t) => {
  const changes = new ViewChanges();
  const err = await waitFor(changes, () => false, 20, 'the record').catch((e: unknown) => e);
  t.match(err, { code: 'UNAVAILABLE', message: /the record did not become visible/ });
  let shown = false;
  const done = waitFor(changes, () => shown, 10_000, 'the record');
  shown = true;
  changes.announce();
  await done;
  t.pass('and resolves on the announcement that shows it');
});
