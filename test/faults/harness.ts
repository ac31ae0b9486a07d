/**
 * What the fault tests share: a Kafka cluster of their own (stopping it harms no other test), a
 * Sluice node on it, receivers that count unique event ids, and a publisher that sends batches at
 * a steady rate and records exactly which events Kafka acknowledged (202 per item) and which were
 * refused (503), so "nothing lost" is checked against what was accepted.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../core/config.ts';
import { startLocalKafka, type LocalKafka } from '../../core/kafka/local-broker.ts';
import { freePorts } from '../../core/net/free-port.ts';
import { call, startTestNode, type TestNode } from '../helpers/sluice.ts';
import { receiver } from '../dispatcher/receiver.ts';
import type { Admin } from '../../core/kafka/client.ts';
import { orNullAfter } from '../../core/deadline.ts';

export async function ownKafka(nodes = 1): Promise<LocalKafka & { cleanup(): Promise<void> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'sluice-fault-kafka-'));
  const k = await startLocalKafka({
    cacheDir: loadConfig({}).cacheDir,
    port: await freePorts(2 * nodes),
    nodes,
    dataDir,
    fresh: true,
    heapMb: 384,
  });
  return {
    ...k,
    async cleanup() {
      // Its data is removed next: a cluster stopping all at once waits out its controlled shutdowns.
      await k.stop('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * A fault test's world: its own Kafka of `brokers` brokers, a Sluice node (ingress + dispatcher)
 * on it, and a receiver answering 200. Torn down with the test; the process then exits, since
 * kafkajs may keep retry timers for the brokers it lost.
 */
export async function faultWorld(
  t: { teardown(fn: () => Promise<void>): void },
  brokers: number,
  env: Record<string, string> = {},
) {
  const kafka = await ownKafka(brokers);
  const node = await startTestNode(
    {
      SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
      SLUICE_TIME_SCALE: '600',
      SLUICE_LOG_LEVEL: process.env.FAULT_LOG ?? 'error',
      // To measure the faults under another fetch wait than the default.
      ...(process.env.SLUICE_STATE_FETCH_WAIT_MS
        ? { SLUICE_STATE_FETCH_WAIT_MS: process.env.SLUICE_STATE_FETCH_WAIT_MS }
        : {}),
      ...env,
    },
    { dispatcher: true, brokers: kafka.brokers },
  );
  const r = await receiver(200);
  t.teardown(async () => {
    await orNullAfter(node.close(), 15_000);
    await r.close();
    await kafka.cleanup();
    setTimeout(() => process.exit(), 1000).unref();
  });
  return { kafka, node, r };
}

export interface PublishStats {
  accepted: Set<string>;
  refused: number;
  /** When the first 503 came back (epoch ms), or 0. */
  firstRefusedAt: number;
  /** The 503s' details (problem+json `detail`), by detail with digits masked: what the refusals said. */
  reasons: Map<string, number>;
  /** Requests that took longer than 1 s: when they were sent (epoch ms), how long, their status. */
  slow: { at: number; ms: number; status: number }[];
  /** Statuses other than 202 and 503, by status: must stay empty. */
  unexpected: Map<number, number>;
  requests: number;
}

/** Publishes `perBatch` events every `everyMs` until stopped; ids are `${tag}-${n}`. */
export function publisher(
  node: TestNode,
  token: () => string,
  tag: string,
  opts: { perBatch?: number; everyMs?: number } = {},
) {
  const stats: PublishStats = {
    accepted: new Set(),
    refused: 0,
    firstRefusedAt: 0,
    reasons: new Map(),
    slow: [],
    unexpected: new Map(),
    requests: 0,
  };
  const refuse = (count: number, detail: unknown) => {
    stats.refused += count;
    stats.firstRefusedAt ||= Date.now();
    const reason = String(detail ?? '(none)').replace(/\d+/g, 'N');
    stats.reasons.set(reason, (stats.reasons.get(reason) ?? 0) + count);
  };
  let n = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const events = Array.from({ length: opts.perBatch ?? 20 }, () => ({
        type: 'inference.completed',
        id: `${tag}-${n++}`,
        data: { at: Date.now() },
      }));
      const started = Date.now();
      stats.requests++;
      const res = await call(node.base, 'POST', '/v1/webhooks/events/batch', {
        token: token(),
        body: { events },
      }).catch(() => ({ status: 0, json: undefined }));
      if (Date.now() - started > 1000) stats.slow.push({ at: started, ms: Date.now() - started, status: res.status });
      if (res.status === 202) {
        for (const r of res.json.results) {
          if (r.id) stats.accepted.add(r.id);
          else if (r.error?.status === 503) refuse(1, r.error.detail);
          else stats.unexpected.set(r.error?.status ?? -1, (stats.unexpected.get(r.error?.status ?? -1) ?? 0) + 1);
        }
      } else if (res.status === 503) refuse(events.length, res.json?.detail);
      else stats.unexpected.set(res.status, (stats.unexpected.get(res.status) ?? 0) + 1);
      await new Promise((r) => setTimeout(r, Math.max(0, (opts.everyMs ?? 20) - (Date.now() - started))));
    }
  })();
  return {
    stats,
    async stop() {
      running = false;
      await loop;
    },
  };
}

