/**
 * The audit view on disk: GET /v1/audit paging, the chain tail, the record count and the first
 * broken link answer the same after a restart that resumes from the stored offset (applying only
 * the entries written while the node was down) and after a restart from a deleted store (a rebuild).
 */
import t from 'tap';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { startTestNode, call, uniquePrefix, brokers, type TestNode } from '../helpers/sluice.ts';
import { appendAudit } from '../../core/audit/audit-log.ts';
import { verifyAuditLog } from '../../core/audit/verify.ts';
import { checkTenantChain, sealEntry, type AuditEntry } from '../../core/audit/entry.ts';
import { openContext } from '../../core/context.ts';
import { createKafka } from '../../core/kafka/client.ts';

const prefix = uniquePrefix('auditstore');
let node: TestNode = await startTestNode({}, { prefix });
t.teardown(async () => {
  await node.close();
  rmSync(join(node.config.dataDir, prefix), { recursive: true, force: true });
});
const topic = node.ctx.topics.audit;
const officer = await node.client('security-officer', 'acme');

const append = (ctx: TestNode['ctx'], tenant: string, i: number) =>
  appendAudit(ctx, { tenant_id: tenant, actor: 'test', action: 'test.append', subject: `s${i}`, reason: null });

/** Every page of a tenant's log through the view. */
function viewPages(tenant: string, limit: number): AuditEntry[] {
  const out: AuditEntry[] = [];
  for (let after = 0; ; ) {
    const { data, more } = node.ctx.auditView.page(tenant, after, limit);
    out.push(...data);
    if (!more) return out;
    after = data[data.length - 1].seq;
  }
}

/** Every page of acme's log through GET /v1/audit, following next_cursor. */
async function httpPages(limit: number): Promise<AuditEntry[]> {
  const token = await node.token(officer);
  const out: AuditEntry[] = [];
  let cursor: string | null = null;
  do {
    const res = await call(node.base, 'GET', `/v1/audit?limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`, { token });
    if (res.status !== 200) throw new Error(`GET /v1/audit: ${res.status} ${res.text}`);
    out.push(...res.json.data);
    cursor = res.json.next_cursor;
  } while (cursor);
  return out;
}

/** What the view answers, all of it. */
async function snapshot() {
  const view = node.ctx.auditView;
  return {
    acme: viewPages('acme', 7),
    globex: viewPages('globex', 1000),
    http: await httpPages(4),
    tail: view.tail(),
    heads: view.heads(),
    count: view.count,
    firstBroken: view.firstBroken,
  };
}

const appended: Array<{ id: string; seq: number; tenant: string }> = [];
for (let i = 0; i < 30; i++) {
  const tenant = i % 3 === 0 ? 'globex' : 'acme';
  appended.push({ ...(await append(node.ctx, tenant, i)), tenant });
}
const before = await snapshot();

t.test('paging a tenant through the view and GET /v1/audit', async (t) => {
  for (const tenant of ['acme', 'globex'] as const) {
    const listed = before[tenant];
    t.ok(
      listed.every((e) => e.tenant_id === tenant),
      `only ${tenant}'s entries`,
    );
    t.ok(
      listed.every((e, i) => i === 0 || e.seq > listed[i - 1].seq),
      'in log order',
    );
    const mine = appended.filter((a) => a.tenant === tenant);
    t.same(
      listed.filter((e) => e.action === 'test.append').map((e) => [e.id, e.seq]),
      mine.map((a) => [a.id, a.seq]),
      `every entry appended for ${tenant}, once`,
    );
  }
  t.same(before.http, before.acme, 'GET /v1/audit pages agree with the view');
  t.equal(before.tail?.id, appended[appended.length - 1].id, 'the tail is the last entry');
  for (const tenant of ['acme', 'globex'] as const) {
    t.same(
      before[tenant].map((e) => e.seq),
      before[tenant].map((_, i) => i + 1),
      `${tenant}'s entries are numbered 1, 2, 3, ... on their own`,
    );
    t.equal(checkTenantChain(before[tenant]), null, `${tenant}'s entries form an unbroken chain of their own`);
  }
  const heads = node.ctx.auditView.heads();
  t.equal(
    Object.values(heads).reduce((n, h) => n + h.seq, 0),
    before.count,
    "one record per entry: the tenants' counts add up to the records read",
  );
  t.equal(before.firstBroken, null);
});

