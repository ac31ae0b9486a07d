/**
 * Configuration from environment variables (and an optional JSON file named by SLUICE_CONFIG_FILE,
 * whose keys are the same variable names). Parsed and validated once at start-up into a frozen
 * object; a bad value throws a ConfigError naming the variable.
 */
import { readFileSync, type Stats, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createHash, createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { isIP } from 'node:net';
import { ConfigError } from './errors.ts';
import { DEFAULT_ROLES, isScope } from './scopes.ts';
import { CidrSet, formatCidr } from './net/cidr.ts';

/**
 * The client certificate the dispatcher and the pings present to receivers (SLUICE_DELIVERY_CLIENT_CERT
 * and SLUICE_DELIVERY_CLIENT_KEY), read and checked once at start-up.
 */
export interface DeliveryClientCertificate {
  /** The certificate blocks of the cert file, leaf first, as PEM (nothing else the file held). */
  chainPem: string;
  /** The same certificates, parsed (`chain[0]` is the leaf, the one the key signs for). */
  chain: readonly X509Certificate[];
  /** The private key (a KeyObject: it prints as `{}`, so it does not leak into a dump of the config). */
  key: KeyObject;
}

/**
 * TLS on the public port (SLUICE_TLS_CERT, SLUICE_TLS_KEY and SLUICE_TLS_CLIENT_CA): absolute paths of
 * files read and checked once at start-up; the listener loads them by name (ingress/uws-adapter.ts).
 */
export interface ListenerTls {
  /** PEM: the server certificate, then any intermediates. */
  certFile: string;
  /** Its unencrypted PEM private key. */
  keyFile: string;
  /** PEM CA certificates a client certificate must chain to; null: no client certificate asked. */
  clientCaFile: string | null;
}

export interface Upstreams {
  inference?: string;
  pipelines?: string;
  telemetry?: string;
}

export interface Config {
  /** null: start the embedded local Kafka. */
  kafkaBrokers: string[] | null;
  kafkaPort: number;
  kafkaClientId: string;
  topicPrefix: string;
  topicPartitions: number;
  host: string;
  port: number;
  /** HTTPS (and mTLS) on the public port; null: plain HTTP. */
  tls: ListenerTls | null;
  adminPort: number;
  /** Listen address of the admin port (/healthz, /readyz, /metrics): SLUICE_ADMIN_HOST, loopback by default. */
  adminHost: string;
  region: string;
  issuer: string;
  audience: string;
  /** 32 bytes; keys the secret hashes and encrypts signing keys at rest. */
  masterKey: Buffer;
  masterKeyIsDefault: boolean;
  /** SLUICE_ISSUER unset: the node adopts the issuer its cluster already uses (core/tokens/cluster-issuer.ts). */
  issuerIsDefault: boolean;
  roles: Readonly<Record<string, readonly string[]>>;
  upstreams: Upstreams;
  tokenTtlSeconds: number;
  clockSkewSeconds: number;
  tokenCacheSize: number;
  maxBodyBytes: number;
  timeScale: number;
  devAllowInsecureTargets: boolean;
  production: boolean;
  cacheDir: string;
  /**
   * Where each process keeps its on-disk views (endpoints, DLQ, audit; on an ingress, the attempt history
   * and event type counts too), under `<topic prefix>/<process name>`.
   */
  dataDir: string;
  /** Fail closed when the state consumer has not heard from Kafka for this long. */
  kafkaStaleMs: number;
  /**
   * This process's rack (Kafka's `client.rack`), or null: with one, consumers fetch from the replica
   * in that rack (brokers with `replica.selector.class` RackAwareReplicaSelector) and the state views
   * prove their freshness by a heartbeat written through the cluster (docs/operations.md, "Regions").
   */
  kafkaRack: string | null;
  /** Peer ports of the ingress nodes in other regions, pushed every revocation taken here (SLUICE_PEERS). */
  peers: readonly string[];
  /** This ingress's peer port (SLUICE_PEER_PORT), or null: no pushes received. */
  peerPort: number | null;
  /** The state consumer's fetch wait (a fetch still returns as soon as a record arrives). */
  stateFetchWaitMs: number;
  /**
   * V8's heap growth after a full collection, in percent of the live heap (0: V8's own factor);
   * null: chosen by the node's roles (cli/heap.ts).
   */
  heapGrowthPercent: number | null;
  keyRotationDays: number;
  secretRotationDays: number;
  /** How long a rotated-out client secret keeps working beside its successor (the overlap; at most 7 days). */
  secretGraceDays: number;
  /** How often the rotation leader checks whether a key or secret is due (real milliseconds). */
  rotationCheckMs: number;
  logLevel: 'debug' | 'info' | 'warn' | 'error';
  /** Requests per second per client per node at the edge (0: off), and the burst above it. */
  clientRateLimit: number;
  clientRateBurst: number;
  /** Failed token requests per second per client id and per address (0: off). */
  authFailureRate: number;
  authFailureBurst: number;
  /**
   * Token requests per minute per known client id at each node, successful or failed (0: off), and
   * the burst above it: over it, 429 with Retry-After in the OAuth error shape.
   */
  tokenRatePerMinute: number;
  tokenRateBurst: number;
  /** Webhook deliveries in flight at once in one dispatcher process. */
  dispatchConcurrency: number;
  /** Deliveries in flight at once to one endpoint (also the keep-alive connections per origin). */
  dispatchPerEndpoint: number;
  /**
   * An attempt slower than this (or timed out) marks its endpoint
   * slow: its queued deliveries go back through the first rung.
   */
  dispatchSlowMs: number;
  /**
   * Deliveries one dispatcher process holds in memory (queued
   * or in flight) before it pauses the partitions that feed it.
   */
  dispatchBuffer: number;
  /** How often (before SLUICE_TIME_SCALE) a delivery held for a PENDING endpoint is re-checked. */
  dispatchHoldRecheckMs: number;
  /** Label request and event metrics by tenant (false: one series for all tenants, bounded cardinality). */
  metricsTenantLabel: boolean;
  /** Where spans go: nowhere (tracing off), the console (development) or OTLP over HTTP. */
  traceExporter: 'none' | 'console' | 'otlp';
  /** The share of new traces sampled (0..1); a request that arrives with a sampled traceparent is always traced. */
  traceSampleRatio: number;
  /** The OTLP/HTTP traces endpoint. */
  otlpEndpoint: string;
  /** An endpoint whose every attempt failed for this long (before SLUICE_TIME_SCALE) is DISABLED. */
  webhookDisableAfterMs: number;
  /**
   * After a secret rotation, how long the previous secret keeps signing (the default of the request's overlap_seconds).
   */
  webhookSecretOverlapSeconds: number;
  /** The most webhook endpoints one tenant may have; registering one more is a 409 ENDPOINT_LIMIT. */
  maxEndpointsPerTenant: number;
  /**
   * SLUICE_TRUSTED_PROXIES: the peers (addresses or CIDR blocks, canonical text) whose client-certificate
   * headers the ingress believes (ingress/client-cert.ts); empty: nobody's.
   */
  trustedProxies: readonly string[];
  /** The client certificate presented on every delivery, ping and test send over https; null: none. */
  deliveryClientCertificate: DeliveryClientCertificate | null;
}

type Env = Record<string, string | undefined>;

const DEV_MASTER_KEY = 'sluice-development-master-key-do-not-use-in-production';

function int(env: Env, name: string, def: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  if (!/^-?\d+$/.test(raw.trim())) throw new ConfigError(name, `must be an integer, got "${raw}"`);
  const n = Number(raw);
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

function num(env: Env, name: string, def: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min || n > max) {
    throw new ConfigError(name, `must be a number between ${min} and ${max}, got "${raw}"`);
  }
  return n;
}

function bool(env: Env, name: string, def: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw new ConfigError(name, `must be true or false, got "${raw}"`);
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], def: T): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  if (!(allowed as readonly string[]).includes(raw))
    throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${raw}"`);
  return raw as T;
}

