/**
 * What the tenant console and `GET /v1/webhooks/endpoints/{id}/attempts` and `GET /v1/webhooks/stats`
 * read: every delivery attempt the dispatchers made, as they report it on `sluice.attempts`
 * (dispatcher/record.ts), kept bounded in the process's on-disk store (core/store):
 *
 *   attempts.log     [tenant, endpoint, at, delivery_id, attempt] → AttemptRecord  (newest 100 per endpoint)
 *   attempts.count   [tenant, endpoint] → how many the log holds for it
 *   attempts.last    [tenant, endpoint] → the newest attempt and the newest failure
 *   attempts.minutes [tenant, endpoint | '', minute] → Bucket                      (the last 60 minutes)
 *   attempts.age     [at, tenant, endpoint, delivery_id, attempt] → 0              (sweeps the log after 7 days)
 *
 * so the store holds at most 100 attempts and 61 minute buckets per endpoint that had an attempt
 * in the last 7 days, whatever the delivery volume. The '' endpoint holds the tenant's totals.
 *
 *   history.attempts('acme', 'ep_1', { limit: 50, event_id }) // newest first
 *   history.stats('acme', now)                                 // series and per-endpoint rates of the last hour
 */
import type { StateRecord, StoredView } from '../kafka/state-consumer.ts';
import type { Table, ViewStore } from '../store/view-store.ts';
import { systemClock, type Clock } from '../clock.ts';
import {
  bucketOf,
  DigestBuilder,
  HISTORY_PER_ENDPOINT,
  isDigest,
  MINUTE_MS,
  type AttemptDigest,
  type AttemptRecord,
  type Bucket,
  type MinuteCounts,
} from './attempt-digest.ts';

export { HISTORY_PER_ENDPOINT, MINUTE_MS };

export type { AttemptRecord, Bucket };

/** What a recovery job's deliveries did: delivered, and those whose latest attempt failed. */
export interface RecoveryCounts {
  delivered: number;
  failed: number;
}

interface Last {
  at: number;
  ok: boolean;
  status: number | null;
  error: string | null;
  failure: { at: number; status: number | null; error: string | null } | null;
}

/** The log of an endpoint is trimmed back to 100 once it holds this many more (one ranged delete per 50 reports). */
const TRIM_SLACK = 50;
export const HISTORY_MAX_AGE_MS = 7 * 24 * 3600_000;
export const WINDOW_MINUTES = 60;
const SWEEP_PER_RECORD = 4;
const TENANT_TOTAL = '';

type LogKey = [string, string, number, string, number];

export interface AttemptFilter {
  limit: number;
  delivery_id?: string;
  event_id?: string;
}

export interface EndpointRates {
  endpoint_id: string;
  attempts: number;
  delivered: number;
  failed: number;
  /** delivered / attempts over the window, null without attempts. */
  success_rate: number | null;
  last_attempt_at: number | null;
  last_error: { at: number; status: number | null; error: string | null } | null;
}

export interface SeriesPoint extends Bucket {
  minute: number;
}

export interface Stats {
  from: number;
  to: number;
  totals: Omit<EndpointRates, 'endpoint_id' | 'last_attempt_at' | 'last_error'>;
  series: SeriesPoint[];
  endpoints: EndpointRates[];
}

const logKey = (a: AttemptRecord): LogKey => [a.tenant_id, a.endpoint_id, a.at, a.delivery_id, a.attempt];
const empty = (): Bucket => ({ attempts: 0, delivered: 0, failed: 0, latency_sum_ms: 0, latency_max_ms: 0 });
const rate = (b: Bucket) => (b.attempts === 0 ? null : b.delivered / b.attempts);

/** A report as the history keeps it: status and error normalised, the error cut to 500 characters. */
function clean(x: AttemptRecord): AttemptRecord {
  return {
    ...x,
    status: typeof x.status === 'number' ? x.status : null,
    error: typeof x.error === 'string' ? x.error.slice(0, 500) : null,
  };
}

export function isAttemptRecord(v: unknown): v is AttemptRecord {
  const a = v as AttemptRecord;
  return (
    typeof a === 'object' &&
    a !== null &&
    [a.delivery_id, a.endpoint_id, a.tenant_id, a.event_id, a.event_type].every(
      (s) => typeof s === 'string' && s.length > 0 && s.length <= 200,
    ) &&
    [a.attempt, a.at, a.duration_ms].every((n) => typeof n === 'number' && Number.isFinite(n)) &&
    typeof a.ok === 'boolean'
  );
}

export class AttemptHistory implements StoredView {
  private log!: Table<AttemptRecord, LogKey>;
  private count!: Table<number, [string, string]>;
  private last!: Table<Last, [string, string]>;
  private minutes!: Table<Bucket, [string, string, number]>;
  /** [tenant, recovery job] → [delivered, failed, newest attempt's at]: a recovery's progress. */
  private recoveries!: Table<[number, number, number], [string, string]>;
  /** [newest attempt's at, tenant, endpoint]: the endpoints to forget once quiet for 7 days. */
  private quiet!: Table<0, [number, string, string]>;

