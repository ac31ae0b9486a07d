/**
 * Wiring: which views, routes and workers each process role runs. The only place that sees
 * core/, ingress/ and dispatcher/ together. Each capability adds itself to the three lists below.
 */
import type { Config } from '../core/config.ts';
import type { Clock } from '../core/clock.ts';
import type { StateView } from '../core/kafka/state-consumer.ts';
import { openContext, type Context } from '../core/context.ts';
import { startIngress, type Ingress } from '../ingress/server.ts';
import type { Route } from '../ingress/types.ts';

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
  close(): Promise<void>;
}

/** Extra state views every node materializes (endpoints, DLQ, audit...). */
function buildViews(_config: Readonly<Config>): StateView[] {
  return [];
}

/** Control-plane routes beyond the auth routes (webhooks, DLQ, revocation, audit...). */
function buildRoutes(_ctx: Context): Route[] {
  return [];
}

/** Background workers by role. */
async function startWorkers(_ctx: Context, _roles: { ingress: boolean; dispatcher: boolean }): Promise<Record<string, Worker>> {
  const workers: Record<string, Worker> = {};
  return workers;
}

export async function startNode(config: Readonly<Config>, opts: NodeOptions): Promise<SluiceNode> {
  const roles = { ingress: opts.ingress !== false, dispatcher: opts.dispatcher === true };
  const ctx = await openContext(config, { brokers: opts.brokers, clock: opts.clock, component: roles.ingress ? 'ingress' : 'dispatcher', ensureKeys: true, views: buildViews(config) });
  const ingress = roles.ingress ? await startIngress(ctx, { port: opts.port, adminPort: opts.adminPort, routes: buildRoutes(ctx) }) : null;
  const workers = await startWorkers(ctx, roles);
  return {
    ctx,
    ingress,
    workers,
    async close() {
      await ingress?.close();
      for (const w of Object.values(workers).reverse()) await w.stop().catch(() => {});
      await ctx.close();
    },
  };
}
