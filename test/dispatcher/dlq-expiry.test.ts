import t from 'tap';
import { startTestNode, call, until } from '../helpers/sluice.ts';
import { receiver, registerEndpoint, publish, type TestReceiver } from './receiver.ts';

// 60480: 7 days run in 10 s, the 72-hour span in about 4.3 s. At this scale a loaded machine makes
// each attempt late by hours of scaled time, and 5 days (7 s) of failures would disable the endpoint
// before attempt 17: the disable waits a year here (test/webhooks/steering.test.ts covers it).
const SCALE = 60480;
const node = await startTestNode(
  {
    SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
    SLUICE_TIME_SCALE: String(SCALE),
    SLUICE_WEBHOOK_DISABLE_AFTER_HOURS: String(24 * 365),
  },
  { dispatcher: true },
);
const receivers: TestReceiver[] = [];
t.teardown(async () => {
  for (const r of receivers) await r.close();
  await node.close();
});
const token = await node.token(await node.client('admin', 'acme'));

const list = async () =>
  (await call(node.base, 'GET', '/v1/webhooks/dlq', { token })).json.data as Array<Record<string, any>>;

t.test('a DLQ entry leaves the list 7 scaled days after it was dead-lettered', async (t) => {
  const r = await receiver(503);
  receivers.push(r);
  const ep = await registerEndpoint(node, token, r.url, ['pipeline.failed']);
  const ev = (await publish(node, token, { type: 'pipeline.failed', data: {} })).json;
  const [entry] = await until(list, (d) => d.some((e) => e.event_id === ev.id), 30_000, 'dead-lettered');
  t.equal(entry.attempts, 17);
  t.equal(entry.endpoint_id, ep.id);
  const expires = Date.parse(entry.expires_at);
  t.equal(expires - Date.parse(entry.dead_lettered_at), Math.round((7 * 86400_000) / SCALE));
  await until(list, (d) => !d.some((e) => e.event_id === ev.id), 30_000, 'expired');
  t.ok(Date.now() >= expires, 'gone only once expires_at passed');
  t.equal(
    (await call(node.base, 'POST', `/v1/webhooks/dlq/${entry.id}/replay`, { token })).status,
    404,
    'an expired entry cannot be replayed',
  );
});

t.test(
  'a delivery for an endpoint still PENDING when the 72-hour span runs out goes to the DLQ unattempted',
  async (t) => {
    const r = await receiver(200);
    receivers.push(r);
    r.pingStatus = 500;
    const ep = await registerEndpoint(node, token, r.url, ['inference.failed']);
    t.equal(ep.state, 'PENDING');
    const ev = (await publish(node, token, { type: 'inference.failed', data: { waited: true } })).json;
    const entries = await until(
      list,
      (d) => d.some((e) => e.event_id === ev.id),
      30_000,
      'dead-lettered after the span',
    );
    const entry = entries.find((e) => e.event_id === ev.id)!;
    t.equal(entry.attempts, 0, 'the wait counted no attempts');
    t.match(entry.last_error, /PENDING/);
    t.equal(r.events().length, 0, 'never attempted');
  },
);
