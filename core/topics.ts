/** Topic names and their settings, in one place (docs/architecture.md describes each topic). */

export interface TopicSpec {
  name: string;
  partitions: number;
  config: Record<string, string>;
}

const DAY_MS = 24 * 3600 * 1000;

export interface TopicNames {
  clients: string;
  endpoints: string;
  revocations: string;
  keys: string;
  audit: string;
  events: string;
  deliveries: string;
  dlq: string;
  /** What each delivery attempt did (status, latency), for the tenant's attempt history and rates. */
  attempts: string;
  retry(delayLabel: string): string;
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
    dlq: `${prefix}.dlq`,
    attempts: `${prefix}.attempts`,
    retry: (label) => `${prefix}.retry.${label}`,
    control: `${prefix}.control`,
  };
}

const compacted = { 'cleanup.policy': 'compact', 'min.compaction.lag.ms': '0', 'segment.ms': String(DAY_MS) };

/**
 * `retryLabels` are the rung names of the retry ladder (e.g. "30s", "4m"); `dlqRetentionMs` is the
 * 7 days a DLQ entry is kept, divided by SLUICE_TIME_SCALE.
 */
export function topicSpecs(prefix: string, partitions: number, retryLabels: readonly string[], dlqRetentionMs: number): TopicSpec[] {
  const t = topicNames(prefix);
  const deleted = (retentionMs: number) => ({ 'cleanup.policy': 'delete', 'retention.ms': String(retentionMs) });
  return [
    { name: t.clients, partitions: 1, config: compacted },
    { name: t.endpoints, partitions: 1, config: compacted },
    { name: t.revocations, partitions: 1, config: compacted },
    { name: t.keys, partitions: 1, config: compacted },
    { name: t.control, partitions: 1, config: compacted },
    // The compliance log: never deleted, never compacted.
    { name: t.audit, partitions: 1, config: { 'cleanup.policy': 'delete', 'retention.ms': '-1', 'retention.bytes': '-1' } },
    { name: t.events, partitions, config: deleted(7 * DAY_MS) },
    { name: t.deliveries, partitions, config: deleted(7 * DAY_MS) },
    ...retryLabels.map((label) => ({ name: t.retry(label), partitions, config: deleted(7 * DAY_MS) })),
    { name: t.dlq, partitions: 1, config: deleted(Math.max(60_000, Math.round(dlqRetentionMs))) },
    // Read whole by every ingress node's attempt history (core/webhooks/attempt-history.ts), which keeps 7 days at most.
    { name: t.attempts, partitions: 1, config: deleted(7 * DAY_MS) },
  ];
}
