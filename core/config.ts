/**
 * Configuration from environment variables (and an optional JSON file named by SLUICE_CONFIG_FILE,
 * whose keys are the same variable names). Parsed and validated once at start-up into a frozen
 * object; a bad value throws a ConfigError naming the variable.
 *
 * One schema (SETTINGS, DERIVED_SETTINGS and CLI_SETTINGS below) is the source of every setting: it
 * reads and checks each, Config is derived from it, and it renders the table of docs/configuration.md.
 */
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { ConfigError } from './errors.ts';
import {
  bool,
  deliveryClientCertificate,
  dirPath,
  type Env,
  int,
  kafkaRack,
  listenerTls,
  num,
  oneOf,
  parseRoles,
  peers,
  readFileEnv,
  trustedProxies,
  url,
} from './config/readers.ts';
import type { DeliveryClientCertificate, ListenerTls } from './config/readers.ts';

export type { DeliveryClientCertificate, ListenerTls };
import { projectPath } from './paths.ts';

/**
 * The client certificate the dispatcher and the pings present to receivers (SLUICE_DELIVERY_CLIENT_CERT
 * and SLUICE_DELIVERY_CLIENT_KEY), read and checked once at start-up.
 */
/** An operator's HTTP CONNECT proxy for everything sent to webhook targets (SLUICE_DELIVERY_PROXY). */
export interface DeliveryProxy {
  host: string;
  port: number;
  /** The `Proxy-Authorization` value (`Basic …`) from the URL's credentials, or null. */
  authorization: string | null;
}

export interface Upstreams {
  inference?: string;
  pipelines?: string;
  telemetry?: string;
}

const DEV_MASTER_KEY = 'sluice-development-master-key-do-not-use-in-production';

/** SLUICE_STATE_FETCH_WAIT_MS's default (less when SLUICE_KAFKA_STALE_MS is under twice as long). */
export const DEFAULT_STATE_FETCH_WAIT_MS = 1000;

/** A variable's row in the table of docs/configuration.md: its default and its meaning, in Markdown. */
export interface Variable {
  env: string;
  default: string;
  doc: string;
}

/**
 * The table in docs/configuration.md lists the variables section by section (in this order), so a
 * setting of DERIVED_SETTINGS sits with its kin.
 */
export const SECTIONS = [
  'kafka',
  'storage',
  'listeners',
  'regions',
  'tokens',
  'limits',
  'upstreams',
  'rotation',
  'webhooks',
  'observability',
  'process',
] as const;
export type Section = (typeof SECTIONS)[number];

/** A setting read from variables, each a row of docs/configuration.md; `read` throws a ConfigError naming one. */
interface Documented<T, Prior = void> {
  section: Section;
  vars: readonly [Variable, ...Variable[]];
  read(env: Env, prior: Prior): T;
}

/** One setting: documented variables, or a value no variable sets. `Prior`: the settings it depends on. */
export type Setting<Prior = void> =
  | Documented<unknown, Prior>
  | { section?: undefined; vars?: undefined; read(env: Env, prior: Prior): unknown };

/** The values a group of settings reads: the type of its part of Config. */
type Values<S> = { [K in keyof S]: S[K] extends { read(...args: never[]): infer T } ? T : never };

const shown = (def: number | boolean | string) => `\`${def}\``;

/** A number from `min` to `max`, read by `reader`: `int` takes whole numbers only, `num` any. */
const rangeSetting =
  (reader: typeof int) =>
  (section: Section, env: string, def: number, min: number, max: number, doc: string): Documented<number> => ({
    section,
    vars: [{ env, default: shown(def), doc }],
    read: (e) => reader(e, env, def, min, max),
  });
const intSetting = rangeSetting(int);
const numSetting = rangeSetting(num);

function boolSetting(section: Section, env: string, def: boolean, doc: string): Documented<boolean> {
  return {
    section,
    vars: [{ env, default: shown(def), doc }],
    read: (e) => bool(e, env, def),
  };
}

/** Any text; unset or empty: `def`. */
function textSetting(section: Section, env: string, def: string, doc: string): Documented<string> {
  return {
    section,
    vars: [{ env, default: shown(def), doc }],
    read: (e) => e[env] || def,
  };
}

