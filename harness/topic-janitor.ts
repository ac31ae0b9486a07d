/**
 * The topics of test processes that have ended, deleted from the broker a test run shares.
 *
 * A test names its topics with `ownedPrefix` (test/helpers/sluice.ts `uniquePrefix`): the prefix
 * carries the pid of the process that made it. Left in place, a run's topics pile up on its broker
 * (~2,700 partitions on each lane's broker by the end of a full run), and a Kafka broker's work
 * grows with the partitions it holds, not only with its requests: each topic created with configs
 * scans every log it holds (LogManager.logsByTopic, 42 % of a broker's samples late in a run), and
 * its scheduler (high-watermark checkpoints, retention) and metrics ticker walk them all.
 */
import { randomBytes } from 'node:crypto';
import { createKafka } from '../core/kafka/client.ts';

/** `<name>-<pid>-<8 hex>`, then `.` or the end: a prefix `ownedPrefix` made, and its owner. */
const OWNED = /^[^.]*?-(\d+)-[0-9a-f]{8}(?=\.|$)/;

/** A topic prefix (or group id) owned by this process: deleted once the process has ended. */
export function ownedPrefix(name: string, pid = process.pid): string {
  return `${name}-${pid}-${randomBytes(4).toString('hex')}`;
}

/** The pid in a name made by `ownedPrefix` (the topic's prefix), or null. */
export function ownerOf(topic: string): number | null {
  const m = OWNED.exec(topic);
  return m ? Number(m[1]) : null;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export interface TopicJanitor {
  /**
   * Stops, after one more sweep when `sweep` (a broker that outlives the run); resolves to the
   * topics deleted over its life.
   */
  stop(opts: { sweep: boolean }): Promise<number>;
}

/**
 * Every `everyMs`, deletes the topics on `brokers` whose owner process is gone. A sweep that fails
 * (a broker restarting) is tried again at the next; `log` hears of the first failure.
 */
export function startTopicJanitor(
  brokers: string[],
  opts: { everyMs?: number; log?: (line: string) => void } = {},
): TopicJanitor {
  const admin = createKafka(brokers, 'sluice-test-janitor').admin();
  let deleted = 0;
  let warned = false;
  /** The sweep under way: a tick that finds one skips its turn. */
  let busy: Promise<void> | null = null;

  const sweep = async (): Promise<void> => {
    try {
      await admin.connect();
      const gone = (await admin.listTopics()).filter((t) => {
        const pid = ownerOf(t);
        return pid !== null && !alive(pid);
      });
      // One request per few hundred topics: the broker answers each within its timeout.
      for (let i = 0; i < gone.length; i += 200) {
        const topics = gone.slice(i, i + 200);
        await admin.deleteTopics({ topics, timeout: 30_000 });
        deleted += topics.length;
      }
    } catch (err) {
      if (!warned) opts.log?.(`topic janitor: a sweep failed (${(err as Error).message}); trying again`);
      warned = true;
    }
  };
  const timer = setInterval(() => {
    busy ??= sweep().finally(() => (busy = null));
  }, opts.everyMs ?? 10_000);
  timer.unref();
  return {
    async stop({ sweep: last }) {
      clearInterval(timer);
      await busy;
      if (last) await sweep();
      await admin.disconnect().catch(() => {});
      return deleted;
    },
  };
}
