/**
 * How long a consumer group's fetch waits, decided fetch by fetch: applied once when
 * core/kafka/client.ts loads.
 *
 * A fetch asks the broker for records and waits up to its `maxWaitTime` when there are none; with
 * `minBytes` 1 a record ends the wait at once, so the wait costs no latency to records. What a
 * short wait buys is promptness to what a fetch cannot see coming: a partition resumed, or a seek,
 * takes effect only at the next fetch, after the one in flight returns. A short wait on an idle
 * group is paid by the clock, not the work (a dispatcher's four groups at 50-100 ms were most of
 * an idle node's CPU, issue 33). So a group that registers here waits `busyMs` only while it has
 * a partition paused that nothing will resume at a known time (backpressure), or says it is busy
 * (a re-read pending); while partitions wait on timers, until the next one is due; otherwise
 * `idleMs`.
 *
 * The bytes a fetch waits for are decided the same way, for a consumer that gathers records while
 * they stream but must not sit on the first one after a quiet spell (the attempt history).
 *
 * kafkajs 2.2.4 reads its ConsumerGroup's `maxWaitTime` and `minBytes` at each fetch (and sleeps
 * `maxWaitTime` when every partition is paused). Both properties become accessors on the prototype
 * here; the checks below refuse to load against a kafkajs whose fetch no longer reads them.
 */
import { KafkajsMismatchError, kafkajsClass } from './kafkajs-internals.ts';

export interface FetchWait {
  /** The wait while something is expected soon. */
  busyMs: number;
  /** The wait while nothing is. */
  idleMs: number;
  /** The owner's own reason for short waits (a seek pending), beside its paused partitions. */
  busy?(): boolean;
  /**
   * Milliseconds until the owner resumes its paused partitions by itself (timers), or null when
   * some wait on something else (room in a buffer): then fetches stay short.
   */
  resumeInMs?(): number | null;
  /**
   * The bytes the next fetch waits for (kafkajs's `minBytes`); else the group's configured value.
   * A consumer that batches while records stream asks 1 while idle, so a first record ends the wait.
   */
  minBytes?(): number;
}

interface GroupState {
  groupId: string;
  subscriptionState: { paused(): Array<{ topic: string; partitions: number[] }> };
}

const BASE = Symbol('sluice.maxWaitTime');
const BASE_MIN_BYTES = Symbol('sluice.minBytes');
type Group = GroupState & { [BASE]?: number; [BASE_MIN_BYTES]?: number };

/** Per group id: the waits its members in this process registered (tests run several nodes in one). */
const registry = new Map<string, Set<FetchWait>>();

/** Registers a group's waits; the returned function removes them. */
export function registerFetchWait(groupId: string, wait: FetchWait): () => void {
  const set = registry.get(groupId) ?? new Set<FetchWait>();
  registry.set(groupId, set);
  set.add(wait);
  return () => {
    set.delete(wait);
    if (set.size === 0 && registry.get(groupId) === set) registry.delete(groupId);
  };
}

/** The wait of one member's next fetch. */
export function waitOf(wait: FetchWait, paused: boolean): number {
  if (wait.busy?.()) return wait.busyMs;
  if (!paused) return wait.idleMs;
  const resumeIn = wait.resumeInMs?.() ?? null;
  if (resumeIn === null) return wait.busyMs;
  return Math.min(wait.idleMs, Math.max(wait.busyMs, Math.ceil(resumeIn)));
}

/** The wait of a group's next fetch: the shortest any member registered under its id asks for. */
export function groupWait(group: Group): number {
  const base = group[BASE] ?? 5000;
  const waits = registry.get(group.groupId);
  if (!waits || waits.size === 0) return base;
  const paused = group.subscriptionState.paused().length > 0;
  let ms = Number.POSITIVE_INFINITY;
  for (const w of waits) ms = Math.min(ms, waitOf(w, paused));
  return ms;
}

/** The bytes a group's next fetch waits for: the fewest any member asks for, else its configured value. */
export function groupMinBytes(group: Group): number {
  const base = group[BASE_MIN_BYTES] ?? 1;
  const waits = registry.get(group.groupId);
  if (!waits || waits.size === 0) return base;
  let bytes = Number.POSITIVE_INFINITY;
  for (const w of waits) bytes = Math.min(bytes, w.minBytes?.() ?? base);
  return bytes;
}

const ConsumerGroup = kafkajsClass<object>('consumer/consumerGroup.js', ['fetch'], {
  fetch: ['maxWaitTime: this.maxWaitTime', 'minBytes: this.minBytes'],
});

/** Turns a property kafkajs sets in its constructor and reads at each fetch into `decide`, keeping what it set. */
function decidedPerFetch(name: string, base: typeof BASE | typeof BASE_MIN_BYTES, decide: (g: Group) => number): void {
  if (Object.hasOwn(ConsumerGroup.prototype, name))
    throw new KafkajsMismatchError(`kafkajs ConsumerGroup has its own ${name}: core/kafka/fetch-wait.ts needs a look`);
  Object.defineProperty(ConsumerGroup.prototype, name, {
    configurable: true,
    get(this: Group) {
      return decide(this);
    },
    set(this: Group, value: number) {
      this[base] = value;
    },
  });
}
decidedPerFetch('maxWaitTime', BASE, groupWait);
decidedPerFetch('minBytes', BASE_MIN_BYTES, groupMinBytes);
