/**
 * What the fan-out saw of endpoint filters failing to evaluate (each failure is no match), made
 * visible on the endpoint (`filter_errors` on GET /v1/webhooks/endpoints/{id}: how many, the newest
 * error) by writing it to the endpoint's record, rarely: an endpoint's first failure at once (so a
 * tenant who just saved a broken filter sees it in a second), later ones gathered and written at
 * most once per FLUSH_MS per endpoint and process. Counts written for a filter that was changed
 * since are dropped (core/webhooks/endpoint-service.ts recordFilterErrors). Best effort: counts
 * not written yet when a process dies are lost; the Prometheus counter
 * sluice_webhook_filter_evaluations_total{outcome="error"} counts each one as it happens.
 *
 *   const errors = FilterErrorReports.of(ctx);
 *   errors.note(endpoint, 'field not found: total', now); // per failed evaluation
 *   await errors.stop();                                  // writes what it holds
 */
import type { Context } from '../core/context.ts';
import type { Logger } from '../core/log.ts';
import { type HealthWriteDeps, recordFilterErrors } from '../core/webhooks/endpoint-service.ts';
import type { EndpointRecord } from '../core/webhooks/records.ts';

/** The least time between two writes of one endpoint's filter errors by one process. */
export const FLUSH_MS = 10_000;

/** Adds `count` failures of `filter` (the newest `last`) to the endpoint's record. */
export type WriteFilterErrors = (
  id: string,
  filter: string,
  count: number,
  last: { at: number; error: string },
) => Promise<void>;

interface Pending {
  filter: string;
  count: number;
  last: { at: number; error: string };
}

export class FilterErrorReports {
  private readonly pending = new Map<string, Pending>();
  /** When each endpoint's errors were last written (kept FLUSH_MS). */
  private readonly written = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;
  private readonly writes = new Set<Promise<void>>();

  constructor(
    private readonly writeErrors: WriteFilterErrors,
    private readonly log: Pick<Logger, 'warn'>,
    private readonly flushMs = FLUSH_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** Writing to the endpoint records of `ctx`. */
  static of(ctx: HealthWriteDeps & Pick<Context, 'log'>): FilterErrorReports {
    return new FilterErrorReports(
      (id, filter, count, last) => recordFilterErrors(ctx, id, filter, count, last),
      ctx.log,
    );
  }

  note(ep: Pick<EndpointRecord, 'id' | 'filter'>, error: string, at: number): void {
    if (!ep.filter) return;
    const held = this.pending.get(ep.id);
    if (held && held.filter === ep.filter) {
      held.count++;
      held.last = { at, error };
    } else this.pending.set(ep.id, { filter: ep.filter, count: 1, last: { at, error } });
    const lastWrite = this.written.get(ep.id);
    if (lastWrite === undefined || this.now() - lastWrite >= this.flushMs) this.write(ep.id);
    else if (!this.timer) {
      this.timer = setTimeout(() => this.flush(), this.flushMs);
      this.timer.unref();
    }
  }

  /** Writes every endpoint's gathered errors now. */
  flush(): void {
    clearTimeout(this.timer ?? undefined);
    this.timer = null;
    for (const id of [...this.pending.keys()]) this.write(id);
    const cut = this.now() - this.flushMs;
    for (const [id, at] of this.written) if (at < cut) this.written.delete(id);
  }

  private write(id: string): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    this.written.set(id, this.now());
    const done = this.writeErrors(id, p.filter, p.count, p.last)
      .catch((err: unknown) =>
        this.log.warn('filter errors could not be written to the endpoint', {
          endpoint_id: id,
          count: p.count,
          error: (err as Error).message,
        }),
      )
      .finally(() => this.writes.delete(done));
    this.writes.add(done);
  }

  /** Writes what is held and waits for the writes under way. */
  async stop(): Promise<void> {
    this.flush();
    await Promise.all([...this.writes]);
  }
}
