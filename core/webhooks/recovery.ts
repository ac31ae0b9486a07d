/**
 * Recovery of a time window (`POST /v1/webhooks/endpoints/{id}/recover`): every dead-lettered
 * delivery of one endpoint whose last attempt fell in [since, until) is re-sent with a fresh attempt
 * count, at most once, as a job at its own pace.
 *
 * - The job's state lives on `sluice.recoveries` (compacted, one record per job, core/webhooks/recovery-jobs.ts),
 *   rewritten by its runner every RECOVERY_PROGRESS_MS: any node answers GET from its view.
 * - At most once: an entry is re-sent the way DLQ replay re-sends it (core/webhooks/dlq-replay.ts
 *   resendEntries: the fresh delivery, then the replay marker), so once sent it leaves the DLQ on
 *   every node and neither this job nor a later one finds it again. A still-failing delivery (found
 *   in the attempt history, its event read back from `sluice.events`) is re-sent, then marked
 *   superseded on `sluice.recoveries`: the dispatcher drops its retries, later jobs skip it.
 * - Two overlapping jobs of one endpoint: the one whose record came first in the topic runs; the
 *   other's writer deletes its record and answers 409 (every node decides alike, from offsets).
 * - Pacing: token buckets per node, one per endpoint at SLUICE_RECOVERY_SHARE of its
 *   `rate_limit_per_second` (or of SLUICE_RECOVERY_CAPACITY_PER_SECOND without one), one per tenant at
 *   the share of SLUICE_RECOVERY_CAPACITY_PER_SECOND; a job sends what both allow, nothing while its
 *   endpoint is paused. Live deliveries keep the rest of the capacity.
 * - Progress: `found` and `sent` on the job's record; `delivered` and `failed` from the attempt
 *   history, where every attempt of a delivery tagged with the job counts (attempt-digest.ts).
 *
 *   const job = await startRecovery(ctx, { tenantId, endpointId, since, until, actor });
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Context } from '../context.ts';
import { waitFor } from '../context.ts';
import { SluiceError } from '../errors.ts';
import { appendAudit, type AuditDeps } from '../audit/audit-log.ts';
import { newId } from '../secrets.ts';
import type { Position } from '../paging.ts';
import { resendEntries, type ResendDeps } from './dlq-replay.ts';
import type { DeliveryRecord, DlqEntry, EventRecord } from './records.ts';
import type { DlqView } from './dlq-view.ts';
import type { RecoveryView } from './recovery-jobs.ts';
import { HISTORY_PER_ENDPOINT, type AttemptHistory, type AttemptRecord } from './attempt-history.ts';
import { newDelivery } from './deliveries.ts';
import { lookupEvents, type LookupDeps } from './event-lookup.ts';
import { retryLadder } from './retry-policy.ts';
import { producing } from '../tracing.ts';
import { RECOVERY_PROGRESS_MS, SUPERSEDED_PREFIX, type RecoveryJob, type SupersededMarker } from './recovery-jobs.ts';

export { validateWindow } from './recovery-jobs.ts';

const iso = (ms: number) => new Date(ms).toISOString();

/** How often a runner looks for tokens. */
const TICK_MS = 100;
/** The most a bucket holds, in seconds of its rate. */
const BURST_SECONDS = 0.3;
/** DLQ entries read per page. */
const PAGE = 500;

export interface RecoveryRequest {
  tenantId: string;
  endpointId: string;
  since: number;
  until: number;
  actor: string;
  /** What the attempt history shows of the endpoint (an ingress's): its still-failing deliveries are found there. */
  history?: Pick<AttemptHistory, 'attempts'>;
}

/** A delivery whose newest attempt failed and went back on the retry ladder (not dead-lettered yet). */
export interface StillFailing {
  delivery_id: string;
  event_id: string;
  /** Its newest attempt (ms). */
  at: number;
}

/**
 * The endpoint's still-failing deliveries whose newest attempt lies in the window, from the attempt
 * history (its newest HISTORY_PER_ENDPOINT attempts: a bound the docs state), leaving out those a
 * recovery re-sent already.
 */
