/**
 * Recovery of a time window (`POST /v1/webhooks/endpoints/{id}/recover`): every dead-lettered
 * delivery of one endpoint whose last attempt fell in [since, until) is re-sent with a fresh attempt
 * count, at most once, as a job at its own pace.
 *
 * - The job's state lives on `sluice.recoveries` (compacted, one record per job, core/webhooks/recovery-jobs.ts),
 *   rewritten by its runner every RECOVERY_PROGRESS_MS: any node answers GET from its view.
 * - At most once: an entry is re-sent the way DLQ replay re-sends it (core/webhooks/dlq-replay.ts
 *   resendEntries: the fresh delivery, then the replay marker), so once sent it leaves the DLQ on
 *   every node and neither this job nor a later one finds it again.
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
import { appendAudit } from '../audit/audit-log.ts';
import { newId } from '../secrets.ts';
import type { Position } from '../paging.ts';
import { resendEntries } from './dlq-replay.ts';
import type { DlqEntry } from './records.ts';
import { RECOVERY_PROGRESS_MS, type RecoveryJob } from './recovery-jobs.ts';

export { validateWindow } from './recovery-jobs.ts';

const iso = (ms: number) => new Date(ms).toISOString();

/** How often a runner looks for tokens. */
const TICK_MS = 100;
/** DLQ entries read per page. */
const PAGE = 500;

export interface RecoveryRequest {
  tenantId: string;
  endpointId: string;
  since: number;
  until: number;
  actor: string;
}

/** The pace of a job of this endpoint: the smaller of its endpoint's and its tenant's share (deliveries a second). */
export function recoveryRate(ctx: Context, endpointId: string): { endpoint: number; tenant: number } {
  const { recoveryShare: share, recoveryCapacityPerSecond: capacity } = ctx.config;
  const limit = ctx.endpoints.get(endpointId)?.rate_limit_per_second ?? null;
  return { endpoint: share * (limit ?? capacity), tenant: share * capacity };
}

/** The entries a job of this window would re-send now, counted from the DLQ's endpoint index. */
function* inWindow(ctx: Context, r: RecoveryRequest, after: Position | null, nowMs: number): Generator<DlqEntry> {
  let cursor = after;
  for (;;) {
    const page = ctx.dlq.list(r.tenantId, { endpoint_id: r.endpointId, limit: PAGE, after: cursor }, nowMs);
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
    // A tenth of a second's worth at once (at least one): the pace holds over any second.
    const burst = Math.max(1, rate / 10);
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

const perContext = new WeakMap<Context, NodeRecoveries>();

function nodeOf(ctx: Context): NodeRecoveries {
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

/** Writes the job, wins or loses against overlapping ones, audits it and starts its runner. */
export async function startRecovery(ctx: Context, r: RecoveryRequest): Promise<RecoveryJob> {
  const ep = ctx.endpoints.forTenant(r.endpointId, r.tenantId);
  if (!ep) throw new SluiceError('NOT_FOUND', `no webhook endpoint ${r.endpointId}`);
  if (ep.state === 'DISABLED')
    throw new SluiceError(
      'CONFLICT',
      `endpoint ${ep.id} is DISABLED: verify it first, or its deliveries go back to the DLQ unattempted`,
    );
  const now = ctx.clock.now();
  let found = 0;
  for (const _ of inWindow(ctx, r, null, now)) found++;
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
    reason: `re-send ${found} failed deliveries last attempted in [${iso(r.since)}, ${iso(r.until)})`,
  });
  const runner = new Runner(ctx, job, r);
  const node = nodeOf(ctx);
  node.runners.add(runner);
  runner.done = runner.run().finally(() => node.runners.delete(runner));
  return job;
}

async function writeJob(ctx: Context, job: RecoveryJob): Promise<void> {
  await ctx.producer.sendJson(ctx.topics.recoveries, job.id, job);
  await waitFor(ctx.changes, () => ctx.recoveries.has(job.id, job.updated_at), 10_000, 'the recovery job');
}

class Runner {
  private stopping = false;
  done: Promise<void> = Promise.resolve();
  private buffer: DlqEntry[] = [];
  private cursor: Position | null = null;
  private exhausted = false;

  constructor(
    private readonly ctx: Context,
    private readonly job: RecoveryJob,
    private readonly req: RecoveryRequest,
  ) {}

  async stop(): Promise<void> {
    this.stopping = true;
    await this.done;
  }

  async run(): Promise<void> {
    const { ctx, job } = this;
    const { pacer } = nodeOf(ctx);
    let written = performance.now();
    try {
      for (;;) {
        if (this.stopping) return await this.finish('interrupted', 'its node stopped');
        const ep = ctx.endpoints.forTenant(job.endpoint_id, job.tenant_id);
        if (!ep) return await this.finish('failed', 'the endpoint was deleted');
        if (!ep.paused) {
          const rate = recoveryRate(ctx, ep.id);
          job.rate_per_second = Math.min(rate.endpoint, rate.tenant);
          const want = this.refill();
          if (want === 0 && this.exhausted) return await this.finish('completed', null);
          const n = pacer.take(`ep:${ep.id}`, rate.endpoint, `tenant:${job.tenant_id}`, rate.tenant, want);
          if (n > 0) {
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
        await sleep(TICK_MS);
      }
    } catch (err) {
      ctx.log.error('a recovery job failed', { job: job.id, error: (err as Error).message });
      await this.finish('failed', (err as Error).message).catch(() => {});
    }
  }

  /** How many entries the buffer holds (read a page when it is empty). */
  private refill(): number {
    if (this.buffer.length === 0 && !this.exhausted) {
      const it = inWindow(this.ctx, this.req, this.cursor, this.ctx.clock.now());
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
