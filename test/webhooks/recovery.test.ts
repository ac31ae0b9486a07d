/**
 * Recovery of a time window (POST /v1/webhooks/endpoints/{id}/recover): dead-lettered deliveries are
 * written straight onto the node's DLQ topic (as the dispatcher would have), then recovered through
 * the API to a real receiver. Each in-window delivery arrives once, as attempt 1, at the job's pace;
 * the progress reaches found = sent = delivered; an overlapping second job is 409; nothing outside the
 * window, of another endpoint or of another tenant is touched; bad windows are 400s.
 */
import t from 'tap';
import { startTestNode, call, until, assertInvalid } from '../helpers/sluice.ts';
import { receiver, registerEndpoint, type Hit, type TestReceiver } from '../dispatcher/receiver.ts';
import type { DlqEntry } from '../../core/webhooks/records.ts';
import { deadLetters, writeDeadLetters } from '../helpers/dead-letters.ts';

const TENANT = 'acme';
const OTHER = 'globex';
// 0.1 of 200/s: a job sends 20 deliveries a second (at most 6 more at once).
const RATE = 20;
const node = await startTestNode(
  {
    SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
    SLUICE_KAFKA_STALE_MS: '30000',
    SLUICE_RECOVERY_SHARE: '0.1',
    SLUICE_RECOVERY_CAPACITY_PER_SECOND: '200',
  },
  { dispatcher: true },
);
const receivers: TestReceiver[] = [];
t.teardown(async () => {
  for (const r of receivers) await r.close();
  await node.close();
});

const admin = await node.client('admin', TENANT);
const token = await node.token(admin);
const readOnly = await node.token(admin, 'webhooks:read');
const otherToken = await node.token(await node.client('admin', OTHER));

const HOUR = 3600_000;

/** `n` entries of one endpoint whose last attempts lie `agoMs` before now and later, 10 ms apart. */
const entries = (tenant: string, endpointId: string, n: number, tag: string, agoMs: number): DlqEntry[] =>
  deadLetters(tenant, endpointId, n, tag, { firstAt: Date.now() - agoMs, spacingMs: 10 });
const writeDlq = (list: DlqEntry[]) => writeDeadLetters(node.ctx.topics.dlq, list);

const dlqCount = (tenant: string, endpointId: string) =>
  node.ctx.dlq.count(tenant, { endpoint_id: endpointId }, Date.now());

async function endpointWith(tok: string): Promise<{ id: string; r: TestReceiver }> {
  const r = await receiver(200);
  receivers.push(r);
  const ep = await registerEndpoint(node, tok, r.url, ['pipeline.failed']);
  return { id: ep.id, r };
}

const recover = (tok: string, id: string, body: unknown) =>
  call(node.base, 'POST', `/v1/webhooks/endpoints/${id}/recover`, { token: tok, body });
const job = (tok: string, id: string, jobId: string) =>
  call(node.base, 'GET', `/v1/webhooks/endpoints/${id}/recover/${jobId}`, { token: tok });

