/**
 * Recovery jobs as every node sees them: `sluice.recoveries` (compacted, key = job id) holds one
 * record per job, rewritten by the node that runs it as it progresses (core/webhooks/recovery.ts).
 * The view keeps them in the heap (one small record per job, like the endpoints) with the offset of
 * each job's first record: of two overlapping jobs of one endpoint, the one written first wins, so
 * every node agrees which one runs (the other is deleted by its writer and answered 409).
 *
 *   ctx.recoveries.get('acme', 'rcv_…')   // the job, or undefined (another tenant's too)
 *   ctx.recoveries.overlapping(job, now)  // an earlier running job of the endpoint overlapping it
 */
import type { StateRecord, StateView } from '../kafka/state-consumer.ts';
import { invalidRequest } from '../errors.ts';

export type RecoveryState = 'running' | 'completed' | 'failed' | 'interrupted';

/** `sluice.recoveries`, key = id. */
export interface RecoveryJob {
  kind: 'recovery';
  id: string; // rcv_…
  tenant_id: string;
  endpoint_id: string;
  /** The window [since, until) of last attempts (ms). */
  since: number;
  until: number;
  state: RecoveryState;
  /** Deliveries of the window found to re-send (grows if more are found while it runs). */
  found: number;
  /** Re-sent so far (fresh deliveries written to `sluice.deliveries`). */
  sent: number;
  /** The pace it was given (deliveries a second). */
  rate_per_second: number;
  actor: string;
  created_at: number;
  /** Its runner writes the record at least every RECOVERY_PROGRESS_MS while it runs. */
  updated_at: number;
  finished_at: number | null;
  error: string | null;
}

/** How often a running job's record is rewritten (progress and a sign of life). */
export const RECOVERY_PROGRESS_MS = 1000;
/** A running job not rewritten for this long lost its runner (its node stopped): it is `interrupted`. */
export const RECOVERY_STALE_MS = 30_000;

interface Held {
  job: RecoveryJob;
  /** Offset of the job's first record: earlier wins between overlapping jobs. */
  seq: bigint;
}

export function isRecoveryJob(v: unknown): v is RecoveryJob {
  const j = v as RecoveryJob;
  return (
    typeof j === 'object' &&
    j !== null &&
    j.kind === 'recovery' &&
    [j.id, j.tenant_id, j.endpoint_id, j.state, j.actor].every((s) => typeof s === 'string') &&
    [j.since, j.until, j.found, j.sent, j.created_at, j.updated_at].every((n) => typeof n === 'number')
  );
}

/**
 * Also on `sluice.recoveries`, key `dlv:<delivery id>`: a still-failing delivery a recovery re-sent as
 * a fresh one. The dispatcher drops the old delivery's retries (dispatcher/process.ts precheck).
 */
export interface SupersededMarker {
  kind: 'superseded';
  delivery_id: string;
  tenant_id: string;
  job: string;
  at: number;
}

export const SUPERSEDED_PREFIX = 'dlv:';
/** How long a superseded mark is kept: past the retry span (72 h) and the DLQ's 7 days. */
const SUPERSEDED_KEEP_MS = 8 * 24 * 3600_000;

export class RecoveryView implements StateView {
  private readonly jobs = new Map<string, Held>();
  /** Superseded delivery id → when it was marked (ms). */
  private readonly superseded = new Map<string, number>();
  private applied = 0;

  constructor(readonly topic: string) {}

  apply(r: StateRecord): void {
    if (r.key.startsWith(SUPERSEDED_PREFIX)) {
      this.applyMark(r);
      return;
    }
    if (r.value === null) {
      this.jobs.delete(r.key);
      return;
    }
    let v: unknown;
    try {
      v = JSON.parse(r.value.toString('utf8'));
    } catch {
      return;
    }
    if (!isRecoveryJob(v) || v.id !== r.key) return;
    const held = this.jobs.get(v.id);
    this.jobs.set(v.id, { job: v, seq: held?.seq ?? BigInt(r.offset) });
  }

