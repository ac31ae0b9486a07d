/**
 * What every Sluice process shares: the Kafka connection, the durable producer, the views of
 * the state topics (in memory, or in the process's on-disk store for the endpoints, the DLQ and
 * the audit log; an ingress keeps the attempt history and event type counts in a store beside it,
 * on a consumer of their own: cli/assemble.ts) and the audit writer. `openContext` is where all
 * of it is built: it creates the topics (idempotently), opens the process's view set
 * (core/views.ts), catches the views up and agrees on the cluster's issuer before anything serves
 * (a node then makes sure a signing key exists: cli/assemble.ts).
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Kafka } from './kafka/client.ts';
import type { Config } from './config.ts';
import { systemClock, type Clock } from './clock.ts';
import { createKafka, releasableKafka } from './kafka/client.ts';
import { DurableProducer } from './kafka/producers.ts';
import { ensureTopics } from './kafka/topic-admin.ts';
import { StateConsumer } from './kafka/state-consumer.ts';
import { Heartbeat } from './kafka/heartbeat.ts';
import { ViewChanges } from './kafka/view-changes.ts';
import { topicNames, topicSpecs, type TopicNames } from './topics.ts';
import type { KeyRing } from './tokens/key-ring.ts';
import type { ClientRegistry } from './clients/client-registry.ts';
import type { RevocationList, RevocationRecord } from './clients/revocation-list.ts';
import { TokenService } from './tokens/token-service.ts';
import { agreeOnIssuer } from './tokens/cluster-issuer.ts';
import type { EndpointRegistry } from './webhooks/endpoint-registry.ts';
import type { DlqView } from './webhooks/dlq-view.ts';
import type { EventIdView } from './webhooks/idempotency.ts';
import type { RecoveryView } from './webhooks/recovery-jobs.ts';
import type { AuditView } from './audit/audit-view.ts';
import { AuditWriter } from './audit/audit-writer.ts';
import { buildViews, notOpened, type ViewSet } from './views.ts';
import { SingleFlight } from './single-flight.ts';
import { createLogger, type Logger } from './log.ts';
import { Metrics } from './metrics.ts';
import { ConfigError, unavailable } from './errors.ts';
import { ViewStore } from './store/view-store.ts';
import { claimStoreDir, storeName, type StoreDir } from './store/location.ts';
import { stopStep } from './stop-steps.ts';

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
  /** The audit chain as this node read it (GET /v1/audit, the writer's tail). */
  auditView: AuditView;
  /** The one writer of this process's audit entries (core/audit/audit-log.ts appendAudit). */
  audit: AuditWriter;
  /** Idempotency claims of published event ids (core/webhooks/idempotency.ts). */
  eventIds: EventIdView;
  /** Recovery jobs (core/webhooks/recovery-jobs.ts), read from `sluice.recoveries`. */
  recoveries: RecoveryView;
  /** Revocations this process is writing, by client id: a second request joins the first. */
  revoking: SingleFlight<RevocationRecord>;
  /** The view set this process opened (core/views.ts); the others throw on use. */
  views: ViewSet;
  state: StateConsumer;
  /** Announced whenever one of this process's state consumers applied a batch: waitFor listens here. */
  changes: ViewChanges;
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
  /** Which views this process keeps (core/views.ts VIEW_SETS); default 'node', all of them. */
  views?: ViewSet;
  component?: string;
  /** Process metrics (CPU, memory, event loop) on /metrics: on for a serving node. */
  processMetrics?: boolean;
  /**
   * Whether this process answers requests that fail closed when its views lose Kafka (an
   * ingress; the default): then its views keep in contact (StateConsumerOptions.failClosed).
   */
  failClosed?: boolean;
}

export const DAY_MS = 24 * 3600 * 1000;

