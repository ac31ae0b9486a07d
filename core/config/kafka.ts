/**
 * Kafka settings: the brokers (or the embedded local Kafka), the client id, the topics' prefix and
 * partitions, how long a node may go without hearing from Kafka, its rack, and the state views'
 * fetch wait.
 */
import { ConfigError } from '../errors.ts';
import { int, kafkaRack } from './readers.ts';
import { intSetting, type Setting, textSetting, type Values } from './schema.ts';

/** SLUICE_STATE_FETCH_WAIT_MS's default (less when SLUICE_KAFKA_STALE_MS is under three times as long). */
export const DEFAULT_STATE_FETCH_WAIT_MS = 3000;

export const KAFKA_SETTINGS = {
  /** null: start the embedded local Kafka. */
  kafkaBrokers: {
    section: 'kafka',
    vars: [
      {
        env: 'KAFKA_BROKERS',
        default: 'unset',
        doc:
          'comma-separated `host:port`. Unset: `sluice start` runs the embedded local Kafka; every other ' +
          'command needs it',
      },
    ],
    read(env): string[] | null {
      const brokers = env.KAFKA_BROKERS?.trim();
      if (!brokers) return null;
      const list = brokers
        .split(',')
        .map((b) => b.trim())
        .filter(Boolean);
      for (const b of list) {
        if (!/^[A-Za-z0-9.\-_[\]:]+:\d{1,5}$/.test(b))
          throw new ConfigError('KAFKA_BROKERS', `"${b}" is not host:port`);
      }
      return list;
    },
  },
  kafkaPort: intSetting(
    'kafka',
    'SLUICE_KAFKA_PORT',
    9092,
    1,
    65535,
    'port of the embedded local Kafka (controller on port+1)',
  ),
  kafkaClientId: textSetting('kafka', 'SLUICE_KAFKA_CLIENT_ID', 'sluice', 'Kafka client id'),
  topicPrefix: {
    section: 'kafka',
    vars: [{ env: 'SLUICE_TOPIC_PREFIX', default: '`sluice`', doc: 'prefix of every topic (`sluice.clients`, …)' }],
    read(env) {
      const prefix = env.SLUICE_TOPIC_PREFIX || 'sluice';
      if (!/^[A-Za-z0-9._-]{1,100}$/.test(prefix))
        throw new ConfigError('SLUICE_TOPIC_PREFIX', 'must be letters, digits, ".", "_" or "-"');
      return prefix;
    },
  },
  topicPartitions: intSetting(
    'kafka',
    'SLUICE_TOPIC_PARTITIONS',
    6,
    1,
    1024,
    'partitions of the delivery, event and retry topics when Sluice creates them',
  ),
  /** Fail closed when the state consumer has not heard from Kafka for this long. */
  kafkaStaleMs: intSetting(
    'kafka',
    'SLUICE_KAFKA_STALE_MS',
    10_000,
    100,
    600_000,
    'a node that has not heard from Kafka for this long refuses tokens (503)',
  ),
  /**
   * This process's rack (Kafka's `client.rack`), or null: with one, consumers fetch from the replica
   * in that rack (brokers with `replica.selector.class` RackAwareReplicaSelector) and the state views
   * prove their freshness by a heartbeat written through the cluster (docs/operations.md, "Regions").
   */
  kafkaRack: {
    section: 'kafka',
    vars: [
      {
        env: 'SLUICE_KAFKA_RACK',
        default: 'unset',
        doc:
          "this process's region (Kafka's `client.rack`, matching a `broker.rack`): its state views read " +
          'the replica in that rack (brokers with ' +
          '`replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector`; the event ' +
          'path still reads leaders), and contact with Kafka is proven by a heartbeat it writes to the ' +
          'revocations topic (acks=all) and reads back, since a local replica keeps answering when its ' +
          'region is cut off (`docs/operations.md`, "Regions")',
      },
    ],
    read: kafkaRack,
  },
} satisfies Record<string, Setting>;

/** The Kafka settings that depend on others. */
export const KAFKA_DERIVED_SETTINGS = {
  /** The state consumer's fetch wait (a fetch still returns as soon as a record arrives). */
  stateFetchWaitMs: {
    section: 'kafka',
    vars: [
      {
        env: 'SLUICE_STATE_FETCH_WAIT_MS',
        default: '`3000` (a third of `SLUICE_KAFKA_STALE_MS` when that is less than 9 s)',
        doc:
          'how long a state-view fetch waits when there is nothing new; a record ends the wait at once, so ' +
          "it sets an idle node's CPU, not how fast a revocation spreads; at most half of " +
          '`SLUICE_KAFKA_STALE_MS` (`docs/operations.md`, "Cost of fast revocation")',
      },
    ],
    // A fetch answers as soon as a record arrives: the wait only sets how often an idle node asks.
    // By default an idle node hears from Kafka at least three times within the staleness bound.
    read: (env, base) =>
      int(
        env,
        'SLUICE_STATE_FETCH_WAIT_MS',
        Math.min(DEFAULT_STATE_FETCH_WAIT_MS, Math.floor(base.kafkaStaleMs / 3)),
        1,
        10_000,
      ),
  },
} satisfies Record<string, Setting<Pick<Values<typeof KAFKA_SETTINGS>, 'kafkaStaleMs'>>>;

/** The state fetch wait fits twice in the staleness bound, checked once every setting is read. */
export function checkStateFetchWait(config: { stateFetchWaitMs: number; kafkaStaleMs: number }): void {
  if (config.stateFetchWaitMs * 2 > config.kafkaStaleMs)
    throw new ConfigError(
      'SLUICE_STATE_FETCH_WAIT_MS',
      `must be at most half of SLUICE_KAFKA_STALE_MS (${config.kafkaStaleMs}), ` +
        `or an idle node would fail closed between two fetches; got ${config.stateFetchWaitMs}`,
    );
}