t.test('a window is re-sent once each, as attempt 1, at its pace, and its progress reaches delivered', async (t) => {
  const N = 60;
  const ep = await endpointWith(token);
  const sibling = await endpointWith(token);
  const inWindow = entries(TENANT, ep.id, N, 'in', 2 * HOUR);
  const older = entries(TENANT, ep.id, 5, 'old', 5 * HOUR);
  const siblings = entries(TENANT, sibling.id, 5, 'sib', 2 * HOUR);
  await writeDlq([...older, ...inWindow, ...siblings]);
  await until(
    () => dlqCount(TENANT, ep.id),
    (n) => n === N + 5,
    30_000,
    'the entries listed',
  );
  await until(
    () => dlqCount(TENANT, sibling.id),
    (n) => n === 5,
    30_000,
    "the sibling's entries listed",
  );

  const since = new Date(Date.now() - 3 * HOUR).toISOString();
  const res = await recover(token, ep.id, { since });
  t.equal(res.status, 202, res.text);
  t.match(res.headers.get('location'), `/v1/webhooks/endpoints/${ep.id}/recover/${res.json.id}`);
  t.match(res.json, { endpoint_id: ep.id, state: 'running', found: N, since });
  t.equal(res.json.rate_per_second, RATE, 'the pace is the share of the capacity');

  // An overlapping second job while the first runs: 409 naming it; a disjoint window of the same endpoint runs.
  const again = await recover(token, ep.id, { since: new Date(Date.now() - 4 * HOUR).toISOString() });
  t.equal(again.status, 409, again.text);
  t.equal(again.json?.code, 'CONFLICT');
  t.equal(again.json?.job_id, res.json.id, 'the 409 names the running job');
  const disjoint = await recover(token, ep.id, {
    since: new Date(Date.now() - 6 * HOUR).toISOString(),
    until: new Date(Date.now() - 4 * HOUR).toISOString(),
  });
  t.equal(disjoint.status, 202, `a disjoint window runs beside it: ${disjoint.text}`);
  t.equal(disjoint.json.found, 5, 'it finds the older entries only');

  const done = await until(
    async () => (await job(token, ep.id, res.json.id)).json,
    (j) => j.state === 'completed' && j.delivered === N,
    60_000,
    'the job completed and delivered',
  );
  t.match(done, { found: N, sent: N, delivered: N, failed: 0 });
  t.type(done.finished_at, 'string');

  const hits = await ep.r.until((e) => e.length >= N + 5, 30_000, 'every recovered delivery');
  const recovered = hits.filter((h) => (h.body.data as { tag: string }).tag === 'in');
  t.same(
    recovered.map((h) => h.body.id).sort(),
    inWindow.map((e) => e.event_id).sort(),
    'each in-window delivery arrived exactly once',
  );
  t.ok(
    hits.every((h) => h.headers['x-service-delivery-attempt'] === '1'),
    'each with a fresh attempt count',
  );
  t.equal(dlqCount(TENANT, ep.id), 0, 'they all left the DLQ');
  t.equal(dlqCount(TENANT, sibling.id), 5, "the sibling endpoint's entries stay");
  t.equal(sibling.r.events().length, 0, 'the sibling endpoint got nothing');

  // The pace: never more than the rate and its burst in any second, so the window took its time.
  const times = recovered.map((h: Hit) => h.at).sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[i] - times[j] >= 1000) j++;
    most = Math.max(most, i - j + 1);
  }
  t.ok(most <= RATE * 1.5, `at most ~${RATE} a second (the busiest second had ${most})`);
  t.ok(
    times[times.length - 1] - times[0] >= ((N - RATE) / RATE) * 1000,
    `the 60 took ~3 s, not one burst (${times[times.length - 1] - times[0]} ms)`,
  );

  // At most once: the same window again finds nothing.
  const twice = await recover(token, ep.id, { since });
  t.equal(twice.status, 202);
  t.equal(twice.json.found, 0, 'a second recovery of the window finds nothing to re-send');

  const audit = node.ctx.auditView
    .page(TENANT, 0, 100_000)
    .data.filter((e) => e.action === 'endpoint.recovery_started' && e.subject.includes(res.json.id));
  t.equal(audit.length, 1, 'the recovery is audited once');
});