  private applyMark(r: StateRecord): void {
    const id = r.key.slice(SUPERSEDED_PREFIX.length);
    if (r.value === null) {
      this.superseded.delete(id);
      return;
    }
    let m: SupersededMarker;
    try {
      m = JSON.parse(r.value.toString('utf8'));
    } catch {
      return;
    }
    if (m?.kind !== 'superseded' || m.delivery_id !== id || typeof m.at !== 'number') return;
    this.superseded.set(id, m.at);
    // Forgotten once past any retry of theirs, judged by the marks' own times (every node alike).
    if (++this.applied % 10_000 === 0)
      for (const [k, at] of this.superseded) if (m.at - at > SUPERSEDED_KEEP_MS) this.superseded.delete(k);
  }

  /** Whether a recovery re-sent this delivery as a fresh one: its own retries stop. */
  isSuperseded(deliveryId: string): boolean {
    return this.superseded.has(deliveryId);
  }

  /** The job when it belongs to the tenant, its state as of `nowMs` (a silent running job is interrupted). */
  get(tenantId: string, id: string, nowMs: number): RecoveryJob | undefined {
    const h = this.jobs.get(id);
    if (!h || h.job.tenant_id !== tenantId) return undefined;
    return { ...h.job, state: stateAt(h.job, nowMs) };
  }

  /** Whether this node has applied the job's record of `updatedAt` (or a later one). */
  has(id: string, updatedAt: number): boolean {
    const h = this.jobs.get(id);
    return h !== undefined && h.job.updated_at >= updatedAt;
  }

  /**
   * A running job of the same endpoint whose window overlaps `job`'s and whose first record came
   * before it: then `job` lost, on every node alike.
   */
  overlapping(job: RecoveryJob, nowMs: number): RecoveryJob | undefined {
    const mine = this.jobs.get(job.id);
    if (!mine) return undefined;
    for (const h of this.jobs.values()) {
      const j = h.job;
      if (j.id === job.id || j.tenant_id !== job.tenant_id || j.endpoint_id !== job.endpoint_id) continue;
      if (h.seq > mine.seq || stateAt(j, nowMs) !== 'running') continue;
      if (j.since < job.until && job.since < j.until) return j;
    }
    return undefined;
  }

  /** The tenant's jobs of one endpoint, newest first (the console shows the latest). */
  forEndpoint(tenantId: string, endpointId: string, nowMs: number): RecoveryJob[] {
    const out: RecoveryJob[] = [];
    for (const h of this.jobs.values())
      if (h.job.tenant_id === tenantId && h.job.endpoint_id === endpointId)
        out.push({ ...h.job, state: stateAt(h.job, nowMs) });
    return out.sort((a, b) => b.created_at - a.created_at);
  }
}

/**
 * A recovery's window [since, until) (ms), checked against now and the DLQ's retention: 400 naming
 * the field (`$.since`, `$.until`) when either is not a time, since is in the future or older than
 * the retention, or until is not after since.
 */
export function validateWindow(nowMs: number, since: number, until: number, retentionMs: number): void {
  const errors: { path: string; message: string }[] = [];
  if (!Number.isFinite(since)) errors.push({ path: '$.since', message: 'must be an ISO 8601 date-time' });
  if (!Number.isFinite(until)) errors.push({ path: '$.until', message: 'must be an ISO 8601 date-time' });
  if (errors.length === 0) {
    if (since > nowMs) errors.push({ path: '$.since', message: 'must not be in the future' });
    else if (since < nowMs - retentionMs)
      errors.push({
        path: '$.since',
        message: `must be within the DLQ's retention (${Math.round(retentionMs / 1000)} s before now)`,
      });
    else if (since >= until) errors.push({ path: '$.until', message: 'must be after since' });
  }
  if (errors.length > 0) throw invalidRequest(errors);
}

function stateAt(j: RecoveryJob, nowMs: number): RecoveryState {
  return j.state === 'running' && nowMs - j.updated_at > RECOVERY_STALE_MS ? 'interrupted' : j.state;
}
