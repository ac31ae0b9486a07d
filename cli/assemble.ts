/**
 * Wiring: which workers each process role runs and what its routes need (its views are the 'node'
 * view set of core/views.ts, opened by openContext; the routes are the table of
 * ingress/routes/index.ts). The only place that sees core/, ingress/ and dispatcher/ together.
 */
import type { Config } from '../core/config.ts';
import type { Clock } from '../core/clock.ts';
import { join } from 'node:path';
import { applyHeapSettings, heapGrowthFor } from './heap.ts';
import { StateConsumer, type StoredView } from '../core/kafka/state-consumer.ts';
import { topicCatchUp } from '../core/kafka/catch-up.ts';
import { ViewStore } from '../core/store/view-store.ts';
import { openContext, waitFor, type Context } from '../core/context.ts';
import { rotateKeys } from '../core/rotation/key-rotation.ts';
import { startIngress, type Ingress } from '../ingress/server.ts';
import { startAdminServer } from '../ingress/admin-server.ts';
import { startPeerServer } from '../core/clients/revocation-push.ts';
import { releasableKafka } from '../core/kafka/client.ts';
import { relayRevocations } from './workers.ts';
import { loadContract } from '../contracts/contract.ts';
import { compileRequestChecks } from '../contracts/requests.ts';
import type { RequestChecks } from '../ingress/types.ts';
import { AttemptHistory } from '../core/webhooks/attempt-history.ts';
import { EventTypeCounts } from '../core/webhooks/event-type-counts.ts';
import { type DispatcherDeps, startDispatcher } from '../dispatcher/index.ts';
import { type RotationDeps, RotationScheduler } from '../core/rotation/scheduler.ts';
import { startTracing } from '../core/tracing.ts';
import { stopStep } from '../core/stop-steps.ts';

export interface NodeOptions {
  brokers: string[];
  clock?: Clock;
  ingress?: boolean;
  dispatcher?: boolean;
  port?: number;
  adminPort?: number;
}

/** Something a node runs beside (or instead of) its HTTP listener: consumers, schedulers. */
export interface Worker {
  stop(): Promise<void>;
}

export interface SluiceNode {
  ctx: Context;
  ingress: Ingress | null;
  /** Named so tests can reach them (e.g. workers.dispatcher). */
  workers: Record<string, Worker>;
  /** The admin port (/healthz, /readyz, /metrics) of this process. */
  adminPort: number;
  close(): Promise<void>;
}

/**
 * The contract, parsed once, and its request checks, compiled once: the ingress validates every
 * path, query and body through them. Compiled here because ingress/ does not import contracts/.
 */
function requestContract(): { contract: unknown; checks: RequestChecks } {
  const contract = loadContract();
  return { contract, checks: compileRequestChecks(contract) };
}

/** Background workers by role. */
async function startWorkers(
  ctx: RotationDeps & DispatcherDeps,
  roles: { ingress: boolean; dispatcher: boolean },
): Promise<Record<string, Worker>> {
  const workers: Record<string, Worker> = {};
  if (roles.ingress) workers.rotation = await RotationScheduler.start(ctx);
  if (roles.dispatcher) workers.dispatcher = await startDispatcher(ctx);
  return workers;
}

/** The attempt history's fetch wait while no report comes (a record ends it at once). */
const HISTORY_IDLE_WAIT_MS = 3000;

/**
 * The attempt history reads its busy topic with a consumer of its own that, while reports stream,
 * waits for 64 KB or a second per fetch: on the state consumer (whose fetches the first record
 * answers) the stream of reports turned every idle fetch into hundreds of small ones a second
 * across all the state topics, which doubled the CPU a delivery costs. The history is for people;
 * 1 s is fresh. After a quiet spell its fetch waits 3 s for any record, so an idle node asks a
 * third as often and the first report after the quiet is read at once.
 * The event type counts (core/webhooks/event-type-counts.ts), as busy and for people too, share it.
 */
async function startHistory(
  ctx: Pick<Context, 'changes' | 'closers' | 'config' | 'log' | 'store'>,
  brokers: string[],
  views: StoredView[],
): Promise<StateConsumer> {
  // Its own store beside the node's: a store is emptied whole when a topic it follows
  // was re-created, which must not take the DLQ and the audit views with it.
  const store = await ViewStore.open(join(ctx.store.path, 'history'));
  ctx.closers.push(() => store.close());
  // Its own client, let go once it stops: its leave is not waited for (core/kafka/client.ts).
  const client = releasableKafka(brokers, ctx.config.kafkaClientId, ctx.config.kafkaRack);
  const history = new StateConsumer(client.kafka, views, {
    groupPrefix: `${ctx.config.topicPrefix}-history`,
    maxWaitMs: HISTORY_IDLE_WAIT_MS,
    batching: { minBytes: 64 * 1024, waitMs: 1000 },
    contactHeartbeatMs: 3000,
    store,
    // Announces into the node's changes, so waitFor sees this view's batches too.
    changes: ctx.changes,
    onError: (err) => ctx.log.error('attempt history view error', { error: err.message }),
  });
  ctx.closers.push(async () => {
    await history.stop();
    client.release();
  });
  await history.start();
  return history;
}

