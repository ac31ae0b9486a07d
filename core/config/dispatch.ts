/**
 * Dispatch settings (a part of the webhooks section of docs/configuration.md): how many deliveries a
 * dispatcher process runs and holds, per endpoint and in all, when an endpoint counts as slow, and
 * the timing of its consumer groups.
 */
import { ConfigError } from '../errors.ts';
import { int } from './readers.ts';
import { intSetting, type Setting, type Values } from './schema.ts';

export const DISPATCH_SETTINGS = {
  /**
   * Webhook deliveries in flight at once in one dispatcher process: the slots of its one
   * DeliveryScheduler (dispatcher/scheduler.ts), which lane endpoints' deliveries take too, as
   * tickets (dispatcher/lane-scheduler.ts); a tenant's share of them is this / (n + 1).
   */
  dispatchConcurrency: intSetting(
    'webhooks',
    'SLUICE_DISPATCH_CONCURRENCY',
    256,
    1,
    10_000,
    'webhook deliveries in flight at once in one dispatcher process; one tenant gets at most this / ' +
      '(n + 1), n being the tenants with deliveries in the process',
  ),
  /** Deliveries in flight at once to one endpoint (also the keep-alive connections per origin and tenant). */
  dispatchPerEndpoint: intSetting(
    'webhooks',
    'SLUICE_DISPATCH_PER_ENDPOINT',
    8,
    1,
    1000,
    'deliveries in flight at once to one fast endpoint (also keep-alive connections per origin and tenant); a ' +
      "slow attempt halves an endpoint's limit (down to 1), a fast one adds 1 back",
  ),
  /**
   * An attempt slower than this (or timed out) marks its endpoint
   * slow: its queued deliveries go back through the first rung.
   */
  dispatchSlowMs: intSetting(
    'webhooks',
    'SLUICE_DISPATCH_SLOW_MS',
    2000,
    50,
    10_000,
    'an attempt at least this slow (or timed out) marks its endpoint slow: it keeps its in-flight ' +
      'attempts and its queued deliveries go back through the first rung (not counted as attempts) ' +
      'until an attempt is fast again',
  ),
  /**
   * Deliveries the process's one DeliveryScheduler holds in memory, queued or in flight (lane tickets
   * included): full of one tenant's, the delivery consumers pause the partitions that feed it; with
   * other tenants in it, a tenant over its share is diverted to the first rung. The lane endpoints'
   * deliveries wait beside it in a second buffer of this size (dispatcher/lane-scheduler.ts), shared
   * out by tenant: a record over a tenant's share stays in Kafka.
   */
  dispatchBuffer: intSetting(
    'webhooks',
    'SLUICE_DISPATCH_BUFFER',
    20_000,
    100,
    1_000_000,
    'deliveries one dispatcher process holds in memory (per-endpoint queues, served round-robin); ' +
      "when full of one tenant's deliveries it pauses the partitions that feed it until half is free " +
      '(backpressure); with other tenants in it, a tenant over its share (buffer / n) has its new ' +
      'deliveries sent through the 30 s rung instead, not counted as attempts; lane endpoints (limits, ' +
      "order) hold their deliveries in a buffer of the same size shared out by tenant: a tenant's " +
      'records over its share (or over buffer / 64 that only wait for a paused ordered endpoint) wait ' +
      'in Kafka and are read again once it has room',
  ),
  /** How long a dispatcher that stopped heartbeating keeps its partitions before the group moves them. */
  dispatchSessionTimeoutMs: intSetting(
    'webhooks',
    'SLUICE_DISPATCH_SESSION_TIMEOUT_MS',
    30_000,
    6000,
    300_000,
    "the dispatchers' consumer-group session timeout: a dispatcher that died without leaving (SIGKILL, " +
      'a lost machine) keeps its partitions this long before the others take them over, so its deliveries ' +
      'wait as long. Lower fails over faster; too low, and a dispatcher stalled by a long pause is ' +
      'evicted and its partitions moved. Heartbeats go at a tenth of it',
  ),
  /** How long an idle dispatcher group's (and the leader lease's) fetch waits for a record. */
  /** How often (before SLUICE_TIME_SCALE) a delivery held for a PENDING endpoint is re-checked. */
  dispatchHoldRecheckMs: intSetting(
    'webhooks',
    'SLUICE_DISPATCH_HOLD_RECHECK_MS',
    15 * 60_000,
    1000,
    24 * 3600_000,
    'how often (before `SLUICE_TIME_SCALE`) a delivery held for a `PENDING` endpoint is re-checked; ' +
      'a change of the endpoint wakes it at once',
  ),
} satisfies Record<string, Setting>;

/** A dispatcher group's fetch wait when nothing is expected, unless the session timeout is short. */
export const DEFAULT_IDLE_FETCH_WAIT_MS = 3000;

/** The dispatch settings that depend on others. */
export const DISPATCH_DERIVED_SETTINGS = {
  idleFetchWaitMs: {
    section: 'webhooks',
    vars: [
      {
        env: 'SLUICE_IDLE_FETCH_WAIT_MS',
        default: '`3000` (a third of `SLUICE_DISPATCH_SESSION_TIMEOUT_MS` when that is less than 9 s)',
        doc:
          "how long a fetch of the dispatchers' consumer groups (and of the rotation leader's lease) waits " +
          'when nothing is expected: a record ends the wait at once, so this sets what an idle dispatcher ' +
          'costs, not how fast a delivery starts. While a partition is paused for backpressure or a re-read ' +
          'is pending, fetches wait 50-100 ms; while retries wait on their rung, until the next is due. It ' +
          "bounds how late a resumed endpoint's held deliveries start and how soon an idle member notices a " +
          'rebalance; at most a third of `SLUICE_DISPATCH_SESSION_TIMEOUT_MS` (heartbeats go between fetches)',
      },
    ],
    // Each fetch of an idle group is a request and an answer on every node and on the broker.
    read: (env, base) =>
      int(
        env,
        'SLUICE_IDLE_FETCH_WAIT_MS',
        Math.min(DEFAULT_IDLE_FETCH_WAIT_MS, Math.floor(base.dispatchSessionTimeoutMs / 3)),
        50,
        10_000,
      ),
  },
} satisfies Record<string, Setting<Pick<Values<typeof DISPATCH_SETTINGS>, 'dispatchSessionTimeoutMs'>>>;

/** The idle fetch wait fits three times in the session timeout, checked once every setting is read. */
export function checkIdleFetchWait(config: { idleFetchWaitMs: number; dispatchSessionTimeoutMs: number }): void {
  if (config.idleFetchWaitMs * 3 > config.dispatchSessionTimeoutMs)
    throw new ConfigError(
      'SLUICE_IDLE_FETCH_WAIT_MS',
      `must be at most a third of SLUICE_DISPATCH_SESSION_TIMEOUT_MS (${config.dispatchSessionTimeoutMs}): ` +
        `heartbeats go between fetches; got ${config.idleFetchWaitMs}`,
    );
}
