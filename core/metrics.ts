/**
 * The process's Prometheus metrics (prom-client), rendered on the admin port's /metrics.
 * Every counter and histogram is declared here with its type and help; call sites use the typed
 * fields. A gauge read when scraped is declared through `gauge()` beside the value it reads
 * (grep `metrics.gauge(`: ingress/server.ts, dispatcher/index.ts, core/context.ts).
 *
 * Hot paths (a request, a delivery attempt, a record leaving a rung) count through FastCounter and
 * FastHistogram: each labelled series is found through nested Maps and created once, so counting
 * builds no label object and hashes no label string; prom-client's registry renders them.
 * `tenantLabel: false` (SLUICE_METRICS_TENANT_LABEL=false) records every tenant as "" for a
 * bounded number of series.
 */
import { createRequire } from 'node:module';
import type { monitorEventLoopDelay } from 'node:perf_hooks';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { workDrivenDelay } from './event-loop-delay.ts';

export interface MetricsOptions {
  /** Label requests and events by tenant (default true). */
  tenantLabel?: boolean;
  /** Process metrics (CPU, memory, event-loop lag, GC): on for a real process, off for throwaway instances. */
  processMetrics?: boolean;
}

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** From sub-second to the 72-hour retry span. */
const LONG_BUCKETS = [0.05, 0.25, 1, 5, 30, 120, 600, 1800, 3600, 3 * 3600, 12 * 3600, 24 * 3600, 72 * 3600];

/** Children of a metric keyed by label values in order, created on first use and kept in `all`. */
class Children<C> {
  private readonly root = new Map<string, unknown>();
  readonly all: C[] = [];
  constructor(private readonly make: (values: string[]) => C) {}
  get(...values: string[]): C {
    let m = this.root;
    for (let i = 0; i < values.length - 1; i++) {
      let next = m.get(values[i]) as Map<string, unknown> | undefined;
      if (!next) {
        next = new Map();
        m.set(values[i], next);
      }
      m = next;
    }
    const last = values[values.length - 1];
    let c = m.get(last) as C | undefined;
    if (c === undefined) {
      c = this.make(values);
      m.set(last, c);
      this.all.push(c);
    }
    return c;
  }
}

type Labels = Record<string, string>;
const labelsOf = (names: readonly string[], values: string[]): Labels =>
  Object.fromEntries(names.map((n, i) => [n, values[i]]));

/**
 * A counter for hot paths, registered in prom-client's registry (which renders it): each series
 * is a plain number found through nested maps, so counting neither builds nor hashes labels
 * (prom-client's own `labels()` children hash their labels on every call).
 */
class FastCounter {
  readonly type = 'counter';
  readonly aggregator = 'sum';
  private readonly series: Children<{ labels: Labels; value: number }>;
  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
    registry: Registry,
  ) {
    this.series = new Children((values) => ({ labels: labelsOf(labelNames, values), value: 0 }));
    registry.registerMetric(this as unknown as Counter);
  }
  child(...values: string[]): { value: number } {
    return this.series.get(...values);
  }
  async get() {
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      aggregator: this.aggregator,
      values: this.series.all.map((s) => ({ labels: s.labels, value: s.value })),
    };
  }
  reset(): void {
    for (const s of this.series.all) s.value = 0;
  }
}

interface HistogramSeries {
  labels: Labels;
  /** Per bucket (not cumulative), the last one above every bound. */
  counts: Float64Array;
  sum: number;
  count: number;
}