function url(env: Env, name: string): string | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const scheme = URL.canParse(raw) ? new URL(raw).protocol : null;
  if (scheme !== 'http:' && scheme !== 'https:') throw new ConfigError(name, `must be an http(s) URL, got "${raw}"`);
  return raw.replace(/\/+$/, '');
}

/** A directory that exists or is missing (created when a process opens its store); a file is refused. */
function dirPath(env: Env, name: string, def: string): string {
  const raw = env[name];
  if (raw?.includes('\0')) throw new ConfigError(name, 'must be a directory path');
  const dir = resolve(raw || def);
  let stat: Stats | undefined;
  try {
    stat = statSync(dir, { throwIfNoEntry: false });
  } catch (err) {
    throw new ConfigError(name, `cannot use ${dir}: ${(err as Error).message}`);
  }
  if (stat && !stat.isDirectory()) throw new ConfigError(name, `must be a directory, but ${dir} is a file`);
  return dir;
}

function parseRoles(env: Env): Record<string, readonly string[]> {
  const raw = env.SLUICE_ROLES;
  if (raw === undefined || raw === '') return { ...DEFAULT_ROLES };
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new ConfigError('SLUICE_ROLES', 'must be a JSON object {"role": ["resource:action", ...]}');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ConfigError('SLUICE_ROLES', 'must be a JSON object {"role": ["resource:action", ...]}');
  }
  const roles: Record<string, readonly string[]> = { ...DEFAULT_ROLES };
  for (const [role, scopes] of Object.entries(parsed)) {
    if (!/^[a-z][a-z0-9-]{0,63}$/.test(role)) throw new ConfigError('SLUICE_ROLES', `bad role name "${role}"`);
    if (!Array.isArray(scopes) || scopes.some((s) => typeof s !== 'string' || !isScope(s))) {
      throw new ConfigError('SLUICE_ROLES', `role "${role}" must map to an array of "resource:action" scopes`);
    }
    roles[role] = Object.freeze([...new Set(scopes as string[])]);
  }
  return roles;
}

