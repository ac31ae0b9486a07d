/**
 * What a dispatcher reports of one endpoint's attempts over a short window: every attempt of the
 * window counted in its minute's bucket, its newest 100 failures in full, and of its other attempts
 * the newest SAMPLE_PER_WINDOW. An endpoint with fewer attempts a window has them all in the
 * history; a busy healthy one has a sample, at a cost to each node that keeps the history of at
 * most 20 log writes and a few updates per window however many deliveries it had, so an extra
 * ingress adds no work per delivery. (The history shows the newest 100 of an
 * endpoint; at 100 attempts a second it would have trimmed a full report within a second anyway.)
 *
 *   const d = new DigestBuilder();
 *   d.add(attempt);            // per attempt, as it is judged
 *   const digests = d.take();  // per window: one AttemptDigest per endpoint, then empty again
 */

export const HISTORY_PER_ENDPOINT = 100;
/** The most attempts of one endpoint a digest carries in full. */
export const SAMPLE_PER_WINDOW = 20;

/**
 * How many attempts of an endpoint a window keeps in full: `size` of the others and, kept apart,
 * up to `failures` of its newest failures (0: failures are not kept apart, simply the newest `size`).
 */
export interface SamplePolicy {
  size: number;
  failures: number;
}
/** Failures are what a tenant looks for and are few while an endpoint is healthy: all of the newest 100. */
const DISPATCHER_SAMPLE: SamplePolicy = { size: SAMPLE_PER_WINDOW, failures: HISTORY_PER_ENDPOINT };
export const MINUTE_MS = 60_000;

/** [minute, attempts, delivered, failed, latency_sum_ms, latency_max_ms] */
export type MinuteCounts = [number, number, number, number, number, number];

export interface Failure {
  at: number;
  status: number | null;
  error: string | null;
}

export interface AttemptDigest {
  kind: 'digest';
  tenant_id: string;
  endpoint_id: string;
  /** The window's sample (SAMPLE_PER_WINDOW at most, see above), oldest first. */
  attempts: AttemptRecord[];
  /** Every attempt of the window, by minute. */
  minutes: MinuteCounts[];
  /** The newest failed attempt of the window. */
  failure: Failure | null;
  /**
   * Per recovery job with attempts in the window: [job, delivered, failed], where a delivery counts
   * as failed from its first failed attempt until one succeeds (then -1 failed, +1 delivered).
   */
  recoveries?: [string, number, number][];
}

/** The newest `n` of `xs` by start time, oldest first. */
const newest = (xs: AttemptRecord[], n: number) => (xs.length <= n ? xs : xs.sort((x, y) => x.at - y.at).slice(-n));

class EndpointWindow {
  /**
   * The newest others and failures (all in `others` without failure places): each up to twice the
   * sample, cut back to the sample when full.
   */
  private others: AttemptRecord[] = [];
  private failed: AttemptRecord[] = [];
  readonly minutes = new Map<number, MinuteCounts>();
  failure: Failure | null = null;
  readonly recoveries = new Map<string, [string, number, number]>();

  constructor(private readonly policy: SamplePolicy) {}

  add(a: AttemptRecord): void {
    const { size, failures } = this.policy;
    if (a.ok || failures === 0) {
      this.others.push(a);
      if (this.others.length >= 2 * size) this.others = newest(this.others, size);
    } else {
      this.failed.push(a);
      if (this.failed.length >= 2 * failures) this.failed = newest(this.failed, failures);
    }
    const minute = Math.floor(a.at / MINUTE_MS) * MINUTE_MS;
    let m = this.minutes.get(minute);
    if (!m) {
      m = [minute, 0, 0, 0, 0, 0];
      this.minutes.set(minute, m);
    }
    m[1]++;
    if (a.ok) m[2]++;
    else m[3]++;
    m[4] += a.duration_ms;
    if (a.duration_ms > m[5]) m[5] = a.duration_ms;
    if (!a.ok && (this.failure === null || a.at >= this.failure.at))
      this.failure = { at: a.at, status: a.status, error: a.error };
    if (a.recovery !== undefined) {
      let r = this.recoveries.get(a.recovery);
      if (!r) {
        r = [a.recovery, 0, 0];
        this.recoveries.set(a.recovery, r);
      }
      // Attempt 1 failing makes the delivery failed; a later success moves it to delivered.
      if (a.ok) {
        r[1]++;
        if (a.attempt > 1) r[2]--;
      } else if (a.attempt === 1) r[2]++;
    }
  }