/** Settings read from the environment alone (in the docs' order within a section). */
export const SETTINGS = {
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
  cacheDir: {
    section: 'storage',
    vars: [
      {
        env: 'SLUICE_CACHE_DIR',
        default: '`<repo>/.cache`',
        doc: 'Kafka jars (`kafka-4.1.1/libs`) and local Kafka data',
      },
    ],
    read: (env) => env.SLUICE_CACHE_DIR || projectPath('.cache'),
  },
  host: {
    section: 'listeners',
    vars: [
      {
        env: 'SLUICE_HOST',
        default: '`0.0.0.0`; `127.0.0.1` without `SLUICE_MASTER_KEY`',
        doc:
          'listen address of the public listener (not of the admin port). With the public development ' +
          'key (no `SLUICE_MASTER_KEY`) an address other than loopback is refused unless ' +
          '`SLUICE_DEV_ALLOW_DEVELOPMENT_KEY=true`',
      },
    ],
    read: (env) => env.SLUICE_HOST || (env.SLUICE_MASTER_KEY ? '0.0.0.0' : '127.0.0.1'),
  },
  /** Whether the public development master key may serve beyond loopback (a development setup). */
  devAllowDevelopmentKey: boolSetting(
    'tokens',
    'SLUICE_DEV_ALLOW_DEVELOPMENT_KEY',
    false,
    'with no `SLUICE_MASTER_KEY`, Sluice signs and seals with a development key anyone can read in ' +
      'its source: it then refuses a public listener beyond loopback and the peer port ' +
      '(`SLUICE_PEER_PORT`, whose pushes that key would sign) unless this says it is a development ' +
      'setup; refused when `NODE_ENV=production`',
  ),
  port: intSetting('listeners', 'SLUICE_PORT', 8080, 0, 65535, 'public listener'),
  /** HTTPS (and mTLS) on the public port; null: plain HTTP. */
  tls: {
    section: 'listeners',
    vars: [
      {
        env: 'SLUICE_TLS_CERT',
        default: 'unset',
        doc:
          'PEM file: the server certificate, then any intermediates. With `SLUICE_TLS_KEY`, the public ' +
          "listener speaks HTTPS only (uWebSockets.js's TLS app). Both or neither; unset: plain HTTP. " +
          'Checked at start: readable, a certificate, the key its own. Read once: a renewed certificate ' +
          'takes a restart. `docs/operations.md`, "Front door"',
      },
      { env: 'SLUICE_TLS_KEY', default: 'unset', doc: "PEM file: the certificate's unencrypted private key" },
      {
        env: 'SLUICE_TLS_CLIENT_CA',
        default: 'unset',
        doc:
          'PEM file: CA certificates. Set (with the two above), every connection must present a valid, ' +
          'unexpired client certificate signed by one of them: without one, or with another, the handshake ' +
          'fails and no route is reached (mTLS; the port is then served through node:tls, ' +
          '`docs/decisions.md`, "mTLS without a proxy"). Needs `SLUICE_TLS_CERT` and `SLUICE_TLS_KEY`',
      },
    ],
    read: listenerTls,
  },
  /**
   * SLUICE_TRUSTED_PROXIES: the peers (addresses or CIDR blocks, canonical text) whose client-certificate
   * headers the ingress believes (ingress/client-cert.ts); empty: nobody's.
   */
  trustedProxies: {
    section: 'listeners',
    vars: [
      {
        env: 'SLUICE_TRUSTED_PROXIES',
        default: 'unset (nobody)',
        doc:
          'comma-separated IP addresses or CIDR blocks, IPv4 or IPv6 (`10.0.0.0/8,::1`): the front doors ' +
          'whose client-certificate headers (`X-Client-Cert-Sha256`, `X-Client-Cert-Subject`) Sluice ' +
          'believes, for certificate-bound tokens and mTLS client authentication. From any other peer the ' +
          'headers are ignored, never an error. An IPv4 peer of a dual-stack listener (`::ffff:10.0.0.7`) ' +
          'is its IPv4 address. A host name, a bad prefix or host bits past the prefix (`10.0.0.1/8`) stop ' +
          'the process at start. `docs/operations.md`, "Certificate-bound tokens and mTLS clients"',
      },
    ],
    read: trustedProxies,
  },
  adminPort: intSetting(
    'listeners',
    'SLUICE_ADMIN_PORT',
    9464,
    0,
    65535,
    'health (`/healthz`, `/readyz`) and metrics (`/metrics`)',
  ),
  /** Listen address of the admin port (/healthz, /readyz, /metrics): SLUICE_ADMIN_HOST, loopback by default. */
  adminHost: {
    section: 'listeners',
    vars: [
      {
        env: 'SLUICE_ADMIN_HOST',
        default: '`127.0.0.1`',
        doc:
          'listen address of the admin port, in every process that has one (`sluice start` and its ' +
          'workers, `sluice ingress`, `sluice dispatcher`). An IP address of this machine or `localhost`: ' +
          "`0.0.0.0` (every IPv4 interface), `::` (every interface) or one interface's address opens it to " +
          'other hosts, for a Prometheus or a health check that is not on the machine: see "Exposing the ' +
          'admin port" in `docs/operations.md`. Anything else stops the process at start',
      },
    ],
    read(env) {
      // Not SLUICE_HOST: /metrics names every tenant with its traffic, so the admin port stays on
      // loopback unless it is opened on purpose.
      const host = env.SLUICE_ADMIN_HOST || '127.0.0.1';
      if (isIP(host) === 0 && host !== 'localhost')
        throw new ConfigError(
          'SLUICE_ADMIN_HOST',
          'must be an IP address of this machine or localhost (127.0.0.1, ::1; 0.0.0.0 or :: opens the admin port ' +
            `on every interface), got "${host}"`,
        );
      return host;
    },
  },
  region: {
    section: 'regions',
    vars: [{ env: 'SLUICE_REGION', default: '`local`', doc: "this node's region; tokens of another region get 421" }],
    read(env) {
      const region = env.SLUICE_REGION || 'local';
      if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(region))
        throw new ConfigError('SLUICE_REGION', `must be lowercase letters, digits and dashes, got "${region}"`);
      return region;
    },
  },
  /** Peer ports of the ingress nodes in other regions, pushed every revocation taken here (SLUICE_PEERS). */
  peers: {
    section: 'regions',
    vars: [
      {
        env: 'SLUICE_PEERS',
        default: 'unset',
        doc:
          'comma-separated URLs of the peer ports of the ingress nodes in other regions: a revocation ' +
          'taken here is pushed to them (signed with a key from `SLUICE_MASTER_KEY`) before its audit ' +
          'append, so they refuse the client within one network hop instead of after the Kafka path ' +
          '(`docs/operations.md`, "Regions")',
      },
    ],
    read: (env): readonly string[] => Object.freeze(peers(env)),
  },
  /** This ingress's peer port (SLUICE_PEER_PORT), or null: no pushes received. */
  peerPort: {
    section: 'regions',
    vars: [
      {
        env: 'SLUICE_PEER_PORT',
        default: 'unset (off)',
        doc:
          'the port, on `SLUICE_PEER_HOST`, where an ingress node takes pushed revocations (`POST ' +
          '/revocations`, signed); a pushed revocation holds until its Kafka record arrives, or 5 minutes. ' +
          'One per node: with `--workers N` the first worker to bind it listens and passes each push to the ' +
          'other workers',
      },
    ],
    read: (env) => (env.SLUICE_PEER_PORT ? int(env, 'SLUICE_PEER_PORT', 0, 0, 65535) : null),
  },
  peerHost: textSetting(
    'regions',
    'SLUICE_PEER_HOST',
    '127.0.0.1',
    'listen address of the peer port (`SLUICE_PEER_PORT`): set it to the address the other regions reach',
  ),
  audience: textSetting('tokens', 'SLUICE_AUDIENCE', 'sluice', '`aud` of tokens'),
  roles: {
    section: 'tokens',
    vars: [
      {
        env: 'SLUICE_ROLES',
        default: 'built-in roles',
        doc: 'JSON object `{"role": ["resource:action", …]}` merged over the defaults',
      },
    ],
    read: (env): Readonly<Record<string, readonly string[]>> => Object.freeze(parseRoles(env)),
  },
  clockSkewSeconds: intSetting('tokens', 'SLUICE_CLOCK_SKEW_SECONDS', 5, 0, 60, 'leeway on `exp`, `nbf`, `iat`'),
  tokenCacheSize: intSetting(
    'tokens',
    'SLUICE_TOKEN_CACHE_SIZE',
    100_000,
    0,
    10_000_000,
    'verified tokens kept per node (0 disables the cache)',
  ),
  /** Tokens live 15 minutes; no variable changes it. */
  tokenTtlSeconds: { read: () => 900 },
  masterKeyIsDefault: { read: (env) => env.SLUICE_MASTER_KEY === undefined },
  /** SLUICE_ISSUER unset: the node adopts the issuer its cluster already uses (core/tokens/cluster-issuer.ts). */
  issuerIsDefault: { read: (env) => !env.SLUICE_ISSUER },
  maxBodyBytes: intSetting(
    'limits',
    'SLUICE_MAX_BODY_BYTES',
    1024 * 1024,
    1024,
    16 * 1024 * 1024,
    'request bodies above this get 413',
  ),
  /** Requests per second per client per node at the edge (0: off), and the burst above it. */
  clientRateLimit: intSetting(
    'limits',
    'SLUICE_RATE_LIMIT_PER_CLIENT',
    10_000,
    0,
    10_000_000,
    'requests per second per client at each node (0: off); over it, 429 `RATE_LIMITED` with `Retry-After`',
  ),
  clientRateBurst: intSetting('limits', 'SLUICE_RATE_LIMIT_BURST', 20_000, 1, 100_000_000, 'burst above that rate'),
  /** Failed token requests per second per client id and per address (0: off). */
  authFailureRate: intSetting(
    'limits',
    'SLUICE_AUTH_FAILURE_RATE',
    5,
    0,
    1_000_000,
    'failed token requests per second per client id and per address before they get 429 (0: off)',
  ),
  authFailureBurst: intSetting(
    'limits',
    'SLUICE_AUTH_FAILURE_BURST',
    20,
    1,
    1_000_000,
    'burst of failures before that',
  ),
  /**
   * Token requests per minute per known client id at each node, successful or failed (0: off), and
   * the burst above it: over it, 429 with Retry-After in the OAuth error shape.
   */
  tokenRatePerMinute: intSetting(
    'limits',
    'SLUICE_TOKEN_RATE_PER_MINUTE',
    600,
    0,
    60_000_000,
    'token requests per minute per known client id at each node, failed authentications included (0: ' +
      'off); over it, 429 `temporarily_unavailable` with `Retry-After`',
  ),
  tokenRateBurst: intSetting(
    'limits',
    'SLUICE_TOKEN_RATE_BURST',
    100,
    1,
    1_000_000,
    'burst of token requests above that rate',
  ),
  upstreams: {
    section: 'upstreams',
    vars: [
      { env: 'SLUICE_UPSTREAM_INFERENCE', default: 'unset', doc: 'base URL behind `/v1/inference/*`' },
      { env: 'SLUICE_UPSTREAM_PIPELINES', default: 'unset', doc: 'base URL behind `/v1/pipelines/*`' },
      { env: 'SLUICE_UPSTREAM_TELEMETRY', default: 'unset', doc: 'base URL behind `/v1/telemetry/*`' },
    ],
    read: (env): Upstreams =>
      Object.freeze({
        inference: url(env, 'SLUICE_UPSTREAM_INFERENCE'),
        pipelines: url(env, 'SLUICE_UPSTREAM_PIPELINES'),
        telemetry: url(env, 'SLUICE_UPSTREAM_TELEMETRY'),
      }),
  },
  keyRotationDays: numSetting('rotation', 'SLUICE_KEY_ROTATION_DAYS', 30, 0.0001, 365, 'signing-key rotation period'),
  secretRotationDays: numSetting(
    'rotation',
    'SLUICE_SECRET_ROTATION_DAYS',
    30,
    0.0001,
    365,
    'client-secret rotation period',
  ),
  /** How long a rotated-out client secret keeps working beside its successor (the overlap; at most 7 days). */
  secretGraceDays: numSetting(
    'rotation',
    'SLUICE_SECRET_GRACE_DAYS',
    1,
    0,
    7,
    'how long a rotated-out client secret keeps working beside its successor (0 to 7, fractions ' +
      'allowed): the time the tenant has to hand the new secret to the client; a token of the old ' +
      'secret never reads the new one (`docs/operations.md`)',
  ),
  /** How often the rotation leader checks whether a key or secret is due (real milliseconds). */
  rotationCheckMs: intSetting(
    'rotation',
    'SLUICE_ROTATION_CHECK_MS',
    60_000,
    50,
    3_600_000,
    'how often the rotation leader checks whether a key or a client secret is due (real ms)',
  ),
  /** Webhook deliveries in flight at once in one dispatcher process. */
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
   * Deliveries one dispatcher process holds in memory (queued
   * or in flight) before it pauses the partitions that feed it.
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
  idleFetchWaitMs: intSetting(
    'webhooks',
    'SLUICE_IDLE_FETCH_WAIT_MS',
    1000,
    50,
    10_000,
    "how long a fetch of the dispatchers' consumer groups (and of the rotation leader's lease) waits " +
      'when nothing is expected: a record ends the wait at once, so this sets what an idle dispatcher ' +
      'costs, not how fast a delivery starts. While a partition is paused for backpressure or a re-read ' +
      'is pending, fetches wait 50-100 ms; while retries wait on their rung, until the next is due. It ' +
      "bounds how late a resumed endpoint's held deliveries start and how soon a member notices a " +
      'rebalance; at most a third of `SLUICE_DISPATCH_SESSION_TIMEOUT_MS`',
  ),
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
  /** An endpoint whose every attempt failed for this long (before SLUICE_TIME_SCALE) is DISABLED. */
  webhookDisableAfterMs: {
    section: 'webhooks',
    vars: [
      {
        env: 'SLUICE_WEBHOOK_DISABLE_AFTER_HOURS',
        default: '`120` (5 days)',
        doc:
          'an endpoint whose every attempt failed for this long (before `SLUICE_TIME_SCALE`) becomes ' + '`DISABLED`',
      },
    ],
    read: (env) => num(env, 'SLUICE_WEBHOOK_DISABLE_AFTER_HOURS', 120, 1, 24 * 365) * 3600_000,
  },
  /**
   * After a secret rotation, how long the previous secret keeps signing (the default of the request's overlap_seconds).
   */
  webhookSecretOverlapSeconds: intSetting(
    'webhooks',
    'SLUICE_WEBHOOK_SECRET_OVERLAP_SECONDS',
    86_400,
    0,
    7 * 86_400,
    'after `rotate-secret`, how long the previous secret keeps signing beside the new one, unless ' +
      'the request says `overlap_seconds` (0 to 604800)',
  ),
  /** The most webhook endpoints one tenant may have; registering one more is a 409 ENDPOINT_LIMIT. */
  maxEndpointsPerTenant: intSetting(
    'webhooks',
    'SLUICE_MAX_ENDPOINTS_PER_TENANT',
    1000,
    1,
    1_000_000,
    'the most webhook endpoints one tenant may have (1 to 1000000); registering one more is a 409 ' +
      "`ENDPOINT_LIMIT` (with `max_endpoints`) until one is deleted. It bounds a tenant's fan-out: one " +
      'event becomes at most this many deliveries',
  ),
  /**
   * Requests Sluice sends to a tenant's targets outside deliveries (registration, verify, a new
   * URL's ping, test sends), per tenant and node process: this many a minute, half of it at once.
   */
  tenantTargetRequestsPerMinute: intSetting(
    'webhooks',
    'SLUICE_TENANT_TARGET_REQUESTS_PER_MINUTE',
    120,
    1,
    1_000_000,
    "requests Sluice sends to one tenant's targets outside deliveries (the ping of a registration, " +
      "of verify and of a PATCH's new URL, test sends), per node process: half of it at once, then " +
      'this many a minute; beyond it 429 `RATE_LIMITED` with Retry-After. Each endpoint has its own ' +
      'budget beside it: 3 at once, then one every 5 s',
  ),
  /** The share of an endpoint's (and a tenant's) delivery capacity a recovery may use (core/webhooks/recovery.ts). */
  recoveryShare: numSetting(
    'webhooks',
    'SLUICE_RECOVERY_SHARE',
    0.1,
    0.001,
    1,
    'share of delivery capacity a recovery (`POST /v1/webhooks/endpoints/{id}/recover`) may use: it re-sends at ' +
      "most this share of the endpoint's `rate_limit_per_second` (or of `SLUICE_RECOVERY_CAPACITY_PER_SECOND` " +
      "without one) a second, and all of a tenant's recoveries on one node together at most this share of " +
      '`SLUICE_RECOVERY_CAPACITY_PER_SECOND`',
  ),
  /** The deliveries a second taken as an endpoint's (without a rate limit) and a tenant's capacity, for recoveries. */
  recoveryCapacityPerSecond: intSetting(
    'webhooks',
    'SLUICE_RECOVERY_CAPACITY_PER_SECOND',
    500,
    1,
    1_000_000,
    'deliveries a second a recovery takes as the capacity of an endpoint without `rate_limit_per_second`, ' +
      "and as a tenant's; " +
      'a recovery uses `SLUICE_RECOVERY_SHARE` of it',
  ),
  /** Everything sent to webhook targets goes through this CONNECT proxy; null: straight to them. */
  deliveryProxy: {
    section: 'webhooks',
    vars: [
      {
        env: 'SLUICE_DELIVERY_PROXY',
        default: 'unset (direct)',
        doc:
          'an HTTP CONNECT proxy (`http://[user:password@]host:port`) through which every delivery, ' +
          "verification ping and test send goes, so receivers can allow-list the proxy's addresses. " +
          'The target rules still apply: Sluice resolves and checks the target itself and asks the ' +
          'proxy for that address (TLS to the target runs inside the tunnel)',
      },
    ],
    read(env): DeliveryProxy | null {
      const raw = env.SLUICE_DELIVERY_PROXY;
      if (!raw) return null;
      let url: URL;
      try {
        url = new URL(raw);
      } catch {
        throw new ConfigError('SLUICE_DELIVERY_PROXY', `must be a URL like http://proxy:3128, got "${raw}"`);
      }
      if (url.protocol !== 'http:' || url.hostname === '' || (url.pathname !== '/' && url.pathname !== ''))
        throw new ConfigError('SLUICE_DELIVERY_PROXY', `must be http://[user:password@]host:port, got "${url.origin}"`);
      const user = decodeURIComponent(url.username);
      const password = decodeURIComponent(url.password);
      return {
        host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
        port: url.port ? Number(url.port) : 80,
        authorization: user || password ? `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` : null,
      };
    },
  },
  /** The client certificate presented on every delivery, ping and test send over https; null: none. */
  deliveryClientCertificate: {
    section: 'webhooks',
    vars: [
      {
        env: 'SLUICE_DELIVERY_CLIENT_CERT',
        default: 'unset',
        doc:
          'PEM file: the client certificate Sluice presents to webhook receivers that ask for one (mTLS), ' +
          'then any intermediates, in order. Every delivery, verification ping and test send over https ' +
          'carries it; `GET /v1/webhooks/client-certificate` publishes the chain (`docs/webhooks.md`, ' +
          '"Authenticating Sluice by its certificate"). Set it, with the key, on every process that sends: ' +
          'the dispatcher (deliveries) and the ingress (pings, test sends, the route). Needs ' +
          '`SLUICE_DELIVERY_CLIENT_KEY`. Checked at start: readable, each certificate issued by the next. ' +
          'Read once: a renewed certificate takes a restart',
      },
      {
        env: 'SLUICE_DELIVERY_CLIENT_KEY',
        default: 'unset',
        doc:
          "PEM file: the unencrypted private key of `SLUICE_DELIVERY_CLIENT_CERT`'s certificate. Both or " +
          "neither; a key that is not the certificate's stops the process at start",
      },
    ],
    read: deliveryClientCertificate,
  },
  logLevel: {
    section: 'observability',
    vars: [
      {
        env: 'SLUICE_LOG_LEVEL',
        default: '`info`',
        doc:
          '`debug`, `info`, `warn`, `error` (pino JSON lines on stderr; secret-named fields redacted; ' +
          '`debug` adds a line per request and per delivery outcome)',
      },
    ],
    read(env) {
      const level = env.SLUICE_LOG_LEVEL || 'info';
      if (level !== 'debug' && level !== 'info' && level !== 'warn' && level !== 'error')
        throw new ConfigError('SLUICE_LOG_LEVEL', 'must be debug, info, warn or error');
      return level;
    },
  },
  /** Label request and event metrics by tenant (false: one series for all tenants, bounded cardinality). */
  metricsTenantLabel: boolSetting(
    'observability',
    'SLUICE_METRICS_TENANT_LABEL',
    true,
    'label request and event metrics by tenant; `false` records every tenant as `""` (bounded ' +
      'cardinality for many tenants)',
  ),
  /** Where spans go: nowhere (tracing off), the console (development) or OTLP over HTTP. */
  traceExporter: {
    section: 'observability',
    vars: [
      {
        env: 'SLUICE_TRACE_EXPORTER',
        default: '`none`',
        doc: '`none` (tracing off: no spans made), `console` (development), `otlp` (OTLP over HTTP)',
      },
    ],
    read: (env) => oneOf(env, 'SLUICE_TRACE_EXPORTER', ['none', 'console', 'otlp'] as const, 'none'),
  },
  /** The share of new traces sampled (0..1); a request that arrives with a sampled traceparent is always traced. */
  traceSampleRatio: numSetting(
    'observability',
    'SLUICE_TRACE_SAMPLE_RATIO',
    1,
    0,
    1,
    'share of new traces sampled (0 to 1); a request arriving with a sampled `traceparent` is always ' + 'traced',
  ),
  /** The OTLP/HTTP traces endpoint. */
  otlpEndpoint: {
    section: 'observability',
    vars: [
      {
        env: 'SLUICE_OTLP_ENDPOINT',
        default: '`http://127.0.0.1:4318/v1/traces`',
        doc: 'the OTLP/HTTP traces endpoint for `SLUICE_TRACE_EXPORTER=otlp`',
      },
    ],
    read: (env) => url(env, 'SLUICE_OTLP_ENDPOINT') ?? 'http://127.0.0.1:4318/v1/traces',
  },
  production: {
    section: 'process',
    vars: [
      {
        env: 'NODE_ENV',
        default: 'unset',
        doc: '`production` enforces a master key and refuses the dev target flag',
      },
    ],
    read: (env) => env.NODE_ENV === 'production',
  },
  timeScale: numSetting(
    'process',
    'SLUICE_TIME_SCALE',
    1,
    1,
    1_000_000,
    'divides retry delays and DLQ retention (tests and demos); never network timeouts',
  ),
  /**
   * V8's heap growth after a full collection, in percent of the live heap (0: V8's own factor);
   * null: chosen by the node's roles (cli/heap.ts).
   */
  heapGrowthPercent: {
    section: 'process',
    vars: [
      {
        env: 'SLUICE_HEAP_GROWTH_PERCENT',
        default: 'by role: `25` for an ingress-only node, `50` where the dispatcher runs',
        doc:
          "how far V8 lets a node's heap grow past its live size before a full collection (0: V8's own " +
          'factor, several times the live size). Lower keeps RSS near the live heap (mostly the endpoint ' +
          'view, about 1 KB per endpoint) at the cost of more full collections: 25 costs a dispatcher ~30 ' +
          '% more CPU per delivery (`bench/RESULTS.md`)',
      },
    ],
    read: (env) => (env.SLUICE_HEAP_GROWTH_PERCENT ? int(env, 'SLUICE_HEAP_GROWTH_PERCENT', 0, 0, 400) : null),
  },
} satisfies Record<string, Setting>;

