/**
 * A DLQ replay carries the replay request's trace context (core/webhooks/dlq-replay.ts): an event
 * whose endpoint failed every attempt is dead-lettered; `POST /v1/webhooks/dlq/{id}/replay` with a
 * `traceparent` header puts it back into delivery, and the replayed delivery's spans (the produce,
 * the dispatcher's consume, the attempt and its HTTP client span) are in the caller's trace, not in
 * the trace of the original publish; the receiver's `traceparent` carries the caller's trace id.
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { SpanKind } from '@opentelemetry/api';
import { call, until } from '../helpers/sluice.ts';
import { startTracedNode } from '../helpers/tracing.ts';
import { publish, registerEndpoint } from '../dispatcher/receiver.ts';

// 43200: the 72-hour retry span runs in 6 s; the disable is put out of reach (a year, 12 min scaled).
const { exporter, node, r, close } = await startTracedNode(
  { SLUICE_TIME_SCALE: '43200', SLUICE_WEBHOOK_DISABLE_AFTER_HOURS: '8760' },
  500,
);
t.teardown(close);

const inTrace = (traceId: string): ReadableSpan[] =>
  exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);

t.test('the replayed delivery continues the trace of the replay request', async (t) => {
  const token = await node.token(await node.client('admin', 'acme'));
  await registerEndpoint(node, token, r.url, ['pipeline.failed']);
  const pub = await publish(node, token, { type: 'pipeline.failed', data: { n: 1 } });
  t.equal(pub.status, 202);
  const dlq = await until(
    () => call(node.base, 'GET', '/v1/webhooks/dlq?limit=10', { token }),
    (res) => res.status === 200 && res.json.data.length === 1,
    60_000,
    'the dead letter',
  );
  const entry = dlq.json.data[0];
  const failed = r.events().length;
  t.ok(failed > 1 && r.events().every((h) => h.answer === 500), `dead-lettered after ${failed} failed attempts`);
  const publishTrace = String(r.events()[0].headers.traceparent).split('-')[1];

  r.answer = 200;
  const traceId = randomBytes(16).toString('hex');
  const callerSpan = randomBytes(8).toString('hex');
  const replay = await call(node.base, 'POST', `/v1/webhooks/dlq/${entry.id}/replay`, {
    token,
    headers: { traceparent: `00-${traceId}-${callerSpan}-01` },
  });
  t.same({ status: replay.status, json: replay.json }, { status: 202, json: { replayed: 1 } });
  const [hit] = (await r.until((e) => e.length > failed, 30_000, 'the replayed delivery')).slice(failed);
  t.equal(hit.answer, 200);
  t.equal(hit.body.id, pub.json.id, 'the same event');
  const tp = String(hit.headers.traceparent ?? '').split('-');
  t.equal(tp[1], traceId, "the receiver's traceparent carries the replay request's trace id");
  t.not(traceId, publishTrace, "not the original publish's");

  const p = node.config.topicPrefix;
  // Spans end a little after the receiver answered (the consume span once the outcome is recorded):
  // wait (on their names) for the HTTP client span and the consume span.
  await until(
    () => inTrace(traceId).map((s) => `${SpanKind[s.kind]} ${s.name} ${s.attributes['http.response.status_code']}`),
    (names) => names.includes('CLIENT POST 200') && names.some((n) => n.startsWith(`CONSUMER process ${p}.deliveries`)),
    20_000,
    'the attempt spans in the replay trace',
  );
  const spans = inTrace(traceId);
  const server = spans.find((s) => s.kind === SpanKind.SERVER);
  t.ok(server, 'the replay request has a SERVER span in the trace');
  t.equal(server?.parentSpanContext?.spanId, callerSpan, "a child of the caller's span");
  const names = (kind: SpanKind) => spans.filter((s) => s.kind === kind).map((s) => s.name);
  t.ok(names(SpanKind.PRODUCER).includes(`send ${p}.deliveries`), 'the replayed delivery is produced in it');
  t.ok(names(SpanKind.CONSUMER).includes(`process ${p}.deliveries`), 'the dispatcher consumes it in it');
  const attempts = spans.filter((s) => s.name.startsWith('webhook attempt '));
  t.same(
    attempts.map((s) => [
      s.attributes['sluice.attempt'],
      s.attributes['sluice.result'],
      s.attributes['sluice.event_id'],
    ]),
    [[1, 'success', pub.json.id]],
    'one attempt, attempt 1 of the fresh delivery, succeeded',
  );
  const client = spans.find((s) => s.kind === SpanKind.CLIENT);
  t.equal(client?.parentSpanContext?.spanId, attempts[0]?.spanContext().spanId, 'its HTTP client span');
  t.equal(tp[2], client?.spanContext().spanId, "whose span id the receiver's traceparent names");
  const ids = new Set(spans.map((s) => s.spanContext().spanId));
  t.ok(
    spans.every((s) => s === server || (s.parentSpanContext && ids.has(s.parentSpanContext.spanId))),
    'one connected trace under the replay request',
  );
  t.notOk(
    inTrace(publishTrace).some(
      (s) => s.name.startsWith('webhook attempt ') && s.attributes['sluice.result'] === 'success',
    ),
    'the original trace has no successful attempt',
  );
});
