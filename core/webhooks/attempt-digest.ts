/**
 * What a dispatcher reports of one endpoint's attempts over a short window: the newest 100 in full
 * (the history never shows more of an endpoint: older ones would be trimmed as soon as they were
 * written) and every attempt of the window counted in its minute's bucket. A busy endpoint then
 * costs each node that keeps the history at most 100 log writes and a few updates per window,
 * however many attempts it had; the window's other attempts never cross Kafka one by one.
 *
 *   const d = new DigestBuilder();
 *   d.add(attempt);            // per attempt, as it is judged
 *   const digests = d.take();  // per window: one AttemptDigest per endpoint, then empty again
 */
import type { AttemptRecord, Bucket } from './attempt-history.ts';

export const HISTORY_PER_ENDPOINT = 100;
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
  /** The newest attempts of the window (HISTORY_PER_ENDPOINT at most), oldest first. */
  attempts: AttemptRecord[];
  /** Every attempt of the window, by minute. */
  minutes: MinuteCounts[];
  /** The newest failed attempt of the window. */
  failure: Failure | null;
}

class EndpointWindow {
  /** The newest attempts, by start time: up to twice the limit, cut back to the newest 100 when full. */
  private kept: AttemptRecord[] = [];
  readonly minutes = new Map<number, MinuteCounts>();
  failure: Failure | null = null;

  add(a: AttemptRecord): void {
    this.kept.push(a);
    if (this.kept.length >= 2 * HISTORY_PER_ENDPOINT) this.kept = this.newest();
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
  }

  /** The newest HISTORY_PER_ENDPOINT attempts, oldest first. */
  newest(): AttemptRecord[] {
    return this.kept.sort((x, y) => x.at - y.at).slice(-HISTORY_PER_ENDPOINT);
  }
}

export class DigestBuilder {
  private windows = new Map<string, EndpointWindow>();
  /** Attempts added since the last take(). */
  added = 0;

  add(a: AttemptRecord): void {
    const key = `${a.tenant_id}\u0000${a.endpoint_id}`;
    let w = this.windows.get(key);
    if (!w) {
      w = new EndpointWindow();
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
        attempts: w.newest(),
        minutes: [...w.minutes.values()],
        failure: w.failure,
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
