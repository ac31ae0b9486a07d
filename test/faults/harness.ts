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
import { freePorts } from '../../scripts/free-port.ts';
import { call, startTestNode, type TestNode } from '../helpers/sluice.ts';
import { receiver } from '../dispatcher/receiver.ts';

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
      await k.stop();
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
      ...env,
    },
    { dispatcher: true, brokers: kafka.brokers },
  );
  const r = await receiver(200);
  t.teardown(async () => {
    await Promise.race([node.close(), new Promise((res) => setTimeout(res, 15_000))]);
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
    unexpected: new Map(),
    requests: 0,
  };
  const refuse = (count: number) => {
    stats.refused += count;
    stats.firstRefusedAt ||= Date.now();
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
      if (res.status === 202) {
        for (const r of res.json.results) {
          if (r.id) stats.accepted.add(r.id);
          else if (r.error?.status === 503) refuse(1);
          else stats.unexpected.set(r.error?.status ?? -1, (stats.unexpected.get(r.error?.status ?? -1) ?? 0) + 1);
        }
      } else if (res.status === 503) refuse(events.length);
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

/** Where the lost ids are: on the events topic? as deliveries? (printed when a fault test loses any). */
export async function whereAre(kafka: import('kafkajs').Kafka, prefix: string, ids: string[]): Promise<string> {
  const want = new Set(ids);
  const found: Record<string, string[]> = {};
  for (const topic of [`${prefix}.events`, `${prefix}.deliveries`]) {
    const c = kafka.consumer({ groupId: `diag-${Date.now()}-${Math.random()}` });
    await c.connect();
    await c.subscribe({ topics: [topic], fromBeginning: true });
    let last = Date.now();
    await c.run({
      eachMessage: async ({ message, partition }) => {
        last = Date.now();
        const v = message.value?.toString() ?? '';
        for (const id of want)
          if (v.includes(`"${id}"`)) {
            found[id] ??= [];
            found[id].push(`${topic.split('.').pop()}[${partition}@${message.offset}]`);
          }
      },
    });
    while (Date.now() - last < 3000) await new Promise((r) => setTimeout(r, 500));
    await c.disconnect();
  }
  return ids.map((id) => `${id}: ${(found[id] ?? ['nowhere']).join(' ')}`).join('; ');
}