export async function startNode(config: Readonly<Config>, opts: NodeOptions): Promise<SluiceNode> {
  const roles = { ingress: opts.ingress !== false, dispatcher: opts.dispatcher === true };
  const component = roles.ingress ? 'ingress' : 'dispatcher';
  applyHeapSettings(heapGrowthFor(config, roles));
  // Tracing first, so nothing the node does is left out (a no-op when SLUICE_TRACE_EXPORTER=none).
  const tracing = await startTracing({
    serviceName: `sluice-${component}`,
    exporter: config.traceExporter,
    sampleRatio: config.traceSampleRatio,
    otlpEndpoint: config.otlpEndpoint,
  });
  const ctxOptions = {
    brokers: opts.brokers,
    clock: opts.clock,
    component,
    views: 'node',
    processMetrics: true,
    failClosed: roles.ingress,
  } as const;
  const ctx = await openContext(config, ctxOptions);
  try {
    return await startOn(ctx, config, opts, roles, tracing);
  } catch (err) {
    // A start that fails (a port taken, Kafka gone) closes what it opened: else its consumers and
    // timers keep the process alive, and a caller that handles the error cannot end cleanly.
    await ctx.close().catch(() => {});
    await tracing.stop().catch(() => {});
    throw err;
  }
}

async function startOn(
  ctx: Context,
  config: Readonly<Config>,
  opts: NodeOptions,
  roles: { ingress: boolean; dispatcher: boolean },
  tracing: Awaited<ReturnType<typeof startTracing>>,
): Promise<SluiceNode> {
  // Only a node that serves the API keeps the attempt history.
  const attempts = new AttemptHistory(ctx.topics.attempts, opts.clock);
  const eventTypes = new EventTypeCounts(ctx.topics.eventTypes, ctx.clock, (tenant, first) => {
    ctx.metrics.eventTypesIgnored.inc();
    if (first) ctx.log.warn('a tenant has more event types than its list holds; the others are ignored', { tenant });
  });
  const history = roles.ingress ? await startHistory(ctx, opts.brokers, [attempts, eventTypes]) : null;
  // Every node makes sure a key signs now (the same audited step the rotation scheduler runs).
  await rotateKeys(ctx);
  await waitFor(ctx.changes, () => ctx.keys.signingKey(ctx.clock.now()) !== null, 10_000, 'a signing key');
  let ingress: Ingress | null = null;
  if (roles.ingress) {
    // The route table is ingress/routes/index.ts; what it needs beyond the context is wired here.
    // A list of event types reads the topic's end first: alike on every worker and node.
    const eventTypesCaughtUp = topicCatchUp(ctx.kafka, history!, ctx.topics.eventTypes);
    ctx.closers.push(() => eventTypesCaughtUp.close());
    const routes = { attempts, eventTypes, eventTypesCaughtUp, ...requestContract() };
    ingress = await startIngress(ctx, { port: opts.port, adminPort: opts.adminPort, routes });
    if (config.peerPort !== null) {
      // Revocations pushed by other regions' nodes (core/clients/revocation-push.ts). With
      // --workers N the first worker takes the port and passes what it applies to the others.
      const relay = relayRevocations((r) => ctx.revocations.provisional(r.client_id, r.revoked_at, r.until));
      const peer = await startPeerServer(ctx, config.peerHost, config.peerPort, relay).catch((err: Error) => {
        ctx.log.warn('the peer port is not served by this process', { error: err.message });
        return null;
      });
      if (peer) ctx.closers.push(() => peer.close());
    }
  }
  let workers: Awaited<ReturnType<typeof startWorkers>> = {};
  let admin: Awaited<ReturnType<typeof startAdminServer>> | null = null;
  try {
    workers = await startWorkers(ctx, roles);
    // A process without the ingress still serves /healthz, /readyz and /metrics on its admin port.
    if (!ingress)
      admin = await startAdminServer(config.adminHost, opts.adminPort ?? config.adminPort, ctx.metrics, {
        ready: () => ctx.state.ready,
        problem: () => null,
        details: () => ({ role: 'dispatcher' }),
      });
  } catch (err) {
    await ingress?.close().catch(() => {});
    await Promise.all(Object.values(workers).map((w) => w.stop().catch(() => {})));
    throw err;
  }
  return {
    ctx,
    ingress,
    workers,
    adminPort: ingress ? ingress.adminPort : admin!.port,
    async close() {
      await stopStep('ingress', async () => ingress?.close());
      await admin?.close();
      // A dispatcher's group consumers wait out a fetch in flight (up to 3 s idle) before they
      // leave their groups (the rotation leader ends its own with a record): side by side, a node
      // stops in one such wait, not one per worker.
      await Promise.all(
        Object.entries(workers).map(([name, w]) => stopStep(`worker ${name}`, () => w.stop()).catch(() => {})),
      );
      await ctx.close();
      await stopStep('tracing', () => tracing.stop());
    },
  };
}
