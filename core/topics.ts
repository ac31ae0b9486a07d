/**
 * Every topic Sluice uses, its name and its settings, in one place: openContext creates them all
 * with one ensureTopics call (created when missing; an existing topic's settings are raised, never weakened).
 * docs/architecture.md describes each topic.
 */
import { retryLadder } from './webhooks/retry-policy.ts';

export interface TopicSpec {
  name: string;
  partitions: number;
  config: Record<string, string>;
}

const DAY_MS = 24 * 3600 * 1000;

/** The rung that holds deliveries of PENDING endpoints until they are verified (not a retry delay). */
const HOLD_LABEL = 'hold';

export interface TopicNames {
  clients: string;
  endpoints: string;
  revocations: string;
  keys: string;
  audit: string;
  events: string;
  deliveries: string;
  /** Deliveries of lane endpoints (rate, in-flight or order limits), key = endpoint id: one owner each. */
  lanes: string;
  dlq: string;
  /** What each delivery attempt did (status, latency), for the tenant's attempt history and rates. */
  attempts: string;
  /** How many events of each type each tenant published, counted by the fan-out (GET /v1/webhooks/event-types). */
  eventTypes: string;
  /** Recovery jobs (POST /v1/webhooks/endpoints/{id}/recover), key = job id, compacted: any node answers them. */
  recoveries: string;
  retry(delayLabel: string): string;
  /** The hold rung (`retry.hold`). */
  hold: string;
  /** Every rung the dispatcher reads: the retry rungs of the policy (webhooks/retry-policy.ts), then the hold rung. */
  rungs: readonly string[];
  /** Internal compacted state for leases, idempotency keys and the like. */
  control: string;
}

export function topicNames(prefix: string): TopicNames {
  return {
    clients: `${prefix}.clients`,
    endpoints: `${prefix}.endpoints`,
    revocations: `${prefix}.revocations`,
    keys: `${prefix}.keys`,
    audit: `${prefix}.audit`,
    events: `${prefix}.events`,
    deliveries: `${prefix}.deliveries`,
    lanes: `${prefix}.lanes`,
    dlq: `${prefix}.dlq`,
    attempts: `${prefix}.attempts`,
    eventTypes: `${prefix}.event-types`,
    recoveries: `${prefix}.recoveries`,
    retry: (label) => `${prefix}.retry.${label}`,
    hold: `${prefix}.retry.${HOLD_LABEL}`,
    rungs: [...retryLadder.rungLabels, HOLD_LABEL].map((label) => `${prefix}.retry.${label}`),
    control: `${prefix}.control`,
  };
}

const compacted = { 'cleanup.policy': 'compact', 'min.compaction.lag.ms': '0', 'segment.ms': String(DAY_MS) };

/**
 * `partitions` is for the busy topics (events, deliveries, rungs); the DLQ keeps the spec's 7 days
 * divided by `timeScale` (SLUICE_TIME_SCALE), everything else keeps real time.
 */
export function topicSpecs(prefix: string, partitions: number, timeScale = 1): TopicSpec[] {
  const t = topicNames(prefix);
  const dlqRetentionMs = retryLadder.dlqRetentionMs / timeScale;
  const deleted = (retentionMs: number) => ({ 'cleanup.policy': 'delete', 'retention.ms': String(retentionMs) });
  return [
    { name: t.clients, partitions: 1, config: compacted },
    { name: t.endpoints, partitions: 1, config: compacted },
    { name: t.revocations, partitions: 1, config: compacted },
    { name: t.keys, partitions: 1, config: compacted },
    { name: t.control, partitions: 1, config: compacted },
    // Recovery jobs, one record per job (rewritten as it progresses): read whole by every node.
    { name: t.recoveries, partitions: 1, config: compacted },
    // The compliance log: never deleted, never compacted.
    {
      name: t.audit,
      partitions: 1,
      config: { 'cleanup.policy': 'delete', 'retention.ms': '-1', 'retention.bytes': '-1' },
    },
    { name: t.events, partitions, config: deleted(7 * DAY_MS) },
    { name: t.deliveries, partitions, config: deleted(7 * DAY_MS) },
    { name: t.lanes, partitions, config: deleted(7 * DAY_MS) },
    // The retry rungs and the hold rung.
    ...t.rungs.map((name) => ({ name, partitions, config: deleted(7 * DAY_MS) })),
    { name: t.dlq, partitions: 1, config: deleted(Math.max(60_000, Math.round(dlqRetentionMs))) },
    // Read whole by every ingress node's attempt history
    // (core/webhooks/attempt-history.ts), which keeps 7 days at most.
    { name: t.attempts, partitions: 1, config: deleted(7 * DAY_MS) },
    // Read whole by every ingress node's event type counts (core/webhooks/event-type-counts.ts),
    // which count the last 7 days.
    { name: t.eventTypes, partitions: 1, config: deleted(7 * DAY_MS) },
  ];
}