  constructor(
    readonly topic: string,
    private readonly clock: Clock = systemClock,
  ) {}

  attach(store: ViewStore): void {
    this.log = store.table('attempts.log');
    this.count = store.table('attempts.count');
    this.last = store.table('attempts.last');
    this.minutes = store.table('attempts.minutes');
    this.quiet = store.table('attempts.quiet');
    this.recoveries = store.table('attempts.recoveries');
  }

  /**
   * Runs inside the state consumer's store transaction. A record holds digests (attempt-digest.ts:
   * per endpoint, the newest 100 failures and 20 other attempts of a dispatcher's window and every attempt counted by
   * minute), or, from an older dispatcher, one attempt or an array of them (digested here, the newest
   * 100 kept), so a busy endpoint costs a few log writes and updates per window, not a dozen per attempt.
   */
  apply(r: StateRecord): void {
    this.sweep(this.clock.now() - HISTORY_MAX_AGE_MS, SWEEP_PER_RECORD);
    if (r.value === null) return;
    let v: unknown;
    try {
      v = JSON.parse(r.value.toString('utf8'));
    } catch {
      return;
    }
    // Attempts one by one (older dispatchers): a report seen before, in this record or in the log,
    // is left out, so repeats are not counted twice.
    const legacy = new DigestBuilder({ size: HISTORY_PER_ENDPOINT, failures: 0 });
    const seen = new Set<string>();
    for (const x of Array.isArray(v) ? v : [v]) {
      if (isDigest(x)) {
        const attempts = x.attempts.filter(isAttemptRecord).map(clean);
        this.applyDigest({ ...x, attempts });
      } else if (isAttemptRecord(x)) {
        const id = `${x.tenant_id}\u0000${x.endpoint_id}\u0000${x.delivery_id}\u0000${x.attempt}`;
        if (seen.has(id) || this.log.doesExist(logKey(x))) continue;
        seen.add(id);
        legacy.add(clean(x));
      }
    }
    for (const d of legacy.take()) this.applyDigest(d);
  }

  private applyDigest(d: AttemptDigest): void {
    const { tenant_id: tenant, endpoint_id: endpoint } = d;
    const attempts = d.attempts
      .filter((a) => a.tenant_id === tenant && a.endpoint_id === endpoint)
      .slice(-HISTORY_PER_ENDPOINT);
    // A digest read twice (a producer's retry): its newest attempt is in the log already.
    const newest = attempts[attempts.length - 1];
    if (newest === undefined || this.log.doesExist(logKey(newest))) return;
    let logged = 0;
    for (const a of attempts) if (this.log.putNew(logKey(a), a)) logged++;
    // Trimmed by range, not key by key: what is older than 7 days, then the oldest past 100.
    const cut = this.clock.now() - HISTORY_MAX_AGE_MS;
    let n = (this.count.get([tenant, endpoint]) ?? 0) + logged;
    n -= this.log.removeRange([tenant, endpoint, 0], [tenant, endpoint, cut]);
    if (n > HISTORY_PER_ENDPOINT + TRIM_SLACK)
      n -= this.log.removeFirst([tenant, endpoint, 0], [tenant, endpoint, Infinity], n - HISTORY_PER_ENDPOINT);
    this.count.put([tenant, endpoint], Math.max(n, 0));
    const prev = this.last.get([tenant, endpoint]);
    if (!prev || prev.at <= newest.at) {
      const failure =
        d.failure && (!prev?.failure || prev.failure.at <= d.failure.at) ? d.failure : (prev?.failure ?? null);
      this.last.put([tenant, endpoint], {
        at: newest.at,
        ok: newest.ok,
        status: newest.status,
        error: newest.error,
        failure,
      });
      if (prev) this.quiet.remove([prev.at, tenant, endpoint]);
      this.quiet.put([newest.at, tenant, endpoint], 0);
    } else if (d.failure && (!prev.failure || prev.failure.at < d.failure.at)) {
      this.last.put([tenant, endpoint], { ...prev, failure: d.failure });
    }
    for (const ep of [endpoint, TENANT_TOTAL]) this.addToMinutes(tenant, ep, d.minutes);
    for (const r of Array.isArray(d.recoveries) ? d.recoveries : []) {
      if (!Array.isArray(r) || typeof r[0] !== 'string' || r[0].length > 64) continue;
      const [job, delivered, failed] = [r[0], Number(r[1]) || 0, Number(r[2]) || 0];
      const held = this.recoveries.get([tenant, job]) ?? [0, 0, 0];
      this.recoveries.put([tenant, job], [held[0] + delivered, held[1] + failed, newest.at]);
    }
  }

  /** A recovery job's deliveries so far: delivered, and failed at their latest attempt (best effort). */
  recovery(tenant: string, job: string): RecoveryCounts {
    const held = this.recoveries.get([tenant, job]);
    return { delivered: held?.[0] ?? 0, failed: Math.max(0, held?.[1] ?? 0) };
  }

