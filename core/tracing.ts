/**
 * Tracing (OpenTelemetry). Off by default: `tracing.on` is false and every hot path checks it
 * before making a span, so an untraced process creates no span objects at all (the OTel API's
 * no-op spans still cost an allocation and a context switch per call).
 *
 * The W3C trace context travels in Kafka record headers (`traceparent`, `tracestate`) through
 * `sluice.events`, `sluice.deliveries`, every rung and the DLQ, and out to the receiver as
 * `traceparent`, so one trace reads: edge request → produce → fan-out (consume, produce) →
 * attempt 1 → rung → attempt 2 … → delivered or dead-lettered.
 *
 * The spans of that path are made here, beside it: `producing` around a Kafka write, `relaying` for
 * the fan-out, `consuming`/`consumed` around a delivery record, `attempting` around an attempt. Each
 * makes nothing when tracing is off, so the path's own files read as delivery logic.
 */
import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context as TraceContext,
  type Span,
  type TextMapGetter,
} from '@opentelemetry/api';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { IHeaders } from './kafka/client.ts';
import type { Config } from './config.ts';
import type { AttemptOutcome } from '../outbound/attempt.ts';
import type { DeliveryRecord, EndpointRecord } from './webhooks/records.ts';

export type { Span, TraceContext };
export { SpanKind };

/** Read on hot paths: false means no span is made anywhere in this process. */
export const tracing = { on: false };

const TRACER = 'sluice';
let sdk: { shutdown(): Promise<void> } | null = null;
let users = 0;

export interface TracingOptions {
  serviceName: string;
  exporter: Config['traceExporter'];
  sampleRatio: number;
  otlpEndpoint: string;
  /** Replaces the exporter (tests: an in-memory exporter behind a SimpleSpanProcessor). */
  spanProcessors?: SpanProcessor[];
}

/**
 * Starts the OpenTelemetry SDK for this process (once: later calls share it). With the exporter
 * "none" and no span processors it does nothing and tracing stays off. The SDK is loaded only
 * when needed, so an untraced process never loads it.
 */
export async function startTracing(opts: TracingOptions): Promise<{ stop(): Promise<void> }> {
  const noop = { stop: async () => {} };
  if (opts.exporter === 'none' && !opts.spanProcessors) return noop;
  users++;
  if (!sdk) {
    const [{ NodeSDK }, base, { W3CTraceContextPropagator }] = await Promise.all([
      import('@opentelemetry/sdk-node'),
      import('@opentelemetry/sdk-trace-base'),
      import('@opentelemetry/core'),
    ]);
    let processors = opts.spanProcessors;
    if (!processors) {
      const exporter =
        opts.exporter === 'console'
          ? new base.ConsoleSpanExporter()
          : new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter({ url: opts.otlpEndpoint });
      processors = [new base.BatchSpanProcessor(exporter)];
    }
    const s = new NodeSDK({
      serviceName: opts.serviceName,
      autoDetectResources: false,
      sampler: new base.ParentBasedSampler({ root: new base.TraceIdRatioBasedSampler(opts.sampleRatio) }),
      spanProcessors: processors,
      logRecordProcessors: [],
      instrumentations: [],
      textMapPropagator: new W3CTraceContextPropagator(),
    });
    s.start();
    sdk = s;
    tracing.on = true;
  }
  let stopped = false;
  return {
    async stop() {
      if (stopped) return;
      stopped = true;
      if (--users > 0 || !sdk) return;
      tracing.on = false;
      const s = sdk;
      sdk = null;
      await s.shutdown().catch(() => {});
    },
  };
}

const tracer = () => trace.getTracer(TRACER);

const kafkaGetter: TextMapGetter<IHeaders> = {
  get(carrier, key) {
    const v = carrier[key];
    if (v === undefined) return undefined;
    const first = Array.isArray(v) ? v[0] : v;
    return first === undefined ? undefined : first.toString();
  },
  keys: (carrier) => Object.keys(carrier),
};

