/**
 * The rejoin hold (core/kafka/rejoin-patch.ts): kafkajs's joinAndSync waits for the hook of the
 * member rejoining, never for a first join's, and a failing hook does not stop the rejoin. Against
 * a broker, test/faults/rolling-restart.test.ts counts what it saves.
 */
import t from 'tap';
import { beforeRejoin, holdingRejoin } from '../../core/kafka/rejoin-patch.ts';

t.test('a registered member finishes its hook before it rejoins; a first join is not held', async (t) => {
  const log: string[] = [];
  const join = holdingRejoin(async function (this: { memberId: string | null }) {
    log.push(`join ${this.memberId}`);
  });
  const unregister = beforeRejoin('m-1', async () => {
    await new Promise((r) => setTimeout(r, 30));
    log.push('hook m-1');
  });
  await join.call({ memberId: null });
  await join.call({ memberId: 'm-1' });
  await join.call({ memberId: 'm-2' });
  unregister();
  await join.call({ memberId: 'm-1' });
  t.same(log, ['join null', 'hook m-1', 'join m-1', 'join m-2', 'join m-1'], 'only m-1, and only while registered');

  beforeRejoin('m-3', async () => {
    throw new Error('commit refused');
  });
  await join.call({ memberId: 'm-3' });
  t.equal(log.at(-1), 'join m-3', 'a failed hook still rejoins');
});
