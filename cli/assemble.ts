/**
 * Wiring: which views, routes and workers each process role runs. The only place that sees
 * core/, ingress/ and dispatcher/ together.
 */
import type { Config } from '../core/config.ts';
import type { Clock } from '../core/clock.ts';
import { openContext, type Context } from '../core/context.ts';
import { startIngress, type Ingress } from '../ingress/server.ts';

export interface NodeOptions {
  brokers: string[];
  clock?: Clock;
  ingress?: boolean;
  dispatcher?: boolean;
  port?: number;
  adminPort?: number;
}

export interface SluiceNode {
  ctx: Context;
  ingress: Ingress | null;
  close(): Promise<void>;
}

export async function startNode(config: Readonly<Config>, opts: NodeOptions): Promise<SluiceNode> {
  const ctx = await openContext(config, { brokers: opts.brokers, clock: opts.clock, component: opts.ingress ? 'ingress' : 'dispatcher', ensureKeys: true });
  const ingress = opts.ingress === false ? null : await startIngress(ctx, { port: opts.port, adminPort: opts.adminPort, routes: [] });
  return {
    ctx,
    ingress,
    async close() {
      await ingress?.close();
      await ctx.close();
    },
  };
}
