/**
 * What every Sluice process shares: the Kafka connection, the durable producer, and the views of
 * the state topics (in memory, or in the process's on-disk store for the DLQ and the audit log).
 * `openContext` creates the topics (idempotently), catches the views up and makes sure a signing
 * key exists before anything serves.
 */
import type { Kafka } from 'kafkajs';
import type { Config } from './config.ts';
import { systemClock, type Clock } from './clock.ts';
import { createKafka, DurableProducer, ensureTopics } from './kafka/client.ts';
import { StateConsumer, type StateView } from './kafka/state-consumer.ts';
import { topicNames, topicSpecs, type TopicNames } from './topics.ts';
import { KeyRing } from './tokens/key-ring.ts';
import { ClientRegistry } from './clients/client-registry.ts';
import { RevocationList } from './clients/revocation-list.ts';
import { TokenService } from './tokens/token-service.ts';
import { IssuerView, agreeOnIssuer } from './tokens/cluster-issuer.ts';
import { EndpointRegistry } from './webhooks/endpoint-registry.ts';
import { DlqView } from './webhooks/dlq-view.ts';
import { RUNG_LABELS, DLQ_RETENTION_MS } from './backoff.ts';
import { createLogger, type Logger } from './log.ts';
import { Metrics } from './metrics.ts';
import { ConfigError, SluiceError } from './errors.ts';
import { ViewStore } from './store/view-store.ts';
import { claimStoreDir, storeName, type StoreDir } from './store/location.ts';

export interface Context {
  config: Readonly<Config>;
  brokers: string[];
  clock: Clock;
  kafka: Kafka;
  producer: DurableProducer;
  topics: TopicNames;
  keys: KeyRing;
  clients: ClientRegistry;
  revocations: RevocationList;
  tokens: TokenService;
  /** Webhook endpoints (`sluice.endpoints`): the same instance for ingress routes and the dispatcher. */
  endpoints: EndpointRegistry;
  /** Dead-lettered deliveries (`sluice.dlq`) minus replayed and expired ones: every node answers the DLQ list. */
  dlq: DlqView;
  state: StateConsumer;
  /** The on-disk store of this process's stored views (DLQ, audit); its directory is held until close(). */
  store: ViewStore;
  log: Logger;
  /** The process's one set of counters and gauges, rendered on its admin port. */
  metrics: Metrics;
  /** Run by close() before the state consumer and producer stop (e.g. the audit writer's producer). */
  closers: Array<() => Promise<void>>;
  close(): Promise<void>;
}

export interface ContextOptions {
  brokers: string[];
  clock?: Clock;
  /** More views for the same state consumer (audit, idempotency...). */
  views?: StateView[];
  /**
   * Whether this process materialises the webhook views (endpoints, DLQ). Every node does; an
   * operator command that never reads them (`sluice admin`) does not, so it does not build a
   * DLQ of millions just to create a client. Using an unopened view throws.
   */
  webhookViews?: boolean;
  component?: string;
  /** Process metrics (CPU, memory, event loop) on /metrics: on for a serving node. */
  processMetrics?: boolean;
}

export const DAY_MS = 24 * 3600 * 1000;

