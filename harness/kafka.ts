/** The broker a bench runs against, its topics and its consumer groups. */
import { createKafka } from '../core/kafka/client.ts';
import { freePorts } from '../core/net/free-port.ts';
import { type Children, type Launched, waitForLine } from './children.ts';
import { childPid, listenerPid } from './proc-cpu.ts';
import type { Scratch } from './scratch.ts';

/** The broker a bench runs against: KAFKA_BROKERS when set, else a `sluice kafka` it starts. */
export interface BenchKafka {
  brokers: string[];
  /** True for KAFKA_BROKERS (the bench drops its topics at the end). */
  external: boolean;
  /** The started `sluice kafka`, or null for an external broker. */
  launched: Launched | null;
}

/** KAFKA_BROKERS, or a fresh single broker in the scratch directory (`sluice kafka`, stage 'kafka'). */
export async function benchKafka(
  children: Children,
  scratch: Scratch,
  sluice: string,
  say: (line: string) => void,
): Promise<BenchKafka> {
  if (process.env.KAFKA_BROKERS)
    return { brokers: process.env.KAFKA_BROKERS.split(','), external: true, launched: null };
  const port = await freePorts(2); // the broker's port and its controller's, port + 1
  say(`starting Kafka on 127.0.0.1:${port} (sluice kafka)...`);
  const launched = children.spawn(
    'kafka',
    sluice,
    ['kafka', '--port', String(port), '--data-dir', scratch.kafkaDir(), '--fresh'],
    process.env,
    'kafka',
  );
  await waitForLine(launched, /Kafka broker ready/, 240_000, 'sluice kafka');
  return { brokers: [`127.0.0.1:${port}`], external: false, launched };
}

/** A bench's topics and groups on a broker it did not start (a local one goes with its data dir). */
export async function dropBenchTopics(brokers: string[], prefix: string): Promise<void> {
  const admin = createKafka(brokers, 'sluice-bench-cleanup').admin();
  try {
    await admin.connect();
    const topics = (await admin.listTopics()).filter((t) => t.startsWith(`${prefix}.`));
    if (topics.length > 0) await admin.deleteTopics({ topics });
    const groups = (await admin.listGroups()).groups
      .map((g) => g.groupId)
      .filter((g) => g.startsWith(`${prefix}.`) || g.startsWith(`${prefix}-`));
    if (groups.length > 0) await admin.deleteGroups(groups);
  } catch (err) {
    // kafkajs names each group it could not delete: a stopped process's own view groups keep their
    // members until the session times out; those groups go with the broker's offset retention.
    const failed = ((err as { groups?: { error?: unknown }[] }).groups ?? []).filter((g) => g.error).length;
    const what = failed ? `${failed} consumer groups (members' sessions still open)` : `topics ${prefix}.*`;
    process.stderr.write(`note: could not delete the bench's ${what}: ${(err as Error).message}\n`);
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

/**
 * Waits until the dispatcher's consumer groups of `prefix` (`names`, after the prefix; by default
 * the fan-out's and the delivery consumers') are Stable with at least `members` members (3 polls
 * in a row, 90 s at most): a process joining later would rebalance them mid-run.
 */
export async function settleGroups(
  brokers: string[],
  prefix: string,
  members: number,
  names: string[] = ['fan-out', 'dispatch', 'dispatch-rungs'],
): Promise<boolean> {
  const admin = createKafka(brokers, 'sluice-bench-groups').admin();
  await admin.connect();
  try {
    const ids = names.map((g) => `${prefix}.${g}`);
    for (let stablePolls = 0, deadline = Date.now() + 90_000; Date.now() < deadline; await sleep(500)) {
      const { groups } = await admin.describeGroups(ids);
      stablePolls = groups.every((g) => g.state === 'Stable' && g.members.length >= members) ? stablePolls + 1 : 0;
      if (stablePolls >= 3) return true;
    }
    return false;
  } finally {
    await admin.disconnect();
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The broker's java process, when it runs on this machine (started by the bench, or found by its port). */
export function kafkaPid(kafka: { brokers: string[]; launched: Pick<Launched, 'proc'> | null }): number | null {
  const launcher = kafka.launched?.proc.pid;
  if (launcher) return childPid(launcher, 'java');
  const [host, port] = kafka.brokers[0].split(':');
  return /^(127\.0\.0\.1|localhost)$/.test(host) ? listenerPid(Number(port)) : null;
}
