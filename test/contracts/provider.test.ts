import t from 'tap';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startTestNode } from '../helpers/sluice.ts';
import { verifyProvider } from '../../contracts/verify/verifier.ts';
import { failed, formatTable } from '../../contracts/verify/report.ts';
import { listOperations, loadContract } from '../../contracts/contract.ts';
import { startConformanceReceiver } from '../../contracts/receiver/server.ts';

// A data-plane upstream that answers 200 to everything, so the proxy path is verified too.
const upstream = createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'));
});
await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
const up = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
const receiver = await startConformanceReceiver({ port: 0, secret: 'unknown-until-registration', alwaysOk: true });
// With a dispatcher: the event types are counted by its fan-out (listEventTypes checks a published one shows).
const node = await startTestNode(
  {
    SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
    SLUICE_UPSTREAM_INFERENCE: up,
    SLUICE_UPSTREAM_PIPELINES: up,
    SLUICE_UPSTREAM_TELEMETRY: up,
  },
  { dispatcher: true },
);
t.teardown(async () => {
  await node.close();
  await receiver.close();
  upstream.close();
});

t.test('the live Sluice serves its contract at GET /v1/openapi.json, without a token', async (t) => {
  const res = await fetch(`${node.base}/v1/openapi.json`);
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /application\/json/);
  t.same(await res.json(), loadContract());
});

t.test('sluice contract verify passes against a live Sluice, covering every operation', async (t) => {
  const admin = await node.client('admin', 'acme');
  const victim = await node.client('webhook-publisher', 'acme');
  const report = await verifyProvider({
    baseUrl: node.base,
    clientId: admin.client_id,
    clientSecret: admin.client_secret,
    webhookUrl: receiver.url,
    maxBodyBytes: node.config.maxBodyBytes,
    revocable: { clientId: victim.client_id, clientSecret: victim.client_secret },
  });
  const table = formatTable(report);
  t.comment(table.split('\n').slice(-1)[0]);
  const failures = failed(report);
  t.same(
    failures.map((f) => `${f.operationId}: ${f.check}: ${f.detail}`),
    [],
    'no failures',
  );
  const covered = new Set(report.results.filter((r) => r.outcome === 'pass').map((r) => r.operationId));
  for (const op of listOperations(loadContract()))
    t.ok(covered.has(op.operationId), `${op.operationId} has passing checks`);
  t.equal(report.results.filter((r) => r.outcome === 'not-implemented').length, 0, 'every documented route exists');
  const checks = report.results.map((r) => r.check).join('\n');
  for (const kind of [
    'TOKEN_MISSING',
    'TOKEN_INVALID',
    'TOKEN_REVOKED',
    'SCOPE_VIOLATION',
    '405 with Allow',
    'malformed JSON',
    'wrong types',
    'unknown field',
    'oversize body',
    '415',
    'read after delete → 404',
  ]) {
    t.match(checks, kind, `the run includes a "${kind}" check`);
  }
  t.ok(
    receiver.deliveries.some((d) => d.eventType === 'ping'),
    'the registration ping reached the receiver',
  );
});
