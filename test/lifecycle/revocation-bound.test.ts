/**
 * A revocation whose Kafka transaction cannot commit (its coordinator does not answer) is answered
 * 503 after SLUICE_REVOCATION_ANSWER_MS instead of holding the caller, goes on in the background,
 * and a repeat once the coordinator is back sees it through: one record, one audit entry.
 */
import t from 'tap';
import { Kafka, logLevel } from 'kafkajs';
import { AuditWriter } from '../../core/audit/audit-writer.ts';
import { KafkaWire } from '../helpers/kafka-wire.ts';
import { brokers, call, startTestNode } from '../helpers/sluice.ts';

const ANSWER_MS = 1000;
const node = await startTestNode({ SLUICE_REVOCATION_ANSWER_MS: String(ANSWER_MS) });
t.teardown(() => node.close());
const officerToken = await node.token(await node.client('security-officer', 'acme'));

// The node's audit writer, rebuilt on a client whose connections the test holds: the same
// transactional id (it fences the node's own writer, idle from here on), the node's views.
const wire = new KafkaWire();
const tapped = new Kafka({
  clientId: 'revocation-bound',
  brokers: brokers(),
  logLevel: logLevel.NOTHING,
  requestTimeout: 2000,
  retry: { initialRetryTime: 100, retries: 2, maxRetryTime: 500 },
  socketFactory: wire.socketFactory,
});
const { ctx } = node;
const writer = new AuditWriter({
  kafka: tapped,
  topic: ctx.topics.audit,
  transactionalId: `${node.config.topicPrefix}.audit-writer`,
  view: ctx.auditView,
  state: ctx.state,
  clock: ctx.clock,
  log: ctx.log,
});
ctx.audit = writer;
t.teardown(() => writer.close());

const revoke = (clientId: string) =>
  call(node.base, 'POST', '/v1/auth/revocations', {
    token: officerToken,
    body: { client_id: clientId, reason: 'coordinator unreachable' },
  });

t.test('an unanswered transaction: 503 at the bound, the revocation finishes once Kafka answers', async (t) => {
  // The tapped writer claims the chain at its first append (the client.created entries below);
  // a first revocation shows it commits while Kafka answers (retried: a loaded machine may take
  // longer than the bound, which is not what this test is about).
  const first = (await node.client('inference-reader', 'acme')).client_id;
  let firstStatus = 0;
  for (const deadline = Date.now() + 30_000; firstStatus !== 201 && firstStatus !== 200; ) {
    firstStatus = (await revoke(first)).status;
    if (Date.now() > deadline) break;
  }
  t.ok(firstStatus === 201 || firstStatus === 200, `a revocation through the tapped writer commits (${firstStatus})`);

  const victim = await node.client('inference-reader', 'acme');
  const oldToken = await node.token(victim);
  wire.hold(['AddPartitionsToTxn', 'EndTxn', 'InitProducerId']);
  const sentAt = Date.now();
  const res = await revoke(victim.client_id);
  const answeredIn = Date.now() - sentAt;
  t.equal(res.status, 503, 'answered 503 while the transaction cannot commit');
  t.equal(res.json?.code, 'UNAVAILABLE');
  t.match(res.json?.detail, /not through after 1000 ms.*goes on in the background/);
  t.equal(res.headers.get('retry-after'), '1', 'with Retry-After');
  t.ok(answeredIn >= ANSWER_MS, `not before the bound (${answeredIn} ms)`);
  t.ok(wire.log.includes('held AddPartitionsToTxn'), 'the transaction reached the (held) coordinator');

  const under = ctx.revoking.current(victim.client_id);
  t.ok(under, 'the revocation goes on after its 503');
  const repeat = await revoke(victim.client_id);
  t.equal(repeat.status, 503, 'a repeat while Kafka is still silent is answered 503 too');
  t.equal(ctx.revoking.current(victim.client_id), under, 'the repeat joined the revocation under way');

  wire.release();
  const statuses: number[] = [];
  let done = repeat;
  for (const deadline = Date.now() + 60_000; done.status === 503 && Date.now() < deadline; ) {
    await new Promise((r) => setTimeout(r, 250));
    done = await revoke(victim.client_id);
    statuses.push(done.status);
  }
  t.same(
    statuses.filter((s) => s !== 503),
    [200],
    `once Kafka answers, a repeat finds the revocation through: 200, after ${statuses.length - 1} more 503s`,
  );
  t.match(done.json, { client_id: victim.client_id, audit_entry_id: /^aud_/, revocation_id: /^rev_/ });

  // Appends commit in order: once this one is visible, a second revocation entry would be too.
  await writer.append({ tenant_id: 'acme', actor: 'test', action: 'test.sentinel', subject: victim.client_id });
  const audit = await call(node.base, 'GET', '/v1/audit?limit=1000', { token: officerToken });
  const entries = audit.json.data.filter(
    (e: { action: string; subject: string }) => e.action === 'credential.revoked' && e.subject === victim.client_id,
  );
  t.equal(entries.length, 1, `one audit entry for the ${statuses.length + 2} calls`);
  t.equal(entries[0].id, done.json.audit_entry_id, 'the entry the record names');
  const refused = await call(node.base, 'GET', '/v1/inference/models', { token: oldToken });
  t.equal(refused.json?.code, 'TOKEN_REVOKED', 'the client is refused');
});
