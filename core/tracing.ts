/**
 * Tracing (OpenTelemetry). Off by default: `tracing.on` is false and every hot path checks it
 * before making a span, so an untraced process creates no span objects at all (the OTel API's
 * no-op spans still cost an allocation and a context switch per call).
 *
 * The W3C trace context travels in Kafka record headers (`traceparent`, `tracestate`) through
 * `sluice.events`, `sluice.deliveries`, every rung and the DLQ, and out to the receiver as
 * `traceparent`, so one trace reads: edge request → produce → fan-out (consume, produce) →
 * attempt 1 → rung → attempt 2 … → delivered or dead-lettered.
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
import type { IHeaders } from 'kafkajs';
import type { Config } from './config.ts';

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

/** The ids logs carry when a span is active (null when tracing is off or none is). */
export function currentIds(): { trace_id: string; span_id: string } | null {
  if (!tracing.on) return null;
  const span = trace.getSpan(context.active());
  if (!span) return null;
  const c = span.spanContext();
  return { trace_id: c.traceId, span_id: c.spanId };
}
