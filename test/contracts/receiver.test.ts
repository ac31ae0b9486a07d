import t from 'tap';
import { createHmac } from 'node:crypto';
import { startTestNode, call } from '../helpers/sluice.ts';
import { startConformanceReceiver } from '../../contracts/receiver/server.ts';
import { checkDelivery } from '../../contracts/receiver/check.ts';
import { loadContract } from '../../contracts/contract.ts';
import { ContractSchemas } from '../../contracts/schemas.ts';

const doc = loadContract();
const schemas = new ContractSchemas(doc);
const SECRET = 'whsec_test_secret_with_enough_length_0123';
const NOW = Date.parse('2025-06-01T12:00:00Z');

function delivery(
  over: {
    body?: Record<string, unknown>;
    headers?: Record<string, string | undefined>;
    secret?: string;
    ts?: number;
  } = {},
) {
  const ts = over.ts ?? Math.floor(NOW / 1000);
  const body = {
    id: 'evt_1',
    type: 'inference.completed',
    tenant_id: 'acme',
    created_at: new Date(NOW).toISOString(),
    timestamp: ts,
    data: { ok: true },
    ...over.body,
  };
  const raw = Buffer.from(JSON.stringify(body));
  const sig = createHmac('sha256', Buffer.from(over.secret ?? SECRET, 'utf8'))
    .update(raw)
    .digest('hex');
  const headers: Record<string, string | undefined> = {
    'content-type': 'application/json',
    'x-service-signature-256': `sha256=${sig}`,
    'x-service-timestamp': String(ts),
    'x-service-event-id': String(body.id),
    'x-service-event-type': String(body.type),
    'x-service-delivery-attempt': '1',
    ...over.headers,
  };
  return checkDelivery(raw, headers, SECRET, { schemas, doc, now: NOW });
}

t.test('a conformant delivery has no violations', async (t) => {
  t.same(delivery(), []);
});

t.test('each signing rule and each rule of the contract is enforced', async (t) => {
  t.match(delivery({ secret: 'another-secret' }).join(), /signature does not match/);
  t.match(delivery({ headers: { 'x-service-signature-256': 'sha1=abc' } }).join(), /not sha256=<64 hex>/);
  t.match(delivery({ headers: { 'x-service-signature-256': undefined } }).join(), /Signature-256 is missing/);
  t.match(delivery({ ts: Math.floor(NOW / 1000) - 301 }).join(), /outside the 300 s window/);
  t.same(delivery({ ts: Math.floor(NOW / 1000) - 299 }), [], '299 s old is inside the window');
  t.match(
    delivery({ headers: { 'x-service-timestamp': String(Math.floor(NOW / 1000) - 1) } }).join(),
    /differs from X-Service-Timestamp/,
  );
  t.match(delivery({ headers: { 'x-service-event-id': 'evt_other' } }).join(), /differs from X-Service-Event-Id/);
  t.match(delivery({ headers: { 'x-service-delivery-attempt': '18' } }).join(), /not 1\.\.17/);
  t.match(delivery({ body: { extra: 1 } }).join(), /unevaluated properties|additional properties/);
  t.match(
    delivery({ body: { type: 'made.up' }, headers: { 'x-service-event-type': 'made.up' } }).join(),
    /not in the contract's webhooks/,
  );
});

t.test('real deliveries of a live Sluice pass the conformance receiver', async (t) => {
  const node = await startTestNode({ SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true' }, { dispatcher: true });
  const receiver = await startConformanceReceiver({ port: 0, secret: 'not-known-yet', alwaysOk: true });
  t.teardown(async () => {
    await node.close();
    await receiver.close();
  });
  const admin = await node.client('admin', 'acme');
  const token = await node.token(admin);
  const created = await call(node.base, 'POST', '/v1/webhooks/endpoints', {
    token,
    body: { url: receiver.url, events: ['*'] },
  });
  t.equal(created.status, 201);
  receiver.secret = created.json.secret;
  const published = await call(node.base, 'POST', '/v1/webhooks/events', {
    token,
    body: { type: 'pipeline.completed', data: { run: 7 } },
  });
  t.equal(published.status, 202);
  const deadline = Date.now() + 15_000;
  while (!receiver.deliveries.some((d) => d.eventId === published.json.id) && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 50));
  const checked = receiver.recheck();
  t.ok(
    checked.some((d) => d.eventType === 'ping'),
    'the ping arrived',
  );
  t.ok(
    checked.some((d) => d.eventId === published.json.id),
    'the event arrived',
  );
  t.same(
    checked.flatMap((d) => d.violations.map((v) => `${d.eventType}: ${v}`)),
    [],
    'no violations',
  );
});
