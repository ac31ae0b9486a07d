/**
 * What attempts say about their endpoint: a 410 Gone disables it at once; every attempt failing
 * for SLUICE_WEBHOOK_DISABLE_AFTER_HOURS (scaled) disables it too.
 *
 * Since when an endpoint has failed is kept in memory per dispatcher process, so a flapping
 * endpoint (failures and successes mixed) costs no writes at all. Once an outage has lasted an
 * hour (scaled) it is checkpointed as `failing_since` on the endpoint record, so a restart or
 * another dispatcher carries on counting from there, and the first success after it clears it.
 * At most one write per endpoint is in flight from a process at a time.
 */
import type { Context } from '../core/context.ts';
import type { AttemptOutcome } from '../outbound/attempt.ts';
import {
  type DisableDeps,
  disableEndpoint,
  type HealthWriteDeps,
  recordFailingSince,
} from '../core/webhooks/endpoint-service.ts';

/** What judging attempts reads of the process's context, with the endpoint writes it makes. */
export type HealthDeps = Pick<Context, 'config' | 'endpoints' | 'log'> & DisableDeps & HealthWriteDeps;

export const CHECKPOINT_AFTER_MS = 3600_000;

export class EndpointHealth {
  private readonly failingSince = new Map<string, number>();
  private readonly writing = new Set<string>();

  constructor(private readonly ctx: HealthDeps) {}

  /**
   * Takes an attempt's outcome into account; never throws. Usually synchronous work only; on a
   * 410, a checkpoint or a disable it writes the endpoint record, and the attempt's outcome waits
   * for that write, so deliveries queued behind it already see the endpoint DISABLED.
   */
  async judge(endpointId: string, result: AttemptOutcome, startedAt: number, url?: string): Promise<void> {
    const { ctx } = this;
    try {
      // `url`, where the attempt went: the writes below change nothing once the endpoint has another.
      if (result.status === 410)
        return await this.write(endpointId, () =>
          disableEndpoint(ctx, endpointId, 'the receiver answered 410 Gone', undefined, url),
        );
      const rec = ctx.endpoints.get(endpointId);
      if (rec?.state !== 'ACTIVE' || (url !== undefined && rec.url !== url))
        return void this.failingSince.delete(endpointId);
      const persisted = rec.failing_since ?? null;
      if (result.ok) {
        this.failingSince.delete(endpointId);
        if (persisted !== null) await this.write(endpointId, () => recordFailingSince(ctx, endpointId, null, url));
        return;
      }
      const mine = this.failingSince.get(endpointId) ?? startedAt;
      this.failingSince.set(endpointId, mine);
      const since = persisted === null ? mine : Math.min(persisted, mine);
      const scale = ctx.config.timeScale;
      if (startedAt - since >= ctx.config.webhookDisableAfterMs / scale) {
        const hours = ctx.config.webhookDisableAfterMs / 3600_000;
        const span = hours % 24 === 0 ? `${hours / 24} days` : `${hours} hours`;
        await this.write(endpointId, () =>
          disableEndpoint(
            ctx,
            endpointId,
            `every attempt failed for ${span} (last: ${result.error ?? `HTTP ${result.status}`})`,
            undefined,
            url,
          ),
        );
        this.failingSince.delete(endpointId);
      } else if (persisted === null && startedAt - since >= CHECKPOINT_AFTER_MS / scale) {
        await this.write(endpointId, () => recordFailingSince(ctx, endpointId, since, url));
      }
    } catch (err) {
      ctx.log.error('could not update the endpoint after an attempt', {
        endpoint_id: endpointId,
        error: (err as Error).message,
      });
    }
  }

  /** Runs one write for the endpoint unless one is already under way from this process. */
  private async write(endpointId: string, work: () => Promise<unknown>): Promise<void> {
    if (this.writing.has(endpointId)) return;
    this.writing.add(endpointId);
    try {
      await work();
    } finally {
      this.writing.delete(endpointId);
    }
  }
}