type BaseConfig = Values<typeof SETTINGS>;

/** Settings whose default or check depends on others (`base`, the values of SETTINGS). */
export const DERIVED_SETTINGS = {
  /** The state consumer's fetch wait (a fetch still returns as soon as a record arrives). */
  stateFetchWaitMs: {
    section: 'kafka',
    vars: [
      {
        env: 'SLUICE_STATE_FETCH_WAIT_MS',
        default: '`1000` (half of `SLUICE_KAFKA_STALE_MS` when that is less than 2 s)',
        doc:
          'how long a state-view fetch waits when there is nothing new; a record ends the wait at once, so ' +
          "it sets an idle node's CPU, not how fast a revocation spreads; at most half of " +
          '`SLUICE_KAFKA_STALE_MS` (`docs/operations.md`, "Cost of fast revocation")',
      },
    ],
    // A fetch answers as soon as a record arrives: the wait only sets how often an idle node asks.
    read: (env, base) =>
      int(
        env,
        'SLUICE_STATE_FETCH_WAIT_MS',
        Math.min(DEFAULT_STATE_FETCH_WAIT_MS, Math.floor(base.kafkaStaleMs / 2)),
        1,
        10_000,
      ),
  },
  /**
   * Where each process keeps its on-disk views (endpoints, DLQ, audit; on an ingress, the attempt history
   * and event type counts too), under `<topic prefix>/<process name>`.
   */
  dataDir: {
    section: 'storage',
    vars: [
      {
        env: 'SLUICE_DATA_DIR',
        default: '`<SLUICE_CACHE_DIR>/state`',
        doc:
          "each process's on-disk views (endpoints, DLQ, audit log, attempt history: a SQLite file) in " +
          '`<dir>/<SLUICE_TOPIC_PREFIX>/<process>` (`worker-<i>` under `--workers`, else `ingress`, ' +
          "`dispatcher`, `dlq`…); must be a directory (created if missing). Deleting a stopped process's " +
          'directory makes it rebuild from Kafka',
      },
    ],
    read: (env, base) => dirPath(env, 'SLUICE_DATA_DIR', join(base.cacheDir, 'state')),
  },
  issuer: {
    section: 'tokens',
    vars: [
      {
        env: 'SLUICE_ISSUER',
        default: "the cluster's (the first node's `http://127.0.0.1:<SLUICE_PORT>`, `https://` with `SLUICE_TLS_CERT`)",
        doc:
          "`iss` of tokens and the metadata's issuer: set it to the public URL. One per cluster, kept in " +
          "`sluice.keys`: a node without it adopts the cluster's, a node whose value differs refuses to " +
          'start',
      },
    ],
    read(env, base) {
      const issuer = env.SLUICE_ISSUER || `${base.tls ? 'https' : 'http'}://127.0.0.1:${base.port}`;
      if (!URL.canParse(issuer)) throw new ConfigError('SLUICE_ISSUER', `must be a URL, got "${issuer}"`);
      return issuer;
    },
  },
  /** 32 bytes; keys the secret hashes and encrypts signing keys at rest. */
  masterKey: {
    section: 'tokens',
    vars: [
      {
        env: 'SLUICE_MASTER_KEY',
        default: 'development key',
        doc:
          '≥ 32 characters; keys the secret hashes and encrypts signing keys and endpoint secrets at rest. ' +
          'Required when `NODE_ENV=production`',
      },
    ],
    read(env, base): Buffer {
      const raw = env.SLUICE_MASTER_KEY;
      if (base.production && !raw) throw new ConfigError('SLUICE_MASTER_KEY', 'is required when NODE_ENV=production');
      if (raw !== undefined && raw.length < 32)
        throw new ConfigError('SLUICE_MASTER_KEY', 'must be at least 32 characters');
      return createHash('sha256')
        .update(raw ?? DEV_MASTER_KEY)
        .digest();
    },
  },
  devAllowInsecureTargets: {
    section: 'webhooks',
    vars: [
      {
        env: 'SLUICE_DEV_ALLOW_INSECURE_TARGETS',
        default: '`false`',
        doc: 'allow `http://` and private/loopback webhook targets; refused when `NODE_ENV=production`',
      },
    ],
    read(env, base) {
      const allow = bool(env, 'SLUICE_DEV_ALLOW_INSECURE_TARGETS', false);
      if (allow && base.production)
        throw new ConfigError('SLUICE_DEV_ALLOW_INSECURE_TARGETS', 'is refused when NODE_ENV=production');
      return allow;
    },
  },
} satisfies Record<string, Setting<BaseConfig>>;