export function stillFailing(
  recoveries: RecoveryView,
  history: Pick<AttemptHistory, 'attempts'>,
  r: Pick<RecoveryRequest, 'tenantId' | 'endpointId' | 'since' | 'until'>,
): StillFailing[] {
  const newest = new Map<string, AttemptRecord>();
  for (const a of history.attempts(r.tenantId, r.endpointId, { limit: HISTORY_PER_ENDPOINT }))
    if (!newest.has(a.delivery_id)) newest.set(a.delivery_id, a); // newest first
  return [...newest.values()]
    .filter((a) => !a.ok && a.outcome === 'retry' && a.at >= r.since && a.at < r.until)
    .filter((a) => !recoveries.isSuperseded(a.delivery_id))
    .map((a) => ({ delivery_id: a.delivery_id, event_id: a.event_id, at: a.at }))
    .sort((a, b) => a.at - b.at);
}

/** The pace of a job of this endpoint: the smaller of its endpoint's and its tenant's share (deliveries a second). */
export function recoveryRate(
  ctx: Pick<Context, 'config' | 'endpoints'>,
  endpointId: string,
): { endpoint: number; tenant: number } {
  const { recoveryShare: share, recoveryCapacityPerSecond: capacity } = ctx.config;
  const limit = ctx.endpoints.get(endpointId)?.rate_limit_per_second ?? null;
  return { endpoint: share * (limit ?? capacity), tenant: share * capacity };
}

/** The entries a job of this window would re-send now, counted from the DLQ's endpoint index. */
function* inWindow(dlq: DlqView, r: RecoveryRequest, after: Position | null, nowMs: number): Generator<DlqEntry> {
  let cursor = after;
  for (;;) {
    const page = dlq.list(r.tenantId, { endpoint_id: r.endpointId, limit: PAGE, after: cursor }, nowMs);
    for (const e of page.data) {
      const at = Date.parse(e.last_attempt_at);
      if (at >= r.since && at < r.until) yield e;
    }
    if (page.next_cursor === null || page.data.length === 0) return;
    const last = page.data[page.data.length - 1];
    cursor = { key: Date.parse(last.dead_lettered_at), id: last.id };
  }
}

/** Token buckets of one node: per endpoint and per tenant. */
class Pacer {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  /** Up to `want` tokens that both buckets hold now, taken from both. */
  take(endpointKey: string, endpointRate: number, tenantKey: string, tenantRate: number, want: number): number {
    const a = this.refill(endpointKey, endpointRate);
    const b = this.refill(tenantKey, tenantRate);
    const n = Math.max(0, Math.min(want, Math.floor(a.tokens), Math.floor(b.tokens)));
    a.tokens -= n;
    b.tokens -= n;
    return n;
  }

  private refill(key: string, rate: number) {
    const now = performance.now();
    // BURST_SECONDS' worth at once (at least one): a tick that waited on Kafka catches up, and no
    // second sees more than the rate and this burst.
    const burst = Math.max(1, rate * BURST_SECONDS);
    let b = this.buckets.get(key);
    if (!b) {
      b = { tokens: Math.min(1, burst), at: now };
      this.buckets.set(key, b);
    }
    b.tokens = Math.min(burst, b.tokens + ((now - b.at) / 1000) * rate);
    b.at = now;
    return b;
  }
}

interface NodeRecoveries {
  pacer: Pacer;
  runners: Set<Runner>;
}

const perContext = new WeakMap<Pick<Context, 'closers'>, NodeRecoveries>();

function nodeOf(ctx: Pick<Context, 'closers'>): NodeRecoveries {
  let n = perContext.get(ctx);
  if (!n) {
    const node: NodeRecoveries = { pacer: new Pacer(), runners: new Set() };
    perContext.set(ctx, node);
    // Before the producer stops: each running job is stopped and written `interrupted`.
    ctx.closers.push(async () => {
      await Promise.all([...node.runners].map((r) => r.stop()));
    });
    n = node;
  }
  return n;
}

/** What a recovery job reads of the process's context, from its start to its runner's last write. */
export type RecoveryDeps = RunnerDeps & AuditDeps;

