/**
 * Topic administration: creating Sluice's topics and raising (never lowering) the settings of
 * existing ones, and reading end offsets, each retried through a broker's start-up errors.
 */
import type { Admin, Kafka } from 'kafkajs';
import type { TopicSpec } from '../topics.ts';
import { SluiceBaseError, SluiceError, unavailable } from '../errors.ts';
import { doubling, retry } from '../retry.ts';
import { isTopicAlreadyExists, isTransientKafkaError } from './client.ts';

/**
 * Retries an admin operation through the transient errors of a broker that has just started or
 * is electing leaders ("coordinator is loading", "not the leader for that topic-partition"), for
 * up to `timeoutMs`. A failure it gives up on is thrown as UNAVAILABLE naming what was tried; one
 * of Sluice's own (a topic's settings refused) is thrown as it is.
 */
export async function retryAdmin<T>(what: string, fn: () => Promise<T>, timeoutMs = 60_000): Promise<T> {
  try {
    return await retry(fn, { timeoutMs, backoff: doubling(100, 2000), isRetriable: isTransientKafkaError });
  } catch (err) {
    if (err instanceof SluiceBaseError && !err.retriable) throw err;
    const detail = `${what}: ${(err as Error).message ?? String(err)}`;
    throw new SluiceError('UNAVAILABLE', detail, {}, { retriable: isTransientKafkaError(err), cause: err });
  }
}

/** The existing retention values that are longer than desired (kept when other settings are written). */
function keepLonger(current: Record<string, string>, desired: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of RETENTION_KEYS)
    if (current[key] !== undefined && desired[key] !== undefined && longer(current[key], desired[key]))
      out[key] = current[key];
  return out;
}

/** A topic's existing settings that a start would weaken; thrown instead of changing them. */
export class TopicSettingsError extends SluiceBaseError<'TOPIC_SETTINGS_REFUSED'> {
  constructor(message: string) {
    super('TOPIC_SETTINGS_REFUSED', message);
  }
}

const RETENTION_KEYS = ['retention.ms', 'retention.bytes'] as const;
const longer = (a: string, b: string) => (a === '-1' ? b !== '-1' : b !== '-1' && Number(a) > Number(b));

/**
 * What to change on an existing topic so it has at least Sluice's settings, never less: a longer
 * retention is raised to, a longer one kept; a different cleanup policy is refused (changing it
 * would delete or compact data someone relies on). `strict` (a scaled-time start) refuses to run
 * against a topic that keeps data longer than it expects instead of silently keeping it.
 */
export function reconcileTopicConfig(
  topic: string,
  existing: Record<string, string>,
  desired: Record<string, string>,
  strict: boolean,
): Record<string, string> {
  const alter: Record<string, string> = {};
  const want = desired['cleanup.policy'];
  if (want && existing['cleanup.policy'] && existing['cleanup.policy'] !== want) {
    throw new TopicSettingsError(
      `topic ${topic} has cleanup.policy=${existing['cleanup.policy']}, Sluice needs ${want}; ` +
        "Sluice does not change it: fix it with Kafka's tools or use another SLUICE_TOPIC_PREFIX",
    );
  }
  for (const key of RETENTION_KEYS) {
    const d = desired[key];
    const e = existing[key];
    if (d === undefined) continue;
    if (e === undefined || longer(d, e)) alter[key] = d;
    else if (longer(e, d) && strict) {
      throw new TopicSettingsError(
        `topic ${topic} keeps data longer (${key}=${e}) than this scaled-time start expects (${d}): ` +
          "it looks like a real deployment's topic. " +
          'Sluice never shortens it; start with SLUICE_TIME_SCALE=1 or use another SLUICE_TOPIC_PREFIX',
      );
    }
  }
  return alter;
}

/**
 * Creates missing topics with Sluice's settings and checks existing ones: retention is raised to
 * Sluice's when shorter, never lowered, and cleanup is never changed (reconcileTopicConfig).
 * `strict`: refuse topics that keep data longer than asked (a scaled-time start). Safe on every start.
 */
export async function ensureTopics(kafka: Kafka, specs: TopicSpec[], opts: { strict?: boolean } = {}): Promise<void> {
  await retryAdmin('creating topics', () => ensureTopicsOnce(kafka, specs, opts.strict ?? false));
}