/** A histogram for hot paths, in the same way as FastCounter. */
class FastHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly series: Children<HistogramSeries>;
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly bounds: number[],
    readonly labelNames: readonly string[],
    registry: Registry,
  ) {
    this.series = new Children((values) => ({
      labels: labelsOf(labelNames, values),
      counts: new Float64Array(bounds.length + 1),
      sum: 0,
      count: 0,
    }));
    registry.registerMetric(this as unknown as Histogram);
  }
  child(...values: string[]): HistogramSeries {
    return this.series.get(...values);
  }
  observe(s: HistogramSeries, v: number): void {
    let i = 0;
    while (i < this.bounds.length && v > this.bounds[i]) i++;
    s.counts[i]++;
    s.sum += v;
    s.count++;
  }
  async get() {
    const name = this.name;
    const values: Array<{ labels: Record<string, string | number>; value: number; metricName: string }> = [];
    for (const s of this.series.all) {
      let acc = 0;
      this.bounds.forEach((le, i) => {
        acc += s.counts[i];
        values.push({ labels: { ...s.labels, le }, value: acc, metricName: `${name}_bucket` });
      });
      values.push({ labels: { ...s.labels, le: '+Inf' }, value: s.count, metricName: `${name}_bucket` });
      values.push({ labels: s.labels, value: s.sum, metricName: `${name}_sum` });
      values.push({ labels: s.labels, value: s.count, metricName: `${name}_count` });
    }
    return { name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
  reset(): void {
    for (const s of this.series.all) {
      s.counts.fill(0);
      s.sum = 0;
      s.count = 0;
    }
  }
}

export class Metrics {
  readonly registry = new Registry();
  readonly tenantLabel: boolean;

  // The edge.
  private readonly requests: FastCounter;
  private readonly requestDuration: FastHistogram;
  readonly errors: Counter<'code'>;
  readonly tokensIssued: Counter<string>;
  readonly tokensRefused: Counter<'reason'>;
  readonly scopeViolations: Counter<'scope'>;
  readonly revocationLag: Histogram<string>;
  private readonly eventsPublished: FastCounter;
  // The dispatcher.
  private readonly fanOutEvents: FastCounter;
  private readonly filterEvaluations: FastCounter;
  private readonly deliveries: FastCounter;
  private readonly attempts: FastCounter;
  private readonly attemptDuration: FastHistogram;
  readonly deliveryLatency: Histogram<string>;
  private readonly rungLateness: FastHistogram;
  readonly consumerLag: Gauge<'group' | 'topic' | 'partition'>;
  readonly outcomeWriteFailures: Counter<'topic'>;
  readonly attemptReportsDropped: Counter<string>;
  readonly eventTypeReportsDropped: Counter<string>;
  readonly eventTypesIgnored: Counter<string>;
  readonly backpressurePauses: Counter<'topic'>;
  readonly rungPauses: Counter<'topic'>;
  readonly rebalanceDropped: Counter<string>;
  readonly laneRecordsLeft: Counter<string>;
  readonly laneRereads: Counter<string>;

  private readonly scopeChildren: Children<{ inc(): void }>;

  constructor(opts: MetricsOptions = {}) {
    this.tenantLabel = opts.tenantLabel ?? true;
    const registers = [this.registry];
    const counter = <L extends string>(name: string, help: string, labelNames: L[] = []) =>
      new Counter<L>({ name, help, labelNames, registers });
    const histogram = <L extends string>(name: string, help: string, buckets: number[], labelNames: L[] = []) =>
      new Histogram<L>({ name, help, buckets, labelNames, registers });

    this.requests = new FastCounter(
      'sluice_http_requests_total',
      'Requests answered by the edge, by route ("METHOD /pattern", or "unmatched"), status and tenant ' +
        '("" without a bearer token or with SLUICE_METRICS_TENANT_LABEL=false).',
      ['route', 'status', 'tenant'],
      this.registry,
    );
    this.requestDuration = new FastHistogram(
      'sluice_http_request_duration_seconds',
      "Time from a request's arrival to its reply being written, by route.",
      LATENCY_BUCKETS,
      ['route'],
      this.registry,
    );
    this.errors = counter('sluice_errors_total', 'Error replies by Sluice error code.', ['code']);
    this.tokensIssued = counter('sluice_tokens_issued_total', 'Access tokens issued.');
    this.tokensRefused = counter(
      'sluice_tokens_refused_total',
      'Token requests refused, by reason (the OAuth error, or rate_limited / unavailable).',
      ['reason'],
    );
    this.scopeViolations = counter(
      'sluice_scope_violations_total',
      "Requests refused because the token lacks the route's scope, by the missing scope.",
      ['scope'],
    );
    this.revocationLag = histogram(
      'sluice_revocation_lag_seconds',
      "Time from a revocation being written to this node's view applying it.",
      [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    );
    this.eventsPublished = new FastCounter(
      'sluice_events_published_total',
      'Events written to the events topic through the API, by tenant.',
      ['tenant'],
      this.registry,
    );
    this.fanOutEvents = new FastCounter(
      'sluice_events_total',
      'Events read by the fan-out, by outcome (matched, unmatched, malformed).',
      ['outcome'],
      this.registry,
    );
    this.filterEvaluations = new FastCounter(
      'sluice_webhook_filter_evaluations_total',
      'Endpoint filters the fan-out evaluated, by tenant and outcome (matched, unmatched, ' +
        "error: no match, counted in the endpoint's filter_errors).",
      ['tenant', 'outcome'],
      this.registry,
    );
    this.deliveries = new FastCounter(
      'sluice_deliveries_total',
      'Delivery outcomes: delivered, retry, deferred, held, dead-letter, dropped.',
      ['outcome'],
      this.registry,
    );
    this.attempts = new FastCounter(
      'sluice_delivery_attempts_total',
      'HTTP delivery attempts by attempt number (1-17) and result (success, failure).',
      ['attempt', 'result'],
      this.registry,
    );
    this.attemptDuration = new FastHistogram(
      'sluice_delivery_attempt_duration_seconds',
      'Duration of one HTTP delivery attempt, by result.',
      LATENCY_BUCKETS,
      ['result'],
      this.registry,
    );
    this.deliveryLatency = histogram(
      'sluice_delivery_latency_seconds',
      "Time from an event's creation to its successful delivery (retries included).",
      LONG_BUCKETS,
    );
    this.rungLateness = new FastHistogram(
      'sluice_rung_lateness_seconds',
      'How late a record leaves its retry rung after its due time, by rung.',
      [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 60, 300],
      ['rung'],
      this.registry,
    );
    this.consumerLag = new Gauge({
      name: 'sluice_consumer_lag_records',
      help:
        "Records behind the partition's end as of the last batch this process fetched, " +
        'by consumer group, topic and partition.',
      labelNames: ['group', 'topic', 'partition'],
      registers,
    });
    this.outcomeWriteFailures = counter(
      'sluice_outcome_write_failures_total',
      'Delivery outcomes Kafka refused for good (dropped after logging), by topic.',
      ['topic'],
    );
    this.attemptReportsDropped = counter(
      'sluice_attempt_reports_dropped_total',
      'Attempt reports for the attempt history that could not be written (best effort; deliveries are unaffected).',
      [],
    );
    this.eventTypeReportsDropped = counter(
      'sluice_event_type_reports_dropped_total',
      'Event type counts for GET /v1/webhooks/event-types that could not be written (best effort).',
      [],
    );
    this.eventTypesIgnored = counter(
      'sluice_event_types_ignored_total',
      "Counts of event types left out of a tenant's list (it holds 10,000 types at most) by this node.",
      [],
    );
    this.backpressurePauses = counter(
      'sluice_backpressure_pauses_total',
      'Partitions paused because the dispatch buffer was full, by topic kind.',
      ['topic'],
    );
    this.rungPauses = counter(
      'sluice_rung_pauses_total',
      'Rung partitions paused until their head record is due, by topic.',
      ['topic'],
    );
    this.rebalanceDropped = counter(
      'sluice_rebalance_dropped_total',
      'Queued deliveries left to another member after a rebalance.',
    );
    this.laneRecordsLeft = counter(
      'sluice_lane_records_left_total',
      "Lane records left in Kafka because their tenant was over its share of this process's buffer.",
    );
    this.laneRereads = counter(
      'sluice_lane_rereads_total',
      'Lane partitions read again from their first record left in Kafka, once its tenant had room.',
    );

    this.scopeChildren = new Children(([scope]) => this.scopeViolations.labels(scope));
    if (opts.processMetrics) withWorkDrivenDelay(() => collectDefaultMetrics({ register: this.registry }));
  }

  tenant(id: string | undefined): string {
    return this.tenantLabel && id !== undefined ? id : '';
  }

  /** One request answered (route: "METHOD /pattern"; seconds since it arrived). */
  request(route: string, status: number, tenant: string | undefined, seconds: number): void {
    this.requests.child(route, statusText(status), this.tenant(tenant)).value++;
    this.requestDuration.observe(this.requestDuration.child(route), seconds);
  }

  published(tenant: string, n = 1): void {
    this.eventsPublished.child(this.tenant(tenant)).value += n;
  }

  fannedOut(outcome: 'matched' | 'unmatched' | 'malformed'): void {
    this.fanOutEvents.child(outcome).value++;
  }

  filterEvaluated(tenant: string, outcome: 'matched' | 'unmatched' | 'error'): void {
    this.filterEvaluations.child(this.tenant(tenant), outcome).value++;
  }

  delivery(outcome: string): void {
    this.deliveries.child(outcome).value++;
  }

  scopeViolation(scope: string): void {
    this.scopeChildren.get(scope).inc();
  }

  attempt(attempt: number, ok: boolean, durationMs: number): void {
    const result = ok ? 'success' : 'failure';
    this.attempts.child(attemptText(attempt), result).value++;
    this.attemptDuration.observe(this.attemptDuration.child(result), durationMs / 1000);
  }

  rungLate(rung: string, seconds: number): void {
    this.rungLateness.observe(this.rungLateness.child(rung), seconds);
  }

  /** A gauge read when scraped: `read` returns one value, or values by label. */
  gauge(name: string, help: string, read: () => number): void;
  gauge<L extends string>(
    name: string,
    help: string,
    read: () => Array<[Partial<Record<L, string>>, number]>,
    labelNames: L[],
  ): void;
  gauge(
    name: string,
    help: string,
    read: () => number | Array<[Partial<Record<string, string>>, number]>,
    labelNames: string[] = [],
  ): void {
    this.registry.removeSingleMetric(name);
    new Gauge({
      name,
      help,
      labelNames,
      registers: [this.registry],
      collect() {
        this.reset();
        const v = read();
        if (typeof v === 'number') this.set(v);
        else for (const [labels, n] of v) this.set(labels as Record<string, string>, n);
      },
    });
  }

  /** The value of one series (0 when absent): for tests and benchmarks. */
  async get(name: string, labels: Record<string, string | number> = {}): Promise<number> {
    const metric = this.registry.getSingleMetric(name);
    if (!metric) return 0;
    const data = await metric.get();
    const want = Object.entries(labels);
    let sum = 0;
    for (const v of data.values) {
      if (String(data.type) === 'histogram' && !(v as { metricName?: string }).metricName?.endsWith('_count')) continue;
      if (want.every(([k, x]) => String((v.labels as Record<string, unknown>)[k]) === String(x))) sum += v.value;
    }
    return sum;
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }

  /**
   * The counters and histograms alone, each rendered on its own: what a worker hands its primary as
   * it retires (cli/workers.ts), once its stores are closed and a gauge reading them would throw.
   */
  async countersPage(): Promise<string> {
    const pages: string[] = [];
    for (const metric of this.registry.getMetricsAsArray()) {
      // prom-client's metrics and the Fast ones all name their type (get() would collect a gauge).
      const { type } = metric as unknown as { type: string };
      if (type !== 'counter' && type !== 'histogram') continue;
      const alone = new Registry();
      alone.registerMetric(metric as unknown as Counter);
      pages.push(await alone.metrics());
    }
    return pages.join('');
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

const STATUS = new Map<number, string>();
function statusText(status: number): string {
  let s = STATUS.get(status);
  if (s === undefined) {
    s = String(status);
    STATUS.set(status, s);
  }
  return s;
}

const ATTEMPTS = Array.from({ length: 32 }, (_, i) => String(i));
function attemptText(n: number): string {
  return ATTEMPTS[n] ?? String(n);
}

/**
 * Runs `fn` (prom-client's default metrics) with `monitorEventLoopDelay` giving a histogram that
 * samples only while the process works (core/event-loop-delay.ts); prom-client asks perf_hooks
 * for it once, there.
 */
function withWorkDrivenDelay(fn: () => void): void {
  const perfHooks = createRequire(import.meta.url)('node:perf_hooks') as { monitorEventLoopDelay: unknown };
  const real = perfHooks.monitorEventLoopDelay as typeof monitorEventLoopDelay;
  // prom-client calls it once, here; its histogram is then this one (its only uses: eventLoopLag.js).
  perfHooks.monitorEventLoopDelay = (o?: { resolution?: number }) =>
    workDrivenDelay(o?.resolution ?? 10, undefined, undefined, real);
  try {
    fn();
  } finally {
    perfHooks.monitorEventLoopDelay = real;
  }
}