t.test('a restart resumes: only the entries written while it was down are applied, and appends link on', async (t) => {
  const dir = node.ctx.store.path;
  await node.close();
  // Another process's context appends three entries meanwhile.
  const other = await openContext(node.config, { brokers: brokers(), component: 'writer', views: 'admin' });
  const meanwhile = [];
  for (let i = 0; i < 3; i++) meanwhile.push(await append(other, 'acme', 100 + i));
  await other.close();

  node = await startTestNode({}, { prefix });
  t.equal(node.ctx.store.path, dir, 'the same store directory');
  t.equal(node.ctx.state.applied(topic), 3, 'applied the 3 new records, not the whole log');
  const after = await snapshot();
  t.same(after.acme.slice(0, before.acme.length), before.acme, 'the earlier pages unchanged');
  t.same(
    after.acme.slice(before.acme.length).map((e) => e.id),
    meanwhile.map((m) => m.id),
    'then the new entries',
  );
  t.same(after.http, after.acme);
  t.same(after.globex, before.globex);
  t.equal(after.tail?.id, meanwhile[2].id, 'the tail moved on');
  t.equal(after.count, before.count + 3);

  const next = await append(node.ctx, 'globex', 200);
  t.equal(
    next.seq,
    before.globex[before.globex.length - 1].seq + 1,
    "an append after the restart links to the tenant's stored tail",
  );
  const acmeNext = await append(node.ctx, 'acme', 201);
  t.equal(acmeNext.seq, meanwhile[2].seq + 1, 'and so does one of the tenant written to while it was down');
  const verified = await verifyAuditLog(createKafka(brokers(), 'audit-store-test'), topic, prefix);
  t.equal(verified.broken, null, 'the chains hold');
  t.same(verified.head, { tenant_id: 'acme', seq: acmeNext.seq, hash: acmeNext.hash }, 'the head is the last entry');
  t.same(verified.heads.globex, { seq: next.seq, hash: next.hash }, "and each tenant's head its last entry");
});

t.test('a deleted store is rebuilt with the same answers, the first broken link included', async (t) => {
  // A forged record breaks the chain; the broken link must survive restarts too.
  const tail = node.ctx.auditView.tenantTail('acme')!;
  const forged = {
    ...sealEntry(
      {
        id: 'aud_forged',
        seq: tail.seq + 1,
        at: new Date().toISOString(),
        tenant_id: 'acme',
        actor: 'mallory',
        action: 'x.y',
        subject: 's',
        reason: null,
      },
      tail.hash,
    ),
    actor: 'alice',
  };
  const producer = new Kafka({ clientId: 'forger', brokers: brokers(), logLevel: logLevel.NOTHING }).producer();
  await producer.connect();
  await producer.send({ topic, messages: [{ key: 'acme', value: JSON.stringify(forged) }] });
  await producer.disconnect();
  const deadline = Date.now() + 10_000;
  while (node.ctx.auditView.firstBroken === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  const broken = await snapshot();
  t.match(broken.firstBroken, { id: 'aud_forged', problem: /hash/ }, 'the forged record is the first broken link');

  const dir = node.ctx.store.path;
  await node.close();
  node = await startTestNode({}, { prefix });
  t.equal(node.ctx.state.applied(topic), 0, 'a resume with nothing new applies nothing');
  t.same(await snapshot(), broken, 'resumed: the same answers');

  await node.close();
  rmSync(dir, { recursive: true, force: true });
  node = await startTestNode({}, { prefix });
  t.equal(node.ctx.state.applied(topic), broken.count, `rebuilt: applied all ${broken.count} records`);
  t.same(await snapshot(), broken, 'rebuilt: the same answers');
});