/** Writes the job, wins or loses against overlapping ones, audits it and starts its runner. */
export async function startRecovery(ctx: RecoveryDeps, r: RecoveryRequest): Promise<RecoveryJob> {
  const ep = ctx.endpoints.forTenant(r.endpointId, r.tenantId);
  if (!ep) throw new SluiceError('NOT_FOUND', `no webhook endpoint ${r.endpointId}`);
  if (ep.state === 'DISABLED')
    throw new SluiceError(
      'CONFLICT',
      `endpoint ${ep.id} is DISABLED: verify it first, or its deliveries go back to the DLQ unattempted`,
    );
  const now = ctx.clock.now();
  let found = 0;
  for (const _ of inWindow(ctx.dlq, r, null, now)) found++;
  const failing = r.history ? stillFailing(ctx.recoveries, r.history, r) : [];
  found += failing.length;
  const rate = recoveryRate(ctx, ep.id);
  const job: RecoveryJob = {
    kind: 'recovery',
    id: newId('rcv'),
    tenant_id: r.tenantId,
    endpoint_id: ep.id,
    since: r.since,
    until: r.until,
    state: 'running',
    found,
    sent: 0,
    rate_per_second: Math.min(rate.endpoint, rate.tenant),
    actor: r.actor,
    created_at: now,
    updated_at: now,
    finished_at: null,
    error: null,
  };
  await writeJob(ctx, job);
  const other = ctx.recoveries.overlapping(job, ctx.clock.now());
  if (other) {
    await ctx.producer.sendJson(ctx.topics.recoveries, job.id, null);
    throw new SluiceError(
      'CONFLICT',
      `recovery ${other.id} of endpoint ${ep.id} is running over an overlapping window ` +
        `(${new Date(other.since).toISOString()} to ${new Date(other.until).toISOString()})`,
      { job_id: other.id },
    );
  }
  await appendAudit(ctx, {
    tenant_id: r.tenantId,
    actor: r.actor,
    action: 'endpoint.recovery_started',
    subject: `${ep.id} ${job.id}`,
    reason:
      `re-send ${found} failed deliveries (${failing.length} still failing) last attempted in ` +
      `[${iso(r.since)}, ${iso(r.until)})`,
  });
  const runner = new Runner(ctx, job, r, failing);
  const node = nodeOf(ctx);
  node.runners.add(runner);
  runner.done = runner.run().finally(() => node.runners.delete(runner));
  return job;
}

type WriteJobDeps = Pick<Context, 'changes' | 'producer' | 'recoveries' | 'topics'>;

async function writeJob(ctx: WriteJobDeps, job: RecoveryJob): Promise<void> {
  await ctx.producer.sendJson(ctx.topics.recoveries, job.id, job);
  await waitFor(ctx.changes, () => ctx.recoveries.has(job.id, job.updated_at), 10_000, 'the recovery job');
}

/** What a job's runner reads of the process's context. */
type RunnerDeps = Pick<Context, 'closers' | 'clock' | 'config' | 'dlq' | 'endpoints' | 'log'> &
  LookupDeps &
  ResendDeps &
  WriteJobDeps;

class Runner {
  private stopping = false;
  done: Promise<void> = Promise.resolve();
  private buffer: DlqEntry[] = [];
  private cursor: Position | null = null;
  private exhausted = false;

  /** The still-failing deliveries with their events, once read back: re-sent before the DLQ's entries. */
  private events: { delivery_id: string; event: EventRecord }[] = [];

  constructor(
    private readonly ctx: RunnerDeps,
    private readonly job: RecoveryJob,
    private readonly req: RecoveryRequest,
    private readonly failing: StillFailing[] = [],
  ) {}

  /** Reads the still-failing deliveries' events back; those no longer found are left out of `found`. */
  private async loadFailing(): Promise<void> {
    if (this.failing.length === 0) return;
    const { ctx, job } = this;
    // The event was published before the delivery's first attempt, at most the retry span before its newest.
    const from = this.failing[0].at - retryLadder.spanMs / ctx.config.timeScale - 60_000;
    const ids = new Set(this.failing.map((f) => f.event_id));
    const byId = await lookupEvents(ctx, job.tenant_id, ids, from, () => this.stopping);
    const missing = this.failing.filter((f) => !byId.has(f.event_id)).length;
    this.events = this.failing.flatMap((f) => {
      const event = byId.get(f.event_id);
      return event ? [{ delivery_id: f.delivery_id, event }] : [];
    });
    if (missing > 0) {
      job.found -= missing;
      job.error = `${missing} still-failing deliveries not re-sent: their events left the events topic`;
    }
  }