  /** The sample: the newest failures (up to the policy's `failures`) and the newest others (up to `size`). */
  sample(): AttemptRecord[] {
    const { size, failures } = this.policy;
    const kept = [...newest(this.failed, failures), ...newest(this.others, size)];
    return kept.sort((x, y) => x.at - y.at);
  }
}

export class DigestBuilder {
  private windows = new Map<string, EndpointWindow>();
  /** Attempts added since the last take(). */
  added = 0;

  constructor(private readonly policy: SamplePolicy = DISPATCHER_SAMPLE) {}

  add(a: AttemptRecord): void {
    const key = `${a.tenant_id}\u0000${a.endpoint_id}`;
    let w = this.windows.get(key);
    if (!w) {
      w = new EndpointWindow(this.policy);
      this.windows.set(key, w);
    }
    w.add(a);
    this.added++;
  }

  get endpoints(): number {
    return this.windows.size;
  }

  take(): AttemptDigest[] {
    const out: AttemptDigest[] = [];
    for (const [key, w] of this.windows) {
      const sep = key.indexOf('\u0000');
      out.push({
        kind: 'digest',
        tenant_id: key.slice(0, sep),
        endpoint_id: key.slice(sep + 1),
        attempts: w.sample(),
        minutes: [...w.minutes.values()],
        failure: w.failure,
        ...(w.recoveries.size > 0 ? { recoveries: [...w.recoveries.values()] } : {}),
      });
    }
    this.windows = new Map();
    this.added = 0;
    return out;
  }
}

export function bucketOf(m: MinuteCounts): Bucket {
  return { attempts: m[1], delivered: m[2], failed: m[3], latency_sum_ms: m[4], latency_max_ms: m[5] };
}

const isCount = (n: unknown) => typeof n === 'number' && Number.isFinite(n) && n >= 0;

/** A digest as read from Kafka, checked; its attempts are checked by the caller. */
export function isDigest(v: unknown): v is AttemptDigest {
  const d = v as AttemptDigest;
  return (
    typeof d === 'object' &&
    d !== null &&
    d.kind === 'digest' &&
    typeof d.tenant_id === 'string' &&
    d.tenant_id.length > 0 &&
    typeof d.endpoint_id === 'string' &&
    d.endpoint_id.length > 0 &&
    Array.isArray(d.attempts) &&
    Array.isArray(d.minutes) &&
    d.minutes.every((m) => Array.isArray(m) && m.length === 6 && m.every(isCount))
  );
}

/** One attempt, as the dispatcher reports it. */
export interface AttemptRecord {
  delivery_id: string;
  endpoint_id: string;
  tenant_id: string;
  event_id: string;
  event_type: string;
  /** 1-based attempt number of the delivery. */
  attempt: number;
  /** When the attempt started (ms). */
  at: number;
  duration_ms: number;
  /** The receiver's HTTP status, null without an answer (connection error, timeout). */
  status: number | null;
  error: string | null;
  ok: boolean;
  /** What followed: delivered, a retry on the ladder, or the DLQ. */
  outcome: 'delivered' | 'retry' | 'dead-letter';
  /** The recovery job that re-sent the delivery (core/webhooks/recovery.ts), when one did. */
  recovery?: string;
}

export interface Bucket {
  attempts: number;
  delivered: number;
  failed: number;
  latency_sum_ms: number;
  latency_max_ms: number;
}