function readFileEnv(env: Env): Env {
  const file = env.SLUICE_CONFIG_FILE;
  if (!file) return env;
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ConfigError('SLUICE_CONFIG_FILE', `cannot read JSON from ${file}: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null)
    throw new ConfigError('SLUICE_CONFIG_FILE', 'must hold a JSON object');
  const fromFile: Env = {};
  for (const [k, v] of Object.entries(parsed)) {
    fromFile[k] = typeof v === 'string' ? v : JSON.stringify(v);
  }
  // The environment wins over the file.
  return { ...fromFile, ...env };
}

/** Reads a file a setting names, or a ConfigError naming the setting. */
function readSettingFile(name: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(name, `cannot read ${path}: ${(err as Error).message}`);
  }
}

/**
 * SLUICE_DELIVERY_CLIENT_CERT (PEM: the certificate, then any intermediates) and
 * SLUICE_DELIVERY_CLIENT_KEY (its unencrypted PEM private key): both or neither, readable, each
 * certificate issued by the next, and the key the leaf's.
 */
function deliveryClientCertificate(env: Env): DeliveryClientCertificate | null {
  const certPath = env.SLUICE_DELIVERY_CLIENT_CERT || '';
  const keyPath = env.SLUICE_DELIVERY_CLIENT_KEY || '';
  if (certPath === '' && keyPath === '') return null;
  if (keyPath === '')
    throw new ConfigError(
      'SLUICE_DELIVERY_CLIENT_KEY',
      'must be set when SLUICE_DELIVERY_CLIENT_CERT is (both or neither)',
    );
  if (certPath === '')
    throw new ConfigError(
      'SLUICE_DELIVERY_CLIENT_CERT',
      'must be set when SLUICE_DELIVERY_CLIENT_KEY is (both or neither)',
    );
  const certText = readSettingFile('SLUICE_DELIVERY_CLIENT_CERT', certPath);
  const blocks = certText.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0)
    throw new ConfigError('SLUICE_DELIVERY_CLIENT_CERT', `${certPath} holds no PEM certificate (BEGIN CERTIFICATE)`);
  const chain = blocks.map((pem, i) => {
    try {
      return new X509Certificate(pem);
    } catch (err) {
      throw new ConfigError(
        'SLUICE_DELIVERY_CLIENT_CERT',
        `certificate ${i + 1} in ${certPath} cannot be read: ${(err as Error).message}`,
      );
    }
  });
  for (let i = 0; i + 1 < chain.length; i++)
    if (!chain[i].checkIssued(chain[i + 1]))
      throw new ConfigError(
        'SLUICE_DELIVERY_CLIENT_CERT',
        `certificate ${i + 2} in ${certPath} did not issue certificate ${i + 1}: the file must hold the ` +
          'certificate first, then each issuer in order',
      );
  let key: KeyObject;
  try {
    key = createPrivateKey(readSettingFile('SLUICE_DELIVERY_CLIENT_KEY', keyPath));
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError(
      'SLUICE_DELIVERY_CLIENT_KEY',
      `${keyPath} holds no readable unencrypted PEM private key: ${(err as Error).message}`,
    );
  }
  if (!chain[0].checkPrivateKey(key))
    throw new ConfigError(
      'SLUICE_DELIVERY_CLIENT_KEY',
      `the key in ${keyPath} does not belong to the certificate in ${certPath} ` +
        `(${chain[0].subject.replace(/\n/g, ', ')})`,
    );
  return Object.freeze({ chainPem: `${blocks.join('\n')}\n`, chain: Object.freeze(chain), key });
}

/** SLUICE_TRUSTED_PROXIES: comma-separated addresses or CIDR blocks, IPv4 or IPv6, in canonical text. */
function trustedProxies(env: Env): readonly string[] {
  try {
    return Object.freeze(CidrSet.parse(env.SLUICE_TRUSTED_PROXIES ?? '').entries.map(formatCidr));
  } catch (err) {
    throw new ConfigError(
      'SLUICE_TRUSTED_PROXIES',
      `${(err as Error).message}; give comma-separated IP addresses or CIDR blocks, e.g. "10.0.0.0/8,::1"`,
    );
  }
}

/** The PEM certificate blocks of a file a setting names, parsed, or a ConfigError naming the setting. */
function pemCertificates(name: string, path: string): X509Certificate[] {
  const blocks = readSettingFile(name, path).match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g);
  if (!blocks) throw new ConfigError(name, `${path} holds no PEM certificate (BEGIN CERTIFICATE)`);
  return blocks.map((pem, i) => {
    try {
      return new X509Certificate(pem);
    } catch (err) {
      throw new ConfigError(name, `certificate ${i + 1} in ${path} cannot be read: ${(err as Error).message}`);
    }
  });
}

/**
 * SLUICE_TLS_CERT and SLUICE_TLS_KEY (both or neither; the key unencrypted and the certificate's),
 * and SLUICE_TLS_CLIENT_CA, which needs them.
 */
function listenerTls(env: Env): ListenerTls | null {
  const certPath = env.SLUICE_TLS_CERT || '';
  const keyPath = env.SLUICE_TLS_KEY || '';
  const caPath = env.SLUICE_TLS_CLIENT_CA || '';
  if (certPath === '' && keyPath === '') {
    if (caPath !== '')
      throw new ConfigError('SLUICE_TLS_CLIENT_CA', 'needs SLUICE_TLS_CERT and SLUICE_TLS_KEY (mTLS is TLS first)');
    return null;
  }
  if (keyPath === '') throw new ConfigError('SLUICE_TLS_KEY', 'must be set when SLUICE_TLS_CERT is (both or neither)');
  if (certPath === '') throw new ConfigError('SLUICE_TLS_CERT', 'must be set when SLUICE_TLS_KEY is (both or neither)');
  const [leaf] = pemCertificates('SLUICE_TLS_CERT', certPath);
  let key: KeyObject;
  try {
    key = createPrivateKey(readSettingFile('SLUICE_TLS_KEY', keyPath));
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError(
      'SLUICE_TLS_KEY',
      `${keyPath} is not an unencrypted PEM private key: ${(err as Error).message}`,
    );
  }
  if (!leaf.checkPrivateKey(key))
    throw new ConfigError('SLUICE_TLS_KEY', `${keyPath} is not the key of the certificate in ${certPath}`);
  if (caPath !== '') pemCertificates('SLUICE_TLS_CLIENT_CA', caPath);
  return { certFile: resolve(certPath), keyFile: resolve(keyPath), clientCaFile: caPath ? resolve(caPath) : null };
}

function peers(env: Env): string[] {
  return (env.SLUICE_PEERS ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)
    .map((p, i) => url({ [`SLUICE_PEERS[${i}]`]: p }, `SLUICE_PEERS[${i}]`)!);
}

function kafkaRack(env: Env): string | null {
  const rack = env.SLUICE_KAFKA_RACK?.trim();
  if (!rack) return null;
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(rack))
    throw new ConfigError(
      'SLUICE_KAFKA_RACK',
      `must be letters, digits, ".", "_" or "-" (a broker.rack), got "${rack}"`,
    );
  return rack;
}

/** SLUICE_STATE_FETCH_WAIT_MS's default (less when SLUICE_KAFKA_STALE_MS is under twice as long). */
export const DEFAULT_STATE_FETCH_WAIT_MS = 1000;

export function loadConfig(rawEnv: Env = process.env): Readonly<Config> {
  const env = readFileEnv(rawEnv);
  const production = env.NODE_ENV === 'production';
  const brokersRaw = env.KAFKA_BROKERS?.trim();
  let kafkaBrokers: string[] | null = null;
  if (brokersRaw) {
    kafkaBrokers = brokersRaw
      .split(',')
      .map((b) => b.trim())
      .filter(Boolean);
    for (const b of kafkaBrokers) {
      if (!/^[A-Za-z0-9.\-_[\]:]+:\d{1,5}$/.test(b)) throw new ConfigError('KAFKA_BROKERS', `"${b}" is not host:port`);
    }
  }
  const port = int(env, 'SLUICE_PORT', 8080, 0, 65535);
  const host = env.SLUICE_HOST || '0.0.0.0';
  // Not SLUICE_HOST: /metrics names every tenant with its traffic, so the admin port stays on
  // loopback unless it is opened on purpose.
  const adminHost = env.SLUICE_ADMIN_HOST || '127.0.0.1';
  if (isIP(adminHost) === 0 && adminHost !== 'localhost')
    throw new ConfigError(
      'SLUICE_ADMIN_HOST',
      'must be an IP address of this machine or localhost (127.0.0.1, ::1; 0.0.0.0 or :: opens the admin port ' +
        `on every interface), got "${adminHost}"`,
    );
  const region = env.SLUICE_REGION || 'local';
  if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(region))
    throw new ConfigError('SLUICE_REGION', `must be lowercase letters, digits and dashes, got "${region}"`);
  const tls = listenerTls(env);
  const issuer = env.SLUICE_ISSUER || `${tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  try {
    new URL(issuer);
  } catch {
    throw new ConfigError('SLUICE_ISSUER', `must be a URL, got "${issuer}"`);
  }
  const masterRaw = env.SLUICE_MASTER_KEY;
  if (production && !masterRaw) throw new ConfigError('SLUICE_MASTER_KEY', 'is required when NODE_ENV=production');
  if (masterRaw !== undefined && masterRaw.length < 32)
    throw new ConfigError('SLUICE_MASTER_KEY', 'must be at least 32 characters');
  const masterKey = createHash('sha256')
    .update(masterRaw ?? DEV_MASTER_KEY)
    .digest();
  const devAllowInsecureTargets = bool(env, 'SLUICE_DEV_ALLOW_INSECURE_TARGETS', false);
  if (devAllowInsecureTargets && production) {
    throw new ConfigError('SLUICE_DEV_ALLOW_INSECURE_TARGETS', 'is refused when NODE_ENV=production');
  }
  const logLevel = (env.SLUICE_LOG_LEVEL || 'info') as Config['logLevel'];
  if (!['debug', 'info', 'warn', 'error'].includes(logLevel))
    throw new ConfigError('SLUICE_LOG_LEVEL', 'must be debug, info, warn or error');
  const topicPrefix = env.SLUICE_TOPIC_PREFIX || 'sluice';
  if (!/^[A-Za-z0-9._-]{1,100}$/.test(topicPrefix))
    throw new ConfigError('SLUICE_TOPIC_PREFIX', 'must be letters, digits, ".", "_" or "-"');
  const cacheDir = env.SLUICE_CACHE_DIR || fileURLToPath(new URL('../.cache', import.meta.url));

  const kafkaStaleMs = int(env, 'SLUICE_KAFKA_STALE_MS', 10_000, 100, 600_000);
  const config: Config = {
    kafkaBrokers,
    kafkaPort: int(env, 'SLUICE_KAFKA_PORT', 9092, 1, 65535),
    kafkaClientId: env.SLUICE_KAFKA_CLIENT_ID || 'sluice',
    topicPrefix,
    topicPartitions: int(env, 'SLUICE_TOPIC_PARTITIONS', 6, 1, 1024),
    host,
    port,
    tls,
    adminPort: int(env, 'SLUICE_ADMIN_PORT', 9464, 0, 65535),
    adminHost,
    region,
    issuer,
    issuerIsDefault: !env.SLUICE_ISSUER,
    audience: env.SLUICE_AUDIENCE || 'sluice',
    masterKey,
    masterKeyIsDefault: masterRaw === undefined,
    roles: Object.freeze(parseRoles(env)),
    upstreams: Object.freeze({
      inference: url(env, 'SLUICE_UPSTREAM_INFERENCE'),
      pipelines: url(env, 'SLUICE_UPSTREAM_PIPELINES'),
      telemetry: url(env, 'SLUICE_UPSTREAM_TELEMETRY'),
    }),
    tokenTtlSeconds: 900,
    clockSkewSeconds: int(env, 'SLUICE_CLOCK_SKEW_SECONDS', 5, 0, 60),
    tokenCacheSize: int(env, 'SLUICE_TOKEN_CACHE_SIZE', 100_000, 0, 10_000_000),
    maxBodyBytes: int(env, 'SLUICE_MAX_BODY_BYTES', 1024 * 1024, 1024, 16 * 1024 * 1024),
    timeScale: num(env, 'SLUICE_TIME_SCALE', 1, 1, 1_000_000),
    devAllowInsecureTargets,
    production,
    cacheDir,
    dataDir: dirPath(env, 'SLUICE_DATA_DIR', join(cacheDir, 'state')),
    kafkaStaleMs,
    kafkaRack: kafkaRack(env),
    peers: Object.freeze(peers(env)),
    peerPort: env.SLUICE_PEER_PORT ? int(env, 'SLUICE_PEER_PORT', 0, 0, 65535) : null,
    // A fetch answers as soon as a record arrives: the wait only sets how often an idle node asks.
    stateFetchWaitMs: int(
      env,
      'SLUICE_STATE_FETCH_WAIT_MS',
      Math.min(DEFAULT_STATE_FETCH_WAIT_MS, Math.floor(kafkaStaleMs / 2)),
      1,
      10_000,
    ),
    heapGrowthPercent: env.SLUICE_HEAP_GROWTH_PERCENT ? int(env, 'SLUICE_HEAP_GROWTH_PERCENT', 0, 0, 400) : null,
    keyRotationDays: num(env, 'SLUICE_KEY_ROTATION_DAYS', 30, 0.0001, 365),
    secretRotationDays: num(env, 'SLUICE_SECRET_ROTATION_DAYS', 30, 0.0001, 365),
    secretGraceDays: num(env, 'SLUICE_SECRET_GRACE_DAYS', 1, 0, 7),
    rotationCheckMs: int(env, 'SLUICE_ROTATION_CHECK_MS', 60_000, 50, 3_600_000),
    logLevel,
    clientRateLimit: int(env, 'SLUICE_RATE_LIMIT_PER_CLIENT', 10_000, 0, 10_000_000),
    clientRateBurst: int(env, 'SLUICE_RATE_LIMIT_BURST', 20_000, 1, 100_000_000),
    authFailureRate: int(env, 'SLUICE_AUTH_FAILURE_RATE', 5, 0, 1_000_000),
    authFailureBurst: int(env, 'SLUICE_AUTH_FAILURE_BURST', 20, 1, 1_000_000),
    tokenRatePerMinute: int(env, 'SLUICE_TOKEN_RATE_PER_MINUTE', 600, 0, 60_000_000),
    tokenRateBurst: int(env, 'SLUICE_TOKEN_RATE_BURST', 100, 1, 1_000_000),
    dispatchConcurrency: int(env, 'SLUICE_DISPATCH_CONCURRENCY', 256, 1, 10_000),
    dispatchPerEndpoint: int(env, 'SLUICE_DISPATCH_PER_ENDPOINT', 8, 1, 1000),
    dispatchSlowMs: int(env, 'SLUICE_DISPATCH_SLOW_MS', 2000, 50, 10_000),
    dispatchBuffer: int(env, 'SLUICE_DISPATCH_BUFFER', 20_000, 100, 1_000_000),
    dispatchHoldRecheckMs: int(env, 'SLUICE_DISPATCH_HOLD_RECHECK_MS', 15 * 60_000, 1000, 24 * 3600_000),
    metricsTenantLabel: bool(env, 'SLUICE_METRICS_TENANT_LABEL', true),
    traceExporter: oneOf(env, 'SLUICE_TRACE_EXPORTER', ['none', 'console', 'otlp'] as const, 'none'),
    traceSampleRatio: num(env, 'SLUICE_TRACE_SAMPLE_RATIO', 1, 0, 1),
    otlpEndpoint: url(env, 'SLUICE_OTLP_ENDPOINT') ?? 'http://127.0.0.1:4318/v1/traces',
    webhookDisableAfterMs: num(env, 'SLUICE_WEBHOOK_DISABLE_AFTER_HOURS', 120, 1, 24 * 365) * 3600_000,
    webhookSecretOverlapSeconds: int(env, 'SLUICE_WEBHOOK_SECRET_OVERLAP_SECONDS', 86_400, 0, 7 * 86_400),
    maxEndpointsPerTenant: int(env, 'SLUICE_MAX_ENDPOINTS_PER_TENANT', 1000, 1, 1_000_000),
    trustedProxies: trustedProxies(env),
    deliveryClientCertificate: deliveryClientCertificate(env),
  };
  if (config.stateFetchWaitMs * 2 > config.kafkaStaleMs)
    throw new ConfigError(
      'SLUICE_STATE_FETCH_WAIT_MS',
      `must be at most half of SLUICE_KAFKA_STALE_MS (${config.kafkaStaleMs}), ` +
        `or an idle node would fail closed between two fetches; got ${config.stateFetchWaitMs}`,
    );
  return Object.freeze(config);
}
