/**
 * A hook before a consumer rejoins its group, for kafkajs 2.2.4, applied once when
 * core/kafka/client.ts loads.
 *
 * kafkajs rejoins a rebalancing group at once (consumer/runner.js: REBALANCING, then
 * `joinAndSync`), while the attempts its owner had in flight are still open. Once it has rejoined,
 * the coordinator refuses the commits of the old generation, so the partitions' next owners send
 * those attempts again: a rolling restart of three dispatchers repeated 157 of 15,220 deliveries
 * (test/faults/rolling-restart.test.ts). The coordinator still takes the old generation's commits
 * while the group prepares its rebalance, so a member registered here (by its member id, known
 * from its GROUP_JOIN) is given the chance to finish and commit first; the hook bounds its own wait
 * (every other member waits in JoinGroup meanwhile). A first join, or one after the coordinator
 * forgot the member (no member id), has nothing to commit and is not held.
 */
import { kafkajsClass } from './kafkajs-internals.ts';

interface GroupMember {
  memberId: string | null;
}

const hooks = new Map<string, () => Promise<void>>();

/** Runs `hook` before the member `memberId` rejoins; returns what unregisters it. */
export function beforeRejoin(memberId: string, hook: () => Promise<void>): () => void {
  hooks.set(memberId, hook);
  return () => {
    if (hooks.get(memberId) === hook) hooks.delete(memberId);
  };
}

/** Wraps a group's joinAndSync: the member's hook first (its failure does not stop the rejoin). */
export function holdingRejoin(join: (this: GroupMember) => Promise<void>): (this: GroupMember) => Promise<void> {
  return async function (this: GroupMember) {
    const hook = this.memberId === null ? undefined : hooks.get(this.memberId);
    if (hook) await hook().catch(() => {});
    return join.call(this);
  };
}

const ConsumerGroup = kafkajsClass<{ joinAndSync: (this: GroupMember) => Promise<void> }>('consumer/consumerGroup.js', [
  'joinAndSync',
]);
ConsumerGroup.prototype.joinAndSync = holdingRejoin(ConsumerGroup.prototype.joinAndSync);