/** Settings a command reads itself, before (or without) loading the configuration. */
export const CLI_SETTINGS = {
  /** The processes `sluice start` and `sluice ingress` fork (cli/workers.ts); null: the command's default. */
  workers: {
    section: 'process',
    vars: [
      {
        env: 'SLUICE_WORKERS',
        default: 'cores (`start`), 1 (`ingress`)',
        doc:
          'processes `sluice start` / `sluice ingress` fork (`--workers N`), each a whole node on the ' +
          "shared port; worker i's admin port is the admin port + i",
      },
    ],
    read(env): number | null {
      const v = env.SLUICE_WORKERS;
      if (v === undefined || v === '') return null;
      if (!/^\d{1,2}$/.test(v) || Number(v) < 1 || Number(v) > 64)
        throw new ConfigError('SLUICE_WORKERS', `must be a whole number from 1 to 64, got "${v}"`);
      return Number(v);
    },
  },
} satisfies Record<string, Setting>;

export interface Config extends BaseConfig, Values<typeof DERIVED_SETTINGS> {}

/** Every setting, the CLI's too. */
export const ALL_SETTINGS: readonly Setting<never>[] = [
  ...Object.values(SETTINGS),
  ...Object.values(DERIVED_SETTINGS),
  ...Object.values(CLI_SETTINGS),
];

