/**
 * Answers that steer delivery, against a real node with its dispatcher and real receivers:
 * 429/503 with Retry-After (seconds, or an HTTP date; capped at what is left of the retry span),
 * 410 Gone (the endpoint is DISABLED: nothing more is attempted, queued deliveries go to the DLQ
 * with the reason, the tenant's other endpoints get `endpoint.disabled`, all audited), the
 * 5-day disable (scaled), and re-enabling with POST .../verify.
 */
import t from 'tap';
import { call, startTestNode, until } from '../helpers/sluice.ts';
import { publish, receiver, registerEndpoint, sleep, type TestReceiver } from '../dispatcher/receiver.ts';

// 43200: the 72-hour retry span runs in 6 s, the 5-day disable in 10 s, the first retry after 0.7 ms.
const SCALE = 43_200;
const node = await startTestNode(
  { SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true', SLUICE_TIME_SCALE: String(SCALE) },
  { dispatcher: true },
);
const receivers: TestReceiver[] = [];
t.teardown(async () => {
  for (const r of receivers) await r.close();
  await node.close();
});

async function setUp(tenant: string, answer: number, events = ['pipeline.failed']) {
  const token = await node.token(await node.client('admin', tenant));
  const r = await receiver(answer);
  receivers.push(r);
  const ep = await registerEndpoint(node, token, r.url, events);
  return { token, r, ep };
}

async function endpoint(token: string, id: string) {
  return (await call(node.base, 'GET', `/v1/webhooks/endpoints/${id}`, { token })).json;
}

async function auditActions(
  token: string,
  subject: string,
): Promise<{ action: string; reason: string | null; actor: string }[]> {
  const res = await call(node.base, 'GET', '/v1/audit?limit=1000', { token });
  return (res.json?.data ?? []).filter((e: { subject: string }) => e.subject === subject);
}

async function dlq(token: string) {
  return ((await call(node.base, 'GET', '/v1/webhooks/dlq?limit=1000', { token })).json?.data ?? []) as {
    event_id: string;
    endpoint_id: string;
    last_status: number | null;
    last_error: string | null;
  }[];
}

t.test('429 with Retry-After in seconds: the next attempt is not before it', async (t) => {
  const { token, r } = await setUp('steer-429', 200);
  r.answerFor = (hit) => (r.events().filter((h) => h.body.id === hit.body.id).length === 0 ? 429 : 200);
  r.headersFor = (hit): Record<string, string> => (hit.answer === 429 ? { 'retry-after': '2' } : {});
  await publish(node, token, { type: 'pipeline.failed', data: { n: 1 } });
  const hits = await r.until((e) => e.length >= 2, 30_000, 'the retry');
  t.equal(hits[0].answer, 429);
  t.equal(hits[1].headers['x-service-delivery-attempt'], '2', 'it counted as a failed attempt');
  const gap = hits[1].at - hits[0].at;
  t.ok(
    gap >= 2000,
    `the second attempt came ${gap} ms after the first (Retry-After: 2; the scaled backoff alone is under 1 ms)`,
  );
  t.equal(hits[1].answer, 200);
});

t.test('503 with an HTTP-date Retry-After: the next attempt is not before that date', async (t) => {
  const { token, r } = await setUp('steer-503', 200);
  let date = '';
  r.answerFor = (hit) => (r.events().filter((h) => h.body.id === hit.body.id).length === 0 ? 503 : 200);
  r.headersFor = (hit): Record<string, string> => {
    if (hit.answer !== 503) return {};
    date = new Date(Math.ceil((Date.now() + 3000) / 1000) * 1000).toUTCString();
    return { 'retry-after': date };
  };
  await publish(node, token, { type: 'pipeline.failed', data: { n: 1 } });
  const hits = await r.until((e) => e.length >= 2, 30_000, 'the retry');
  t.match(date, /GMT$/, `Retry-After: ${date}`);
  t.ok(
    hits[1].at >= Date.parse(date),
    `the second attempt came at ${new Date(hits[1].at).toISOString()}, not before ${date}`,
  );
});

t.test('a Retry-After beyond the retry span is capped at what is left of it', async (t) => {
  const { token, r } = await setUp('steer-cap', 200);
  r.answerFor = (hit) => (r.events().filter((h) => h.body.id === hit.body.id).length === 0 ? 429 : 200);
  r.headersFor = (hit): Record<string, string> => (hit.answer === 429 ? { 'retry-after': '86400' } : {});
  await publish(node, token, { type: 'pipeline.failed', data: { n: 1 } });
  // A day asked (Retry-After is real time); what is left of the 72 h span is 6 s real at this scale.
  // Uncapped, the retry would come a day later and `until` would throw after 30 s. The cap's exact
  // due time is checked on an injected clock in test/dispatcher/ladder-decisions.test.ts.
  const hits = await r.until((e) => e.length >= 2, 30_000, 'the capped retry');
  t.comment(`the second attempt came ${hits[1].at - hits[0].at} ms after the first`);
  t.same(
    hits.slice(0, 2).map((h) => h.answer),
    [429, 200],
    'the retry came within the span: a 429 asking for a day, then the delivery',
  );
});

t.test(
  '410 Gone: DISABLED, queued deliveries to the DLQ with the reason, endpoint.disabled to the others, audited; ' +
    'verify re-enables',
  async (t) => {
    const { token, r, ep } = await setUp('steer-410', 500);
    const watcher = await receiver(200);
    receivers.push(watcher);
    const other = await registerEndpoint(node, token, watcher.url, ['endpoint.disabled']);

    // Event 1 keeps failing (500) and waits on the retry rungs; event 2 gets a 410.
    const e1 = (await publish(node, token, { type: 'pipeline.failed', data: { n: 1 } })).json;
    await r.until((e) => e.some((h) => h.body.id === e1.id), 30_000, 'event 1');
    r.answerFor = (hit) => (hit.body.id === e1.id ? 500 : 410);
    const e2 = (await publish(node, token, { type: 'pipeline.failed', data: { n: 2 } })).json;
    // Two waits, so a failure says which step did not come: the 410 answered, then the state.
    await r.until((e) => e.some((h) => h.body.id === e2.id), 120_000, 'event 2 answered with 410');

    // The disable appends its audit entry, then commits the record: a failure says which came.
    const disabled = await until(
      () => endpoint(token, ep.id),
      (e) => e.state === 'DISABLED',
      60_000,
      'DISABLED',
    ).catch(async (err) => {
      const actions = (await auditActions(token, ep.id)).map((a) => a.action);
      throw new Error(`${(err as Error).message}; the endpoint's audit entries: ${JSON.stringify(actions)}`);
    });
    t.match(disabled.disabled_reason, /410 Gone/);
    t.type(disabled.disabled_at, 'string');

    const entries = await until(
      () => dlq(token),
      (d) => [e1.id, e2.id].every((id) => d.some((x) => x.event_id === id)),
      60_000,
      'both events in the DLQ',
    );
    const gone = entries.find((x) => x.event_id === e2.id)!;
    t.equal(gone.last_status, 410);
    t.match(gone.last_error, /410 Gone/);
    const queued = entries.find((x) => x.event_id === e1.id)!;
    t.match(queued.last_error, /DISABLED/, `the queued delivery went to the DLQ with the reason: ${queued.last_error}`);

    const [notice] = await watcher.until(
      (e) => e.some((h) => h.body.type === 'endpoint.disabled'),
      30_000,
      'endpoint.disabled',
    );
    const event = watcher.events().find((h) => h.body.type === 'endpoint.disabled')!;
    t.ok(notice);
    t.same(
      event.body.data,
      { endpoint_id: ep.id, url: r.url, reason: disabled.disabled_reason, disabled_at: disabled.disabled_at },
      'the other endpoint is told which and why',
    );
    t.notOk(
      r.events().some((h) => h.body.type === 'endpoint.disabled'),
      'the disabled endpoint itself is not sent it',
    );

    const audit = await auditActions(token, ep.id);
    t.ok(
      audit.some((e) => e.action === 'endpoint.disabled' && /410/.test(e.reason ?? '')),
      'audited as endpoint.disabled with the reason',
    );

    // No more attempts: a new event matches it no more, and nothing reaches it until it is
    // re-enabled (checked below, once a later event has reached it: the barrier).
    const seen = r.hits.length;
    const e3 = (await publish(node, token, { type: 'pipeline.failed', data: { n: 3 } })).json;
    t.equal(e3.matched_endpoints, 0, 'a DISABLED endpoint is matched by no new event');

    // Re-enabling: the ping (a 2xx) makes it ACTIVE, and deliveries flow again.
    r.answer = 200;
    r.answerFor = undefined;
    const verified = await call(node.base, 'POST', `/v1/webhooks/endpoints/${ep.id}/verify`, { token });
    t.equal(verified.status, 200);
    t.equal(verified.json.state, 'ACTIVE');
    t.equal(verified.json.disabled_reason, null);
    const e4 = (await publish(node, token, { type: 'pipeline.failed', data: { n: 4 } })).json;
    t.equal(e4.matched_endpoints, 1);
    await r.until(
      (e) => e.some((h) => h.body.id === e4.id && h.answer === 200),
      30_000,
      'a delivery after re-enabling',
    );
    // e4 was published after e3 and after the disable: whatever those caused reached it before e4.
    t.same(
      r.hits.slice(seen).map((h) => (h.body.type === 'ping' ? 'ping' : h.body.id === e4.id ? 'e4' : h.body.id)),
      ['ping', 'e4'],
      'while DISABLED nothing was sent to it: after the disable, only the re-enabling ping and e4',
    );
    t.ok(
      (await auditActions(token, ep.id)).some((e) => e.action === 'endpoint.enabled'),
      're-enabling is audited',
    );
    t.equal((await endpoint(token, other.id)).state, 'ACTIVE', 'the other endpoint was never touched');
  },
);

t.test('a failed verify leaves a DISABLED endpoint DISABLED', async (t) => {
  const { token, r, ep } = await setUp('steer-still-gone', 410);
  await publish(node, token, { type: 'pipeline.failed', data: { n: 1 } });
  await until(
    () => endpoint(token, ep.id),
    (e) => e.state === 'DISABLED',
    60_000,
    'DISABLED',
  );
  r.pingStatus = 410;
  const res = await call(node.base, 'POST', `/v1/webhooks/endpoints/${ep.id}/verify`, { token });
  t.equal(res.status, 200);
  t.equal(res.headers.get('sluice-ping-result'), 'failed');
  t.equal(res.json.state, 'DISABLED');
});

t.test(
  'every attempt failing for 5 days (scaled: 10 s) disables the endpoint; one that sometimes succeeds stays ACTIVE',
  async (t) => {
    const { token, r, ep } = await setUp('steer-5-days', 500);
    // Alongside: a receiver that fails every first attempt and takes the retry, for as long.
    const flaky = await setUp('steer-flaky', 200);
    flaky.r.answerFor = (hit) => (hit.headers['x-service-delivery-attempt'] === '1' ? 500 : 200);
    // Keep both busy: each event dies after the 72-hour span (6 s), so publish one every 500 ms.
    const started = Date.now();
    let state = 'ACTIVE';
    for (let n = 0; state !== 'DISABLED'; n++) {
      if (Date.now() - started > 90_000) throw new Error('not DISABLED within 90 s');
      await publish(node, token, { type: 'pipeline.failed', data: { n } });
      await publish(node, flaky.token, { type: 'pipeline.failed', data: { n } });
      await sleep(500);
      state = (await endpoint(token, ep.id)).state;
    }
    const failed = r.events();
    t.ok(failed.length > 0 && failed.every((h) => h.answer === 500), `${failed.length} attempts, every one failed`);
    const span = (failed.at(-1)!.at - failed[0].at) * SCALE;
    t.ok(
      span >= 5 * 24 * 3600_000 * 0.98,
      `the failures spanned ${(span / 3600_000 / 24).toFixed(2)} days (scaled) before the disable`,
    );
    const rec = await endpoint(token, ep.id);
    t.match(rec.disabled_reason, /every attempt failed for 5 days/);
    t.ok(
      (await auditActions(token, ep.id)).some((e) => e.action === 'endpoint.disabled' && /5 days/.test(e.reason ?? '')),
      'audited',
    );

    const flakyHits = flaky.r.events();
    const flakySpan = (flakyHits.at(-1)!.at - flakyHits[0].at) * SCALE;
    t.ok(
      flakyHits.some((h) => h.answer === 500) && flakyHits.some((h) => h.answer === 200),
      `the flaky endpoint failed and succeeded over ${(flakySpan / 3600_000 / 24).toFixed(2)} days (scaled)`,
    );
    t.equal(
      (await endpoint(flaky.token, flaky.ep.id)).state,
      'ACTIVE',
      'an endpoint whose attempts sometimes succeed is not disabled',
    );
  },
);