/** The trace context a Kafka record (or an HTTP request's headers) carries; the root when none. */
export function extractContext(headers: IHeaders | Record<string, string> | undefined): TraceContext {
  if (!headers) return ROOT_CONTEXT;
  return propagation.extract(ROOT_CONTEXT, headers as IHeaders, kafkaGetter);
}

/** Adds `traceparent` (and `tracestate`) for `ctx` to `headers`. */
export function injectContext(ctx: TraceContext, headers: Record<string, string>): Record<string, string> {
  propagation.inject(ctx, headers);
  return headers;
}

export function startSpan(
  name: string,
  kind: SpanKind,
  parent: TraceContext,
  attributes?: Attributes,
): { span: Span; ctx: TraceContext } {
  const span = tracer().startSpan(name, { kind, attributes }, parent);
  return { span, ctx: trace.setSpan(parent, span) };
}

export function activeContext(): TraceContext {
  return context.active();
}

export function withContext<T>(ctx: TraceContext, fn: () => T): T {
  return context.with(ctx, fn);
}

export function endSpan(span: Span, error?: string | null, attributes?: Attributes): void {
  if (attributes) span.setAttributes(attributes);
  if (error) span.setStatus({ code: SpanStatusCode.ERROR, message: error });
  span.end();
}

/**
 * Runs a Kafka write under a PRODUCER span (child of `parent`, default the active context) and
 * hands `send` the headers that carry it; without tracing, `send` gets no headers.
 */
export async function producing<T>(
  topic: string,
  send: (headers: Record<string, string> | undefined) => Promise<T>,
  parent?: TraceContext,
  attributes?: Attributes,
): Promise<T> {
  if (!tracing.on) return send(undefined);
  const { span, ctx } = startSpan(`send ${topic}`, SpanKind.PRODUCER, parent ?? context.active(), {
    'messaging.system': 'kafka',
    'messaging.destination.name': topic,
    'messaging.operation.type': 'send',
    ...attributes,
  });
  try {
    const out = await send(injectContext(ctx, {}));
    span.end();
    return out;
  } catch (err) {
    endSpan(span, (err as Error).message);
    throw err;
  }
}

/** A span under way and the context it makes: the parent of what follows from it. */
export interface Traced {
  span: Span;
  ctx: TraceContext;
}

function consumerSpan(topic: string, headers: IHeaders | undefined, attributes: Attributes): Traced {
  return startSpan(`process ${topic}`, SpanKind.CONSUMER, extractContext(headers), {
    'messaging.system': 'kafka',
    'messaging.source.name': topic,
    'messaging.operation.type': 'process',
    ...attributes,
  });
}

/**
 * The fan-out's spans for one event read from topic `from`: a CONSUMER span (child of the context
 * the event carries) and, when it matched endpoints, a PRODUCER span for its deliveries on `to`.
 * Both go on `spans`, ended with the batch (`endSpans`). Returns the headers the deliveries carry;
 * undefined when tracing is off or nothing matched.
 */
export function relaying(
  spans: Span[],
  from: string,
  headers: IHeaders | undefined,
  to: string,
  eventId: string,
  matched: number,
): Record<string, string> | undefined {
  if (!tracing.on) return undefined;
  const consumed = consumerSpan(from, headers, { 'sluice.event_id': eventId, 'sluice.matched_endpoints': matched });
  spans.push(consumed.span);
  if (matched === 0) return undefined;
  const produced = startSpan(`send ${to}`, SpanKind.PRODUCER, consumed.ctx, {
    'messaging.system': 'kafka',
    'messaging.destination.name': to,
    'messaging.operation.type': 'send',
    'messaging.batch.message_count': matched,
  });
  spans.push(produced.span);
  return injectContext(produced.ctx, {});
}

/** Ends every span of `spans`: with an error status when `error` is given. */
export function endSpans(spans: readonly Span[], error?: string): void {
  for (const s of spans) endSpan(s, error);
}