/** Waits until every accepted id was received (or the time runs out); returns the ids missing. */
export async function missing(
  accepted: Set<string>,
  received: () => Set<string>,
  timeoutMs: number,
): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = received();
    const lost = [...accepted].filter((id) => !got.has(id));
    if (lost.length === 0 || Date.now() > deadline) return lost;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Where the lost ids are (printed when a fault test loses any): on the events topic, as
 * deliveries, on a retry rung, held, or dead-lettered. Every topic of the prefix is read to the
 * end offsets it had when the search began, so a slow group join cannot cut the search short.
 */
export async function whereAre(kafka: import('kafkajs').Kafka, prefix: string, ids: string[]): Promise<string> {
  const want = new Set(ids);
  const found: Record<string, string[]> = {};
  const admin = kafka.admin();
  await admin.connect();
  const topics = (await admin.listTopics()).filter((name) => name.startsWith(`${prefix}.`));
  const left = new Map<string, bigint>();
  for (const topic of topics)
    for (const o of await admin.fetchTopicOffsets(topic))
      if (BigInt(o.high) > BigInt(o.low)) left.set(`${topic}:${o.partition}`, BigInt(o.high));
  await admin.disconnect();
  const c = kafka.consumer({ groupId: `diag-${Date.now()}-${Math.random()}` });
  await c.connect();
  await c.subscribe({ topics, fromBeginning: true });
  const done = new Promise<void>((resolve) => {
    if (left.size === 0) resolve();
    void c.run({
      // eachBatch: a partition ending in transaction markers (the audit log) is done at its last offset.
      eachBatch: async ({ batch }) => {
        const where = batch.topic.slice(prefix.length + 1);
        for (const message of batch.messages) {
          const v = message.value?.toString() ?? '';
          for (const id of want) {
            if (!v.includes(`"${id}"`)) continue;
            found[id] ??= [];
            found[id].push(`${where}[${batch.partition}@${message.offset}]`);
          }
        }
        const key = `${batch.topic}:${batch.partition}`;
        if (BigInt(batch.lastOffset()) + 1n >= (left.get(key) ?? 0n)) left.delete(key);
        if (left.size === 0) resolve();
      },
    });
  });
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((r) => {
    timer = setTimeout(r, 60_000, true);
  });
  const gaveUp = await Promise.race([done.then(() => false), timeout]);
  clearTimeout(timer);
  await c.disconnect();
  const tail = gaveUp ? ` (search stopped after 60 s, ${left.size} partitions unread)` : '';
  return ids.map((id) => `${id}: ${(found[id] ?? ['nowhere']).join(' ')}`).join('; ') + tail;
}

/** A group id's String.hashCode made positive, as Kafka maps it to a `__consumer_offsets` partition. */
function javaHash(s: string): number {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (Math.imul(31, h) + s.charCodeAt(i)) | 0;
  // Kafka's Utils.abs: Math.abs, except Integer.MIN_VALUE is 0.
  return h === -2147483648 ? 0 : Math.abs(h);
}

/** The broker coordinating the first group whose id starts with `prefix` (its offsets partition's leader). */
export async function groupCoordinator(admin: Admin, prefix: string): Promise<number | undefined> {
  const group = (await admin.listGroups()).groups.map((g) => g.groupId).find((g) => g.startsWith(prefix));
  if (!group) return undefined;
  const [offsets] = (await admin.fetchTopicMetadata({ topics: ['__consumer_offsets'] })).topics;
  const partition = javaHash(group) % offsets.partitions.length;
  return offsets.partitions.find((p) => p.partitionId === partition)?.leader;
}

/**
 * Each consumer group of the prefix, where it stands against the end of its topics: the partitions
 * whose committed offset is behind their end, as `group topic[partition] committed/end` (printed
 * when a test finds deliveries missing: which stage holds them).
 */
export async function groupsBehind(
  kafka: import('kafkajs').Kafka,
  prefix: string,
  opts: { metadata?: boolean } = {},
): Promise<string[]> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const groups = (await admin.listGroups()).groups.map((g) => g.groupId).filter((g) => g.startsWith(`${prefix}.`));
    const topics = (await admin.listTopics()).filter((name) => name.startsWith(`${prefix}.`));
    const ends = new Map<string, string>();
    for (const topic of topics)
      for (const o of await admin.fetchTopicOffsets(topic)) ends.set(`${topic}[${o.partition}]`, o.high);
    const out: string[] = [];
    for (const groupId of groups)
      for (const { topic, partitions } of await admin.fetchOffsets({ groupId, topics }))
        for (const p of partitions) {
          const end = ends.get(`${topic}[${p.partition}]`) ?? '?';
          const committed = p.offset === '-1' ? '0' : p.offset;
          const [g, tp] = [groupId.slice(prefix.length + 1), topic.slice(prefix.length + 1)];
          // With `metadata`, the length of the offset map committed beside it (dispatcher/offset-map.ts).
          const map = opts.metadata ? ` map ${p.metadata?.length ?? 0} chars` : '';
          if (end !== '?' && BigInt(committed) < BigInt(end))
            out.push(`${g} ${tp}[${p.partition}] ${committed}/${end}${map}`);
        }
    return out;
  } finally {
    await admin.disconnect();
  }
}