/** The variables table of docs/configuration.md (`npm run docs:config` writes it there). */
export function settingsTable(): string {
  const rows = SECTIONS.flatMap((section) => ALL_SETTINGS.filter((s) => s.section === section))
    .flatMap((s) => s.vars ?? [])
    .map((v) => `| \`${v.env}\` | ${v.default} | ${v.doc} |`);
  return ['| variable | default | meaning |', '|---|---|---|', ...rows].join('\n');
}

/** Reads a group of settings, in order (the first bad value throws). */
function readAll<S extends Record<string, Setting<P>>, P>(settings: S, env: Env, prior: P): Values<S> {
  return Object.fromEntries(Object.entries(settings).map(([key, s]) => [key, s.read(env, prior)])) as Values<S>;
}

const isLoopback = (host: string) => /^(127\.\d+\.\d+\.\d+|::1|localhost)$/i.test(host);

/**
 * The development key is public: whatever it signs or seals, anyone can. So with it Sluice serves
 * loopback only, and opens no peer port (a push signed with it would revoke clients), unless
 * SLUICE_DEV_ALLOW_DEVELOPMENT_KEY says this is a development setup.
 */
function refuseDevelopmentKeyBeyondLoopback(config: Config): void {
  if (config.devAllowDevelopmentKey) {
    if (config.production)
      throw new ConfigError('SLUICE_DEV_ALLOW_DEVELOPMENT_KEY', 'is refused when NODE_ENV=production');
    return;
  }
  const fix = 'set SLUICE_MASTER_KEY (or SLUICE_DEV_ALLOW_DEVELOPMENT_KEY=true on a development setup)';
  if (config.peerPort !== null)
    throw new ConfigError(
      'SLUICE_PEER_PORT',
      `is refused with the public development key: anyone could sign a revocation push; ${fix}`,
    );
  if (!isLoopback(config.host))
    throw new ConfigError(
      'SLUICE_HOST',
      `${config.host} is beyond loopback, refused with the public development key; ${fix}`,
    );
}

export function loadConfig(rawEnv: Env = process.env): Readonly<Config> {
  const env = readFileEnv(rawEnv);
  const base = readAll(SETTINGS, env, undefined);
  const config: Config = { ...base, ...readAll(DERIVED_SETTINGS, env, base) };
  if (!env.SLUICE_MASTER_KEY) refuseDevelopmentKeyBeyondLoopback(config);
  if (config.idleFetchWaitMs * 3 > config.dispatchSessionTimeoutMs)
    throw new ConfigError(
      'SLUICE_IDLE_FETCH_WAIT_MS',
      `must be at most a third of SLUICE_DISPATCH_SESSION_TIMEOUT_MS (${config.dispatchSessionTimeoutMs}): ` +
        `heartbeats go between fetches; got ${config.idleFetchWaitMs}`,
    );
  if (config.stateFetchWaitMs * 2 > config.kafkaStaleMs)
    throw new ConfigError(
      'SLUICE_STATE_FETCH_WAIT_MS',
      `must be at most half of SLUICE_KAFKA_STALE_MS (${config.kafkaStaleMs}), ` +
        `or an idle node would fail closed between two fetches; got ${config.stateFetchWaitMs}`,
    );
  return Object.freeze(config);
}
