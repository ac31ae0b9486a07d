/**
 * The fan-out's commits (dispatcher/fan-out.ts): events published one at a time, each its own
 * fan-out batch, share commits (at most one per COMMIT_EVERY_MS, not one per batch), every one is
 * fanned out, and a stop commits what was fanned out, so the group's offset reaches the end of
 * the topic and the next member repeats nothing.
 */
import t from 'tap';
import { COMMIT_EVERY_MS } from '../../dispatcher/fan-out.ts';
import { startTestNode } from '../helpers/sluice.ts';
import { fanOutOffsets } from './fan-out-offsets.ts';
import { publish, receiver, registerEndpoint } from './receiver.ts';

const node = await startTestNode({ SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true' }, { dispatcher: true });
let closed = false;
t.teardown(() => (closed ? undefined : node.close()));
const r = await receiver();
t.teardown(() => r.close());

type Committer = { commit(offsets: unknown[]): Promise<boolean> };
const fanOut = (node.workers.dispatcher as unknown as { fanOut: Committer }).fanOut;
let commits = 0;
const commit = fanOut.commit.bind(fanOut);
fanOut.commit = (offsets) => {
  commits++;
  return commit(offsets);
};

t.test('events fanned out one batch each share their commits, and a stop commits the rest', async (t) => {
  const token = await node.token(await node.client('admin', 'acme'));
  const ep = await registerEndpoint(node, token, r.url, ['order.created']);
  t.equal(ep.state, 'ACTIVE');
  const n = 60;
  commits = 0;
  const started = Date.now();
  for (let i = 0; i < n; i++) {
    const res = await publish(node, token, { type: 'order.created', data: { i } });
    t.equal(res.status, 202, `event ${i} accepted`);
    // One event per fan-out batch: the next is published once this one was delivered.
    await r.until((events) => events.length >= i + 1, 20_000, `event ${i} delivered`);
  }
  t.equal(r.events().length, n, 'each event delivered once');
  const elapsed = Date.now() - started;
  // At most one commit per interval (the first at once): with a commit per batch, as before, the
  // 60 batches of a few seconds would pass this bound.
  const most = Math.ceil(elapsed / COMMIT_EVERY_MS) + 2;
  t.ok(commits >= 1, `the fan-out committed (${commits} commits)`);
  t.ok(commits <= most, `${n} batches in ${elapsed} ms took ${commits} commits: at most ${most}, one per interval`);

  await node.close();
  closed = true;
  for (const p of await fanOutOffsets(node.config.topicPrefix))
    t.equal(p.committed, p.end, `partition ${p.partition}: committed to its end`);
});
