/**
 * One published event whose endpoint fails twice then succeeds makes one trace: the edge request,
 * the produce and consume spans through sluice.events, sluice.deliveries and the retry rung, each
 * attempt with its HTTP client span; and the receiver saw that trace id in `traceparent`.
 */
import t from 'tap';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { SpanKind } from '@opentelemetry/api';
import { startTracedNode } from '../helpers/tracing.ts';
import { registerEndpoint, publish, sleep } from '../dispatcher/receiver.ts';

// 600: the retry rungs hold a failed delivery for 50 ms and then 200 ms.
const { exporter, node, r, close } = await startTracedNode({ SLUICE_TIME_SCALE: '600' }, 200);
t.teardown(close);

t.test('publish → fan-out → three attempts (two failures, one success) is one trace', async (t) => {
  let calls = 0;
  r.answerFor = () => (++calls <= 2 ? 500 : 200);
  const token = await node.token(await node.client('admin', 'acme'));
  await registerEndpoint(node, token, r.url, ['inference.completed']);
  const res = await publish(node, token, { type: 'inference.completed', data: { n: 1 } });
  t.equal(res.status, 202);
  await r.until((hits) => hits.length >= 3, 30_000, 'three attempts');

  const ingress = () =>
    exporter.getFinishedSpans().find((s) => s.kind === SpanKind.SERVER && s.name === 'POST /v1/webhooks/events');
  const deadline = Date.now() + 20_000;
  let spans: ReadableSpan[] = [];
  for (;;) {
    const root = ingress();
    if (root) {
      spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === root.spanContext().traceId);
      if (spans.some((s) => s.kind === SpanKind.CONSUMER && s.attributes['sluice.outcome'] === 'delivered')) break;
    }
    if (Date.now() > deadline) break;
    await sleep(50);
  }
  const root = ingress();
  t.ok(root, 'the edge request has a SERVER span');
  if (!root) return;
  const traceId = root.spanContext().traceId;
  const names = (kind: SpanKind) => spans.filter((s) => s.kind === kind).map((s) => s.name);
  const p = node.config.topicPrefix;
  t.ok(names(SpanKind.PRODUCER).includes(`send ${p}.events`), 'the event is produced under the request');
  t.ok(names(SpanKind.CONSUMER).includes(`process ${p}.events`), 'the fan-out consumes it in the same trace');
  t.ok(names(SpanKind.PRODUCER).includes(`send ${p}.deliveries`), 'the fan-out produces the delivery');
  t.ok(names(SpanKind.CONSUMER).includes(`process ${p}.deliveries`), 'the dispatcher consumes the delivery');
  t.equal(
    names(SpanKind.CONSUMER).filter((n) => n.startsWith(`process ${p}.retry.`)).length,
    2,
    'and each retry from its rung',
  );
  t.equal(
    names(SpanKind.PRODUCER).filter((n) => n.startsWith(`send ${p}.retry.`)).length,
    2,
    'the two failures are produced to rungs',
  );
  const attempts = spans
    .filter((s) => s.name.startsWith('webhook attempt '))
    .sort((a, b) => Number(a.attributes['sluice.attempt']) - Number(b.attributes['sluice.attempt']));
  t.same(
    attempts.map((s) => s.attributes['sluice.attempt']),
    [1, 2, 3],
    'all three attempts',
  );
  t.same(
    attempts.map((s) => s.attributes['sluice.result']),
    ['failure', 'failure', 'success'],
  );
  const clients = spans.filter((s) => s.kind === SpanKind.CLIENT);
  t.equal(clients.length, 3, 'each attempt has an HTTP client span');
  for (const c of clients)
    t.ok(
      attempts.some((a) => a.spanContext().spanId === c.parentSpanContext?.spanId),
      `${c.name} is a child of an attempt`,
    );
  t.same(clients.map((c) => c.attributes['http.response.status_code']).sort(), [200, 500, 500]);
  // Every span of the trace hangs off another span of it, back to the edge request.
  const ids = new Set(spans.map((s) => s.spanContext().spanId));
  t.ok(
    spans.every((s) => s === root || (s.parentSpanContext && ids.has(s.parentSpanContext.spanId))),
    'one connected trace',
  );

  const hits = r.events();
  t.equal(hits.length, 3);
  for (const h of hits) {
    const tp = String(h.headers.traceparent ?? '');
    t.match(tp, /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/, 'the receiver got a traceparent');
    t.equal(tp.split('-')[1], traceId, 'carrying the trace id of the publish');
  }
  const clientIds = new Set(clients.map((c) => c.spanContext().spanId));
  t.ok(
    hits.every((h) => clientIds.has(String(h.headers.traceparent).split('-')[2])),
    "whose parent is the attempt's HTTP client span",
  );
});