async function ensureTopicsOnce(kafka: Kafka, specs: TopicSpec[], strict: boolean): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const missing = specs.filter((s) => !existing.has(s.name));
    if (missing.length > 0) {
      try {
        await admin.createTopics({
          waitForLeaders: true,
          topics: missing.map((s) => ({
            topic: s.name,
            numPartitions: s.partitions,
            replicationFactor: -1,
            configEntries: Object.entries(s.config).map(([name, value]) => ({ name, value })),
          })),
        });
      } catch (err) {
        // Another node may have created them at the same moment.
        if (!isTopicAlreadyExists(err)) throw err;
      }
    }
    const present = specs.filter((s) => existing.has(s.name));
    if (present.length > 0) {
      const described = await admin.describeConfigs({
        includeSynonyms: false,
        resources: present.map((s) => ({
          type: 2 /* ConfigResourceTypes.TOPIC */,
          name: s.name,
          configNames: ['cleanup.policy', ...RETENTION_KEYS],
        })),
      });
      const changes: { type: number; name: string; configEntries: { name: string; value: string }[] }[] = [];
      for (const s of present) {
        const res = described.resources.find((r) => r.resourceName === s.name);
        const current = Object.fromEntries((res?.configEntries ?? []).map((c) => [c.configName, c.configValue]));
        const alter = reconcileTopicConfig(s.name, current, s.config, strict);
        // alterConfigs replaces a topic's whole set of overrides: send the current ones with the change.
        if (Object.keys(alter).length > 0)
          changes.push({
            type: 2,
            name: s.name,
            configEntries: Object.entries({ ...current, ...s.config, ...alter, ...keepLonger(current, s.config) }).map(
              ([name, value]) => ({ name, value }),
            ),
          });
      }
      if (changes.length > 0) await admin.alterConfigs({ validateOnly: false, resources: changes });
    }
    // Leaders elected for every partition before anyone produces or consumes.
    const meta = await admin.fetchTopicMetadata({ topics: specs.map((s) => s.name) });
    const leaderless = meta.topics.filter((t) => t.partitions.some((p) => p.leader < 0)).map((t) => t.name);
    if (leaderless.length > 0) throw unavailable(`no leader yet for ${leaderless.join(', ')}`);
  } finally {
    await admin.disconnect();
  }
}

export function endOffsets(kafka: Kafka, topics: string[]): Promise<Map<string, Map<number, bigint>>> {
  return retryAdmin('reading end offsets', () => endOffsetsOnce(kafka, topics));
}

async function endOffsetsOnce(kafka: Kafka, topics: string[]): Promise<Map<string, Map<number, bigint>>> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const out = new Map<string, Map<number, bigint>>();
    for (const topic of topics) {
      const offsets = await admin.fetchTopicOffsets(topic);
      out.set(topic, new Map(offsets.map((o) => [o.partition, BigInt(o.high)])));
    }
    return out;
  } finally {
    await admin.disconnect();
  }
}

/** A group's committed offset of one partition and the metadata committed with it. */
export interface CommittedOffset {
  offset: number;
  metadata: string | null;
}

/**
 * The committed offsets (with their metadata) of `groupId` for the given partitions, keyed
 * `topic\0partition`; a partition with no commit is absent. Asked on `admin`, a connected client
 * the caller keeps (a new connection per call costs round trips that a starved machine pays in
 * seconds, while a partition's new owner waits for the answer).
 */
export async function committedOffsets(
  admin: Admin,
  groupId: string,
  partitions: Record<string, number[]>,
): Promise<Map<string, CommittedOffset>> {
  const topics = Object.keys(partitions);
  const out = new Map<string, CommittedOffset>();
  for (const t of await admin.fetchOffsets({ groupId, topics })) {
    const wanted = new Set(partitions[t.topic] ?? []);
    for (const p of t.partitions) {
      const offset = Number(p.offset);
      if (!wanted.has(p.partition) || offset < 0) continue;
      out.set(`${t.topic}\0${p.partition}`, { offset, metadata: p.metadata ?? null });
    }
  }
  return out;
}