/**
 * The CONSUMER span of a delivery record read from `topic`, child of the context the record carries
 * (the fan-out's, or an earlier attempt's); undefined when tracing is off. Its context is the parent
 * of the attempt and of the outcome's write; `consumed` ends it.
 */
export function consuming(
  topic: string,
  headers: IHeaders | undefined,
  rec: DeliveryRecord | null,
): Traced | undefined {
  if (!tracing.on) return undefined;
  return consumerSpan(
    topic,
    headers,
    rec
      ? { 'sluice.delivery_id': rec.delivery_id, 'sluice.endpoint_id': rec.endpoint_id, 'sluice.attempt': rec.attempt }
      : {},
  );
}

/** Ends a `consuming` span with the outcome its record came to (an error status when dead-lettered). */
export function consumed(traced: Traced | undefined, outcome: string): void {
  if (traced) endSpan(traced.span, outcome === 'dead-letter' ? 'dead-lettered' : null, { 'sluice.outcome': outcome });
}

/** Runs `fn(a, b)` in the span's context, so the log lines it writes carry the span's ids; plainly without one. */
export function within<A, B>(traced: Traced | undefined, fn: (a: A, b: B) => void, a: A, b: B): void {
  if (traced) context.with(traced.ctx, fn, undefined, a, b);
  else fn(a, b);
}

/**
 * Runs attempt `rec.attempt` under an INTERNAL span (signing included) with a CLIENT span for its
 * HTTP request, children of `parent`: `send` gets the headers that carry the CLIENT span to the
 * receiver (`traceparent`). Without tracing, or a parent, it is `send(rec, endpoint)`.
 */
export function attempting<T extends { result: AttemptOutcome }>(
  parent: TraceContext | undefined,
  rec: DeliveryRecord,
  endpoint: EndpointRecord,
  send: (rec: DeliveryRecord, endpoint: EndpointRecord, traceHeaders?: Record<string, string>) => Promise<T>,
): Promise<T> {
  if (!tracing.on || !parent) return send(rec, endpoint);
  return tracedAttempt(parent, rec, endpoint, send);
}

async function tracedAttempt<T extends { result: AttemptOutcome }>(
  parent: TraceContext,
  rec: DeliveryRecord,
  endpoint: EndpointRecord,
  send: (rec: DeliveryRecord, endpoint: EndpointRecord, traceHeaders?: Record<string, string>) => Promise<T>,
): Promise<T> {
  const a = startSpan(`webhook attempt ${rec.attempt}`, SpanKind.INTERNAL, parent, {
    'sluice.delivery_id': rec.delivery_id,
    'sluice.endpoint_id': endpoint.id,
    'sluice.attempt': rec.attempt,
    'sluice.event_id': rec.event.id,
  });
  const http = startSpan('POST', SpanKind.CLIENT, a.ctx, { 'http.request.method': 'POST', 'url.full': endpoint.url });
  try {
    const out = await send(rec, endpoint, injectContext(http.ctx, {}));
    const { result } = out;
    endSpan(
      http.span,
      result.status === null ? result.error : result.status >= 400 ? `HTTP ${result.status}` : null,
      result.status === null ? undefined : { 'http.response.status_code': result.status },
    );
    endSpan(a.span, result.ok ? null : result.error, { 'sluice.result': result.ok ? 'success' : 'failure' });
    return out;
  } catch (err) {
    endSpan(http.span, (err as Error).message);
    endSpan(a.span, (err as Error).message);
    throw err;
  }
}

/** The ids logs carry when a span is active (null when tracing is off or none is). */
export function currentIds(): { trace_id: string; span_id: string } | null {
  if (!tracing.on) return null;
  const span = trace.getSpan(context.active());
  if (!span) return null;
  const c = span.spanContext();
  return { trace_id: c.traceId, span_id: c.spanId };
}
