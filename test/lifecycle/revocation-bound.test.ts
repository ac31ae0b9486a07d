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
  // The tapped writer claims the chain with a first revocation, Kafka answering.
  const first = await revoke((await node.client('inference-reader', 'acme')).client_id);
  t.equal(first.status, 201, 'a revocation through the tapped writer commits while Kafka answers');

  const victim = await node.client('inference-reader', 'acme');
  const oldToken = await node.token(victim);
  wire.hold(['AddPartitionsToTxn', 'EndTxn', 'InitProducerId']);
  const sentAt = Date.now();
  const res = await revoke(victim.client_id);
  const answeredIn = Date.now() - sentAt;
  t.equal(res.status, 503, 'answered 503 while the transaction cannot commit');
  t.equal(res.json?.code, 'UNAVAILABLE');
  t.match(res.json?.detail, /not committed after 1000 ms.*goes on in the background/);
  t.equal(res.headers.get('retry-after'), '1', 'with Retry-After');
  t.ok(answeredIn >= ANSWER_MS, `not before the bound (${answeredIn} ms)`);
  t.ok(wire.log.includes('held AddPartitionsToTxn'), 'the transaction reached the (held) coordinator');

  const repeat = await revoke(victim.client_id);
  t.equal(repeat.status, 503, 'a repeat while Kafka is still silent joins it and is answered 503 too');

  wire.release();
  let done = repeat;
  for (let i = 0; i < 240 && done.status !== 200; i++) {
    await new Promise((r) => setTimeout(r, 250));
    done = await revoke(victim.client_id);
  }
  t.equal(done.status, 200, 'once Kafka answers, a repeat finds the revocation through (200)');
  t.match(done.json, { client_id: victim.client_id, audit_entry_id: /^aud_/, revocation_id: /^rev_/ });

  const audit = await call(node.base, 'GET', '/v1/audit?limit=1000', { token: officerToken });
  const entries = audit.json.data.filter(
    (e: { action: string; subject: string }) => e.action === 'credential.revoked' && e.subject === victim.client_id,
  );
  t.equal(entries.length, 1, 'one audit entry for the three calls');
  t.equal(entries[0].id, done.json.audit_entry_id, 'the entry the record names');
  const refused = await call(node.base, 'GET', '/v1/inference/models', { token: oldToken });
  t.equal(refused.json?.code, 'TOKEN_REVOKED', 'the client is refused');
});