  /**
   * Fresh deliveries (attempt 1, tagged with the job) of still-failing ones' events, then the marks
   * that stop the old ones' retries: in that order, so a crash in between repeats a delivery (its
   * retry still comes) but never loses one, and a later recovery finds what was not marked.
   */
  private async resendEvents(batch: { delivery_id: string; event: EventRecord }[]): Promise<void> {
    const { ctx, job } = this;
    const now = ctx.clock.now();
    await producing(ctx.topics.deliveries, (headers) =>
      ctx.producer.send(
        ctx.topics.deliveries,
        batch.map(({ event }) => {
          const d: DeliveryRecord = { ...newDelivery(event, job.endpoint_id, now, true), recovery: job.id };
          return { key: d.delivery_id, value: JSON.stringify(d), headers };
        }),
      ),
    );
    await ctx.producer.send(
      ctx.topics.recoveries,
      batch.map(({ delivery_id }) => ({
        key: `${SUPERSEDED_PREFIX}${delivery_id}`,
        value: JSON.stringify({
          kind: 'superseded',
          delivery_id,
          tenant_id: job.tenant_id,
          job: job.id,
          at: now,
        } satisfies SupersededMarker),
      })),
    );
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.done;
  }

  async run(): Promise<void> {
    const { ctx, job } = this;
    const { pacer } = nodeOf(ctx);
    let written = performance.now();
    try {
      // The lookup may take a while: the job's record is kept fresh meanwhile (it is not interrupted).
      const beat = setInterval(() => {
        job.updated_at = ctx.clock.now();
        void writeJob(ctx, job).catch(() => {});
      }, RECOVERY_PROGRESS_MS);
      await this.loadFailing().finally(() => clearInterval(beat));
      for (;;) {
        const tick = performance.now();
        if (this.stopping) return await this.finish('interrupted', 'its node stopped');
        const ep = ctx.endpoints.forTenant(job.endpoint_id, job.tenant_id);
        if (!ep) return await this.finish('failed', 'the endpoint was deleted');
        if (!ep.paused) {
          const rate = recoveryRate(ctx, ep.id);
          job.rate_per_second = Math.min(rate.endpoint, rate.tenant);
          const want = this.events.length > 0 ? this.events.length : this.refill();
          if (want === 0 && this.exhausted) return await this.finish('completed', job.error);
          const n = pacer.take(`ep:${ep.id}`, rate.endpoint, `tenant:${job.tenant_id}`, rate.tenant, want);
          if (n > 0 && this.events.length > 0) {
            await this.resendEvents(this.events.splice(0, n));
            job.sent += n;
          } else if (n > 0) {
            // Still listed now: a replay meanwhile took the others.
            const now = ctx.clock.now();
            const batch = this.buffer.splice(0, n).filter((e) => ctx.dlq.get(job.tenant_id, e.id, now) !== undefined);
            if (batch.length > 0) await resendEntries(ctx, job.tenant_id, batch, job.id);
            job.sent += batch.length;
            job.found = Math.max(job.found, job.sent);
          }
        }
        if (performance.now() - written >= RECOVERY_PROGRESS_MS) {
          job.updated_at = ctx.clock.now();
          await writeJob(ctx, job);
          written = performance.now();
        }
        await sleep(Math.max(0, TICK_MS - (performance.now() - tick)));
      }
    } catch (err) {
      ctx.log.error('a recovery job failed', { job: job.id, error: (err as Error).message });
      await this.finish('failed', (err as Error).message).catch(() => {});
    }
  }

  /** How many entries the buffer holds (read a page when it is empty). */
  private refill(): number {
    if (this.buffer.length === 0 && !this.exhausted) {
      const it = inWindow(this.ctx.dlq, this.req, this.cursor, this.ctx.clock.now());
      // inWindow pages on by itself; one page's worth is read into the buffer at a time.
      let read = 0;
      for (const e of it) {
        this.buffer.push(e);
        this.cursor = { key: Date.parse(e.dead_lettered_at), id: e.id };
        if (++read >= PAGE) break;
      }
      if (read < PAGE) this.exhausted = true;
    }
    return this.buffer.length;
  }

  private async finish(state: RecoveryJob['state'], error: string | null): Promise<void> {
    const now = this.ctx.clock.now();
    Object.assign(this.job, { state, error, updated_at: now, finished_at: now });
    await writeJob(this.ctx, this.job);
  }
}
