import t from 'tap';
import { createKafka } from '../../core/kafka/client.ts';
import { startTestNode, call, brokers } from '../helpers/sluice.ts';
import { orNullAfter } from '../../core/deadline.ts';

const node = await startTestNode();
t.teardown(() => node.close());
const officer = await node.client('security-officer', 'acme');
const officerToken = await node.token(officer);

async function tokenStatus(secretOwner: { client_id: string; client_secret: string }) {
  return call(node.base, 'POST', '/v1/auth/token', {
    body: {
      grant_type: 'client_credentials',
      client_id: secretOwner.client_id,
      client_secret: secretOwner.client_secret,
    },
  });
}

t.test('revocation: 201 with the record, then secret and old tokens refused, new tokens impossible', async (t) => {
  const victim = await node.client('inference-reader', 'acme');
  const old = await node.token(victim);
  const before = await call(node.base, 'GET', '/v1/inference/models', { token: old });
  // Accepted and in scope: proxied, and with no upstream configured that is 502 UPSTREAM_UNAVAILABLE.
  t.same(
    { status: before.status, code: before.json?.code },
    { status: 502, code: 'UPSTREAM_UNAVAILABLE' },
    'the token works before',
  );
  const res = await call(node.base, 'POST', '/v1/auth/revocations', {
    token: officerToken,
    body: { client_id: victim.client_id, reason: 'key leaked in a CI log' },
  });
  t.equal(res.status, 201);
  t.match(res.json, { revocation_id: /^rev_/, client_id: victim.client_id, audit_entry_id: /^aud_/ });
  t.ok(!Number.isNaN(Date.parse(res.json.revoked_at)) && res.json.revoked_at.endsWith('Z'), 'revoked_at is ISO 8601');
  const refused = await call(node.base, 'GET', '/v1/inference/models', { token: old });
  t.equal(refused.status, 401);
  t.equal(refused.json.code, 'TOKEN_REVOKED');
  const tok = await tokenStatus(victim);
  t.equal(tok.status, 401);
  t.equal(tok.json.error, 'invalid_client');

  const again = await call(node.base, 'POST', '/v1/auth/revocations', {
    token: officerToken,
    body: { client_id: victim.client_id, reason: 'again' },
  });
  t.equal(again.status, 200, 'a repeat answers 200');
  t.same(again.json, res.json, 'with the existing revocation');

  const audit = await call(node.base, 'GET', '/v1/audit?limit=1000', { token: officerToken });
  t.equal(audit.status, 200);
  const revEntries = audit.json.data.filter(
    (e: any) => e.action === 'credential.revoked' && e.subject === victim.client_id,
  );
  t.equal(revEntries.length, 1, 'one audit entry, not one per call');
  t.equal(revEntries[0].id, res.json.audit_entry_id);
  t.equal(revEntries[0].actor, officer.client_id);
  t.equal(revEntries[0].reason, 'key leaked in a CI log');
  t.match(revEntries[0], {
    seq: Number,
    at: String,
    tenant_id: 'acme',
    prev_hash: /^[0-9a-f]{64}$/,
    hash: /^[0-9a-f]{64}$/,
  });
});

t.test('a revocation record is committed in its audit entry’s transaction: both or neither', async (t) => {
  const victim = await node.client('inference-reader', 'acme');
  const res = await call(node.base, 'POST', '/v1/auth/revocations', {
    token: officerToken,
    body: { client_id: victim.client_id, reason: 'one transaction' },
  });
  t.equal(res.status, 201);
  // Read both topics as written (read_uncommitted sees every batch, committed or not) and find the
  // batches holding the record and its entry: each written inside a transaction, by one producer.
  const kafka = createKafka(brokers(), 'revocation-test');
  const consumer = kafka.consumer({ groupId: `${node.config.topicPrefix}-tx-check`, readUncommitted: true });
  const { topics } = node.ctx;
  const found = new Map<string, { transactional: boolean; producerId: string }>();
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topics.revocations, topics.audit], fromBeginning: true });
    const done = new Promise<void>((resolve) => {
      void consumer.run({
        eachBatch: async ({ batch }) => {
          for (const m of batch.messages) {
            const value = m.value?.toString() ?? '';
            const ours =
              (batch.topic === topics.revocations && m.key?.toString() === victim.client_id) ||
              (batch.topic === topics.audit && value.includes(res.json.audit_entry_id));
            // kafkajs keeps each record's batch header (attributes, producer) beside it.
            const header = (m as unknown as { batchContext: { inTransaction: boolean; producerId: string } })
              .batchContext;
            if (ours) found.set(batch.topic, { transactional: header.inTransaction, producerId: header.producerId });
          }
          if (found.size === 2) resolve();
        },
      });
    });
    await orNullAfter(done, 15_000);
  } finally {
    await consumer.disconnect();
  }
  const record = found.get(topics.revocations);
  const entry = found.get(topics.audit);
  t.equal(record?.transactional, true, 'the revocation record was written in a transaction');
  t.equal(entry?.transactional, true, 'and its audit entry');
  t.equal(record?.producerId, entry?.producerId, 'by the same transactional producer');
});