  private addToMinutes(tenant: string, endpoint: string, counts: MinuteCounts[]): void {
    let opened = false;
    let newestMinute = 0;
    for (const m of counts) {
      const minute = m[0];
      const held = this.minutes.get([tenant, endpoint, minute]);
      opened ||= held === undefined;
      newestMinute = Math.max(newestMinute, minute);
      const add = bucketOf(m);
      const b = held ?? empty();
      b.attempts += add.attempts;
      b.delivered += add.delivered;
      b.failed += add.failed;
      b.latency_sum_ms += add.latency_sum_ms;
      b.latency_max_ms = Math.max(b.latency_max_ms, add.latency_max_ms);
      this.minutes.put([tenant, endpoint, minute], b);
    }
    // Buckets that left the window: one at most when a new minute's bucket opened, else none.
    if (!opened) return;
    const cut = newestMinute - WINDOW_MINUTES * MINUTE_MS;
    this.minutes.removeRange([tenant, endpoint, 0], [tenant, endpoint, cut]);
  }

  /**
   * Inside a write transaction: forgets up to `max` endpoints whose newest attempt is older than
   * `before` (deleted, or quiet for 7 days), with everything held of them.
   */
  private sweep(before: number, max: number): void {
    for (const [, tenant, endpoint] of [...this.quiet.getKeys({ end: [before], limit: max })]) {
      const last = this.last.get([tenant, endpoint]);
      if (last) this.quiet.remove([last.at, tenant, endpoint]);
      this.log.removeRange([tenant, endpoint, 0], [tenant, endpoint, Infinity]);
      this.minutes.removeRange([tenant, endpoint, 0], [tenant, endpoint, Infinity]);
      this.count.remove([tenant, endpoint]);
      this.last.remove([tenant, endpoint]);
    }
  }

  /** The endpoint's recent attempts, newest first. */
  attempts(tenant: string, endpoint: string, f: AttemptFilter): AttemptRecord[] {
    const out: AttemptRecord[] = [];
    const range = {
      start: [tenant, endpoint, Infinity] as unknown as LogKey,
      end: [tenant, endpoint] as unknown as LogKey,
      reverse: true,
    };
    const cut = this.clock.now() - HISTORY_MAX_AGE_MS;
    let read = 0;
    for (const { value } of this.log.getRange(range)) {
      if (value.at < cut) break; // older than 7 days: removed at the endpoint's next report, or with it
      if (++read > HISTORY_PER_ENDPOINT) break; // past the newest 100: waiting to be trimmed
      if (f.delivery_id !== undefined && value.delivery_id !== f.delivery_id) continue;
      if (f.event_id !== undefined && value.event_id !== f.event_id) continue;
      out.push(value);
      if (out.length >= f.limit) break;
    }
    return out;
  }

  /**
   * Rates and latencies of the last WINDOW_MINUTES minutes: the
   * tenant's (or one endpoint's) series and each endpoint's rates.
   */
  stats(tenant: string, nowMs: number, endpoint?: string): Stats {
    const to = Math.floor(nowMs / MINUTE_MS) * MINUTE_MS;
    const from = to - (WINDOW_MINUTES - 1) * MINUTE_MS;
    const series = this.series(tenant, endpoint ?? TENANT_TOTAL, from, to);
    const sum = series.reduce((acc, p) => {
      acc.attempts += p.attempts;
      acc.delivered += p.delivered;
      acc.failed += p.failed;
      return acc;
    }, empty());
    const ids =
      endpoint !== undefined
        ? [endpoint]
        : [...this.last.getKeys({ start: [tenant, '\u0001'], end: [tenant, '\uffff'] })].map((k) => k[1]);
    const endpoints = ids.flatMap((id) => {
      const last = this.last.get([tenant, id]);
      if (!last) return [];
      const b = this.series(tenant, id, from, to).reduce((acc, p) => {
        acc.attempts += p.attempts;
        acc.delivered += p.delivered;
        acc.failed += p.failed;
        return acc;
      }, empty());
      return [
        {
          endpoint_id: id,
          attempts: b.attempts,
          delivered: b.delivered,
          failed: b.failed,
          success_rate: rate(b),
          last_attempt_at: last.at,
          last_error: last.failure,
        },
      ];
    });
    return {
      from,
      to: to + MINUTE_MS,
      totals: { attempts: sum.attempts, delivered: sum.delivered, failed: sum.failed, success_rate: rate(sum) },
      series,
      endpoints,
    };
  }

  /** One point per minute from `from` to `to`, zeros where nothing was attempted. */
  private series(tenant: string, endpoint: string, from: number, to: number): SeriesPoint[] {
    const held = new Map<number, Bucket>();
    for (const { key, value } of this.minutes.getRange({
      start: [tenant, endpoint, from],
      end: [tenant, endpoint, to + 1],
    }))
      held.set(key[2], value);
    const out: SeriesPoint[] = [];
    for (let m = from; m <= to; m += MINUTE_MS) out.push({ minute: m, ...(held.get(m) ?? empty()) });
    return out;
  }
}