export async function openContext(config: Readonly<Config>, opts: ContextOptions): Promise<Context> {
  const clock = opts.clock ?? systemClock;
  const log = createLogger(config.logLevel, opts.component ?? 'sluice');
  const kafka = createKafka(opts.brokers, config.kafkaClientId);
  const topics = topicNames(config.topicPrefix);
  await ensureTopics(kafka, topicSpecs(config.topicPrefix, config.topicPartitions, RUNG_LABELS, DLQ_RETENTION_MS / config.timeScale), { strict: config.timeScale !== 1 });
  const producer = new DurableProducer(kafka);
  await producer.connect();
  const keys = new KeyRing(topics.keys, config.masterKey);
  const clients = new ClientRegistry(topics.clients, config.masterKey);
  const revocations = new RevocationList(topics.revocations);
  const issuers = new IssuerView(topics.keys);
  const metrics = new Metrics({ tenantLabel: config.metricsTenantLabel, processMetrics: opts.processMetrics });
  const webhookViews = opts.webhookViews !== false;
  const endpoints = webhookViews ? new EndpointRegistry(topics.endpoints, config.masterKey) : notOpened<EndpointRegistry>('the endpoints view');
  const dlq = webhookViews ? new DlqView(topics.dlq, clock) : notOpened<DlqView>('the DLQ view');
  const storeDir = claimDataDir(config, opts.component ?? 'sluice');
  if (storeDir.temporary) log.info('another live process holds this process name\'s view store: rebuilding the views in a fresh directory', { path: storeDir.path });
  const store = await ViewStore.open(storeDir.path).catch((err) => {
    storeDir.release();
    throw new ConfigError('SLUICE_DATA_DIR', `cannot open the view store in ${storeDir.path}: ${(err as Error).message}`);
  });
  const state = new StateConsumer(kafka, [keys, issuers, clients, revocations, ...(webhookViews ? [endpoints, dlq] : []), ...(opts.views ?? [])], {
    groupPrefix: config.topicPrefix,
    maxWaitMs: config.stateFetchWaitMs,
    onError: (err) => log.error('state view error', { error: err.message }),
    onProgress: (left, total) => log.info('catching up the state views', { records_left: Number(left), records_total: Number(total) }),
    store,
  });
  let issuer: string;
  try {
    await state.start();
    issuer = await agreeOnIssuer(config, issuers, producer, (check, what) => waitFor(check, 10_000, what));
  } catch (err) {
    await state.stop().catch(() => {});
    await store.close().catch(() => {});
    storeDir.release();
    throw err;
  }
  if (issuer !== config.issuer) log.info("adopting the cluster's issuer (SLUICE_ISSUER is unset)", { issuer });
  const tokens = new TokenService(keys, revocations, clock, {
    issuer,
    audience: config.audience,
    ttlSeconds: config.tokenTtlSeconds,
    clockSkewSeconds: config.clockSkewSeconds,
    cacheSize: config.tokenCacheSize,
  });
  revocations.onChange = (clientId) => {
    tokens.forgetClient(clientId);
    // Revocation lag: written → applied here (only live ones, not the catch-up at start).
    const rec = revocations.get(clientId);
    if (rec && state.ready) {
      const lagMs = Math.max(0, clock.now() - rec.revoked_at);
      metrics.revocationLag.observe(lagMs / 1000);
      log.info('revocation applied', { client_id: clientId, tenant_id: rec.tenant_id, lag_ms: lagMs });
    }
  };
  if (webhookViews) {
    metrics.gauge('sluice_dlq_entries', 'Dead-lettered deliveries waiting (not replayed, not expired), by tenant.', () => [...dlq.sizes(clock.now())].map(([tenant, n]) => [{ tenant: metrics.tenant(tenant) }, n]), ['tenant']);
    metrics.gauge('sluice_endpoints', 'Webhook endpoints by state.', () => Object.entries(endpoints.countByState()).map(([s, n]) => [{ state: s }, n]), ['state']);
  }
  const ctx: Context = {
    metrics,
    config: issuer === config.issuer ? config : Object.freeze({ ...config, issuer }),
    brokers: opts.brokers,
    clock,
    kafka,
    producer,
    topics,
    keys,
    clients,
    revocations,
    tokens,
    endpoints,
    dlq,
    state,
    store,
    log,
    closers: [],
    async close() {
      for (const c of ctx.closers.splice(0).reverse()) await c().catch(() => {});
      await state.stop().catch(() => {});
      await store.close().catch(() => {});
      storeDir.release();
      await producer.disconnect().catch(() => {});
    },
  };
  return ctx;
}

/** Stands in for a view this process did not open: any use is a programming error, said plainly. */
function notOpened<T extends object>(what: string): T {
  return new Proxy({} as T, {
    get(_target, prop) {
      if (prop === 'then' || typeof prop === 'symbol') return undefined;
      throw new SluiceError('INTERNAL', `${what} is not open in this process (openContext with webhookViews: false): cannot use .${String(prop)}`);
    },
  });
}

function claimDataDir(config: Readonly<Config>, component: string): StoreDir {
  try {
    return claimStoreDir(config.dataDir, config.topicPrefix, storeName(component));
  } catch (err) {
    throw new ConfigError('SLUICE_DATA_DIR', `cannot use ${config.dataDir}: ${(err as Error).message}`);
  }
}

/**
 * Waits until `check` holds (this node's view caught up with a write of our own). Kafka took the
 * write but the view lags: to an API caller that is a 503 to retry, never a 500.
 */
export async function waitFor(check: () => boolean, timeoutMs = 10_000, what = 'state'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) {
      const late = `${what} did not become visible in this node's view within ${timeoutMs} ms`;
      throw new SluiceError('UNAVAILABLE', late, {}, { retryAfterSeconds: 1 });
    }
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Writes a state record (null: a tombstone) and answers only once this node's view shows it. */
export async function writeState(ctx: Context, topic: string, key: string, value: unknown, visible: () => boolean, what: string): Promise<void> {
  await ctx.producer.sendJson(topic, key, value);
  await waitFor(visible, 10_000, what);
}