export async function openContext(config: Readonly<Config>, opts: ContextOptions): Promise<Context> {
  const clock = opts.clock ?? systemClock;
  const log = createLogger(config.logLevel, opts.component ?? 'sluice');
  const kafka = createKafka(opts.brokers, config.kafkaClientId, config.kafkaRack);
  const topics = topicNames(config.topicPrefix);
  const strict = config.timeScale !== 1;
  await ensureTopics(kafka, topicSpecs(config.topicPrefix, config.topicPartitions, config.timeScale), { strict });
  const producer = new DurableProducer(kafka);
  await producer.connect();
  const views = buildViews(opts.views ?? 'node', topics, config.masterKey, clock);
  const { keys, clients, revocations, issuers, endpoints, dlq } = views;
  const metrics = new Metrics({ tenantLabel: config.metricsTenantLabel, processMetrics: opts.processMetrics });
  const changes = new ViewChanges();
  const storeDir = claimDataDir(config, opts.component ?? 'sluice');
  if (storeDir.temporary)
    log.info("another live process holds this process name's view store: rebuilding the views in a fresh directory", {
      path: storeDir.path,
    });
  const store = await ViewStore.open(storeDir.path).catch((err) => {
    storeDir.release();
    throw new ConfigError(
      'SLUICE_DATA_DIR',
      `cannot open the view store in ${storeDir.path}: ${(err as Error).message}`,
    );
  });
  // Its own client, let go once the views stop: their leaves are not waited for.
  const viewClient = releasableKafka(opts.brokers, config.kafkaClientId, config.kafkaRack);
  const state = new StateConsumer(viewClient.kafka, views.opened, {
    groupPrefix: config.topicPrefix,
    changes,
    maxWaitMs: config.stateFetchWaitMs,
    failClosed: opts.failClosed,
    freshness: config.kafkaRack ? 'heartbeat' : 'fetch',
    // The DLQ and the audit chain come in bursts (a bulk replay, a busy tenant) and cost a store
    // write per record: read apart, they never hold back a revocation.
    apart: [topics.dlq, topics.audit],
    onError: (err) => log.error('state view error', { error: err.message }),
    onTransient: (err) => log.info('state views retrying after a transient error', { error: err.message }),
    onRebuilt: () => log.info('state views reconnected: a new consumer replaced the one kafkajs gave up'),
    onProgress: (left, total) =>
      log.info('catching up the state views', { records_left: Number(left), records_total: Number(total) }),
    store,
  });
  let issuer: string;
  try {
    await state.start();
    issuer = await agreeOnIssuer(config, issuers, producer, (check, what) => waitFor(changes, check, 10_000, what));
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
  if (views.has('dlq')) {
    metrics.gauge(
      'sluice_dlq_entries',
      'Dead-lettered deliveries waiting (not replayed, not expired), by tenant.',
      () => [...dlq.sizes(clock.now())].map(([tenant, n]) => [{ tenant: metrics.tenant(tenant) }, n]),
      ['tenant'],
    );
  }
  if (views.has('endpoints')) {
    metrics.gauge(
      'sluice_endpoints',
      'Webhook endpoints by state.',
      () => Object.entries(endpoints.countByState()).map(([s, n]) => [{ state: s }, n]),
      ['state'],
    );
  }
  const transactionalId = `${config.topicPrefix}.audit-writer`;
  const audit = views.has('audit')
    ? new AuditWriter({ kafka, topic: topics.audit, transactionalId, view: views.audit, state, clock, log })
    : notOpened<AuditWriter>('the audit writer', views.set);
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
    auditView: views.audit,
    audit,
    eventIds: views.eventIds,
    recoveries: views.recoveries,
    revoking: new SingleFlight(),
    views: views.set,
    state,
    changes,
    store,
    log,
    closers: [],
    async close() {
      const closers = ctx.closers.splice(0).reverse();
      for (const [i, c] of closers.entries())
        await stopStep(`context: closer ${i + 1} of ${closers.length}`, c).catch(() => {});
      if (views.has('audit')) await stopStep('context: audit writer', () => audit.close()).catch(() => {});
      await stopStep('context: state views', () => state.stop()).catch(() => {});
      viewClient.release();
      await store.close().catch(() => {});
      storeDir.release();
      await stopStep('context: producer', () => producer.disconnect()).catch(() => {});
    },
  };
  if (config.kafkaRack) {
    // A local replica answers fetches even when its region is cut off: contact is proven by a
    // heartbeat written through the cluster and read back (core/kafka/heartbeat.ts).
    const node = `${config.kafkaRack}-${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
    const everyMs = Math.max(50, Math.min(1000, Math.floor(config.kafkaStaleMs / 4)));
    const heartbeat = new Heartbeat(producer, topics.revocations, node, everyMs, (at) => state.heard(at));
    revocations.onHeartbeat = (key, value) => heartbeat.read(key, value);
    heartbeat.start();
    ctx.closers.push(() => heartbeat.stop());
  }
  return ctx;
}

function claimDataDir(config: Readonly<Config>, component: string): StoreDir {
  try {
    return claimStoreDir(config.dataDir, config.topicPrefix, storeName(component));
  } catch (err) {
    throw new ConfigError('SLUICE_DATA_DIR', `cannot use ${config.dataDir}: ${(err as Error).message}`);
  }
}

/**
 * Waits until `check` holds (this node's view caught up with a write of our own), re-checking it
 * whenever a state consumer announces an applied batch on `changes` (ctx.changes). Kafka took the
 * write but the view lags: to an API caller that is a 503 to retry, never a 500.
 */
export async function waitFor(
  changes: ViewChanges,
  check: () => boolean,
  timeoutMs = 10_000,
  what = 'state',
): Promise<void> {
  if (!(await changes.until(check, timeoutMs)))
    throw unavailable(`${what} did not become visible in this node's view within ${timeoutMs} ms`);
}

/**
 * Like waitFor, for a view that has much to apply first (a bulk replay's markers): waits as long
 * as `progress` keeps moving, and fails only after `stallMs` without either `check` or progress.
 */
export async function waitForWhileMoving(
  changes: ViewChanges,
  check: () => boolean,
  progress: () => number,
  stallMs = 10_000,
  what = 'state',
): Promise<void> {
  for (;;) {
    const at = progress();
    if (!(await changes.until(() => check() || progress() !== at, stallMs)))
      throw unavailable(
        `${what} did not become visible in this node's view: its view made no progress for ${stallMs} ms`,
      );
    if (check()) return;
  }
}

/** What writing a state record reads of the process's context. */
export type WriteStateDeps = Pick<Context, 'producer' | 'changes'>;

/** Writes a state record (null: a tombstone) and answers only once this node's view shows it. */
export async function writeState(
  ctx: WriteStateDeps,
  topic: string,
  key: string,
  value: unknown,
  visible: () => boolean,
  what: string,
): Promise<void> {
  await ctx.producer.sendJson(topic, key, value);
  await waitFor(ctx.changes, visible, 10_000, what);
}