t.test('still-failing deliveries are re-sent as fresh ones and their own retries stop', async (t) => {
  const ep = await endpointWith(token);
  ep.r.answer = 500;
  const ids: string[] = [];
  for (let i = 0; i < 4; i++) {
    const res = await call(node.base, 'POST', '/v1/webhooks/events', {
      token,
      body: { type: 'pipeline.failed', data: { failing: i } },
    });
    ids.push(res.json.id);
  }
  // Each failed once and waits on the 30 s rung: the attempt history shows it (a digest a second).
  await until(
    async () => (await call(node.base, 'GET', `/v1/webhooks/endpoints/${ep.id}/attempts`, { token })).json.data,
    (d: { ok: boolean; outcome: string }[]) => d.filter((a) => !a.ok && a.outcome === 'retry').length === 4,
    30_000,
    'four failed first attempts in the history',
  );
  const failedAt = Date.now();
  ep.r.answer = 200;
  const res = await recover(token, ep.id, { since: new Date(Date.now() - 10 * 60_000).toISOString() });
  t.equal(res.status, 202, res.text);
  t.equal(res.json.found, 4, 'the four still-failing deliveries are found');
  const done = await until(
    async () => (await job(token, ep.id, res.json.id)).json,
    (j) => j.state === 'completed' && j.delivered === 4,
    60_000,
    'the job completed and delivered',
  );
  t.match(done, { found: 4, sent: 4, delivered: 4, failed: 0, error: null });
  t.same(
    ep.r
      .receipts()
      .map((h) => h.body.id)
      .sort(),
    [...ids].sort(),
    'each event was received once',
  );
  t.ok(
    ep.r.receipts().every((h) => h.headers['x-service-delivery-attempt'] === '1'),
    'as attempt 1',
  );
  // The old deliveries were due again ~30 s (jittered) after their failure: none of them comes.
  await new Promise((r) => setTimeout(r, Math.max(0, failedAt + 45_000 - Date.now())));
  t.equal(
    ep.r.events().filter((h) => h.headers['x-service-delivery-attempt'] !== '1').length,
    0,
    'no retry of the old deliveries',
  );
  t.equal(ep.r.receipts().length, 4, 'nothing more arrived');
  // A second recovery of the window finds them no more.
  const again = await recover(token, ep.id, { since: new Date(Date.now() - 10 * 60_000).toISOString() });
  t.equal(again.json.found, 0, 'a second recovery finds nothing');
});

t.test('a tenant cannot see or recover another tenant’s endpoint or job', async (t) => {
  const ep = await endpointWith(token);
  const res = await recover(token, ep.id, { since: new Date(Date.now() - HOUR).toISOString() });
  t.equal(res.status, 202, res.text);
  const theirs = await recover(otherToken, ep.id, { since: new Date(Date.now() - HOUR).toISOString() });
  t.equal(theirs.status, 404, 'recovering another tenant’s endpoint is 404');
  t.equal((await job(otherToken, ep.id, res.json.id)).status, 404, 'another tenant’s job is 404');
  const own = await endpointWith(otherToken);
  t.equal((await job(otherToken, own.id, res.json.id)).status, 404, 'nor under one of its own endpoints');
  t.equal((await job(token, ep.id, 'rcv_nope')).status, 404, 'an unknown job is 404');
  t.equal((await job(readOnly, ep.id, res.json.id)).status, 200, 'webhooks:read reads a job');
  const refused = await recover(readOnly, ep.id, { since: new Date(Date.now() - HOUR).toISOString() });
  t.equal(refused.status, 403, 'starting one needs webhooks:write');
  t.equal(refused.json?.missing_scope, 'webhooks:write');
});

t.test('bad windows are 400 naming the field', async (t) => {
  const ep = await endpointWith(token);
  const now = Date.now();
  const iso = (ms: number) => new Date(ms).toISOString();
  assertInvalid(t, await recover(token, ep.id, {}), 'no since', ['$.since']);
  assertInvalid(t, await recover(token, ep.id, { since: 'yesterday' }), 'not a date-time', ['$.since']);
  assertInvalid(t, await recover(token, ep.id, { since: iso(now - 8 * 24 * HOUR) }), 'past retention', ['$.since']);
  assertInvalid(t, await recover(token, ep.id, { since: iso(now + HOUR) }), 'in the future', ['$.since']);
  assertInvalid(
    t,
    await recover(token, ep.id, { since: iso(now - HOUR), until: iso(now - 2 * HOUR) }),
    'until before since',
    ['$.until'],
  );
  assertInvalid(t, await recover(token, ep.id, { since: iso(now - HOUR), extra: 1 }), 'unknown field', ['$.extra']);
  const missing = await recover(token, 'ep_missing', { since: iso(now - HOUR) });
  t.equal(missing.status, 404);
  t.equal(missing.headers.get('content-type'), 'application/problem+json');
});