t.test("unknown client and another tenant's client are 404; the other tenant's client keeps working", async (t) => {
  const unknown = await call(node.base, 'POST', '/v1/auth/revocations', {
    token: officerToken,
    body: { client_id: 'cl_000000000000000000000000', reason: 'x' },
  });
  t.equal(unknown.status, 404);
  t.equal(unknown.json.code, 'NOT_FOUND');
  const foreign = await node.client('inference-reader', 'globex');
  const cross = await call(node.base, 'POST', '/v1/auth/revocations', {
    token: officerToken,
    body: { client_id: foreign.client_id, reason: 'x' },
  });
  t.equal(cross.status, 404);
  t.same(Object.keys(cross.json).sort(), Object.keys(unknown.json).sort(), 'indistinguishable from an unknown client');
  t.equal((await tokenStatus(foreign)).status, 200, 'the foreign client is untouched');
});

t.test('scope and body are checked', async (t) => {
  const reader = await node.client('inference-reader', 'acme');
  const noScope = await call(node.base, 'POST', '/v1/auth/revocations', {
    token: await node.token(reader),
    body: { client_id: reader.client_id, reason: 'x' },
  });
  t.equal(noScope.status, 403);
  t.equal(noScope.json.missing_scope, 'credentials:revoke');
  const bad = await call(node.base, 'POST', '/v1/auth/revocations', {
    token: officerToken,
    body: { client_id: reader.client_id },
  });
  t.equal(bad.status, 400);
  t.equal(bad.json.code, 'INVALID_REQUEST');
  t.match(bad.json.errors, [{ path: '$.reason' }]);
  const auditNoScope = await call(node.base, 'GET', '/v1/audit', { token: await node.token(reader) });
  t.equal(auditNoScope.status, 403);
});

t.test("GET /v1/audit pages the caller tenant's entries only, through an opaque cursor", async (t) => {
  for (let i = 0; i < 5; i++) await node.client('inference-reader', 'paging');
  const pagingOfficer = await node.client('security-officer', 'paging');
  const tok = await node.token(pagingOfficer);
  const seen: any[] = [];
  let cursor: string | null = null;
  do {
    const q: string = cursor ? `?limit=2&cursor=${encodeURIComponent(cursor)}` : '?limit=2';
    const page = await call(node.base, 'GET', `/v1/audit${q}`, { token: tok });
    t.equal(page.status, 200);
    t.ok(page.json.data.length <= 2);
    seen.push(...page.json.data);
    cursor = page.json.next_cursor;
  } while (cursor);
  t.equal(seen.length, 6, 'six client creations');
  t.ok(seen.every((e) => e.tenant_id === 'paging' && e.action === 'client.created'));
  t.ok(
    seen.every((e, i) => i === 0 || e.seq > seen[i - 1].seq),
    'oldest first',
  );
  t.equal((await call(node.base, 'GET', '/v1/audit?limit=0', { token: tok })).status, 400);
  t.equal((await call(node.base, 'GET', '/v1/audit?limit=1001', { token: tok })).status, 400);
  t.equal((await call(node.base, 'GET', '/v1/audit?cursor=garbage!', { token: tok })).status, 400);
});
