/**
 * A fix for kafkajs 2.2.4's consumers when their group coordinator dies, applied once when
 * core/kafka/client.ts loads.
 *
 * A consumer group keeps the broker it joined through as its coordinator, and never looks again on
 * a connection failure. When that broker is killed, every heartbeat (sent after each empty fetch
 * and each batch) fails, the consumer stops its fetchers, backs off and starts again: records
 * arrive about every 3 s, for as long as the group takes to notice on its own (30 s and more,
 * measured: one broker of three killed made every publish wait ~3 s for its claim to be read,
 * issue 25). Its offset manager does the same on commit. Here a heartbeat that cannot reach the
 * coordinator asks the cluster where the group's coordinator is now and tries once more there,
 * and a commit whose coordinator's connection is gone asks the same; the new coordinator answers,
 * or tells the member to rejoin, as kafkajs already handles.
 */
import { kafkajsClass } from './kafkajs-internals.ts';

/** The part of kafkajs's broker and cluster this fix uses. */
interface Broker {
  isConnected(): boolean;
}
interface Cluster {
  findGroupCoordinator(args: { groupId: string }): Promise<Broker>;
}
export interface GroupState {
  groupId: string;
  cluster: Cluster;
  coordinator: Broker | null;
}

const LOST_COORDINATOR = new Set([
  'KafkaJSConnectionError',
  'KafkaJSConnectionClosedError',
  'KafkaJSRequestTimeoutError',
]);

/** A failure that says the coordinator's broker cannot be reached (not one the coordinator answered). */
export function lostCoordinator(err: unknown): boolean {
  return LOST_COORDINATOR.has((err as { name?: string } | null)?.name ?? '');
}

let refinds = 0;
/** How many times this process looked a group's coordinator up again after losing it. */
export const coordinatorRefinds = () => refinds;

/** One lookup at a time per group: concurrent heartbeats share it. */
const lookups = new WeakMap<GroupState, Promise<void>>();

export function refindCoordinator(group: GroupState): Promise<void> {
  let lookup = lookups.get(group);
  if (!lookup) {
    refinds++;
    lookup = group.cluster
      .findGroupCoordinator({ groupId: group.groupId })
      .then((broker) => {
        group.coordinator = broker;
      })
      .finally(() => lookups.delete(group));
    lookups.set(group, lookup);
  }
  return lookup;
}

/** Wraps a group's heartbeat: on a lost coordinator, find the current one and send it once more. */
export function heartbeatFindingCoordinator<A>(
  heartbeat: (this: GroupState, args: A) => Promise<void>,
): (this: GroupState, args: A) => Promise<void> {
  return async function (this: GroupState, args: A) {
    try {
      await heartbeat.call(this, args);
    } catch (err) {
      if (!lostCoordinator(err)) throw err;
      await refindCoordinator(this);
      await heartbeat.call(this, args);
    }
  };
}

interface OffsetManagerState {
  groupId: string;
  cluster: Cluster;
  coordinator: Broker;
}

/** The offset manager's coordinator, looked up again when its connection is gone. */
export async function currentCoordinator(this: OffsetManagerState): Promise<Broker> {
  if (!this.coordinator.isConnected()) {
    refinds++;
    this.coordinator = await this.cluster.findGroupCoordinator({ groupId: this.groupId });
  }
  return this.coordinator;
}

const ConsumerGroup = kafkajsClass<{ heartbeat: (this: GroupState, args: { interval: number }) => Promise<void> }>(
  'consumer/consumerGroup.js',
  ['heartbeat'],
);
const OffsetManager = kafkajsClass<{ getCoordinator: (this: OffsetManagerState) => Promise<Broker> }>(
  'consumer/offsetManager/index.js',
  ['getCoordinator'],
);
ConsumerGroup.prototype.heartbeat = heartbeatFindingCoordinator(ConsumerGroup.prototype.heartbeat);
OffsetManager.prototype.getCoordinator = currentCoordinator;
