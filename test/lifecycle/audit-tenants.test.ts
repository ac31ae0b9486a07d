/**
 * The compliance log numbers each tenant's entries on its own (1, 2, 3, ... without gaps) and links
 * them in a chain of their own, so a tenant proves its log from its own pages and its numbers say
 * nothing about how busy the other tenants are. A log written with the one global chain of before
 * still verifies, and each tenant's chain goes on from its last entry there.
 */
import t from 'tap';
import { Kafka, logLevel } from 'kafkajs';
import { startTestNode, call, brokers, type TestNode } from '../helpers/sluice.ts';
import { cliEnv, runCli } from '../../harness/sluice-cli.ts';
import { appendAudit } from '../../core/audit/audit-log.ts';
import { verifyAuditLog } from '../../core/audit/verify.ts';
import { createKafka } from '../../core/kafka/client.ts';
import {
  checkAppended,
  checkTenantChain,
  GENESIS_HASH,
  sealEntry,
  type AuditEntry,
  type ChainLink,
} from '../../core/audit/entry.ts';

let n = 0;
const entry = (tenant: string, seq: number, prev: string, reason: string | null = null): AuditEntry =>
  sealEntry(
    {
      id: `aud_${++n}`,
      seq,
      at: new Date(0).toISOString(),
      tenant_id: tenant,
      actor: 'test',
      action: 'test.append',
      subject: 's',
      reason,
    },
    prev,
  );

/** Applies records as the audit view does; the problems found, by index. */
function replay(records: AuditEntry[]): { problems: [number, string][]; perTenant: boolean } {
  const tails = new Map<string, ChainLink>();
  let global: ChainLink | null = null;
  let perTenant = false;
  const problems: [number, string][] = [];
  records.forEach((e, i) => {
    const r = checkAppended({ tenant: tails.get(e.tenant_id) ?? null, global, perTenant }, e);
    if (r.problem) problems.push([i, r.problem]);
    if (r.opensPerTenant) perTenant = true;
    tails.set(e.tenant_id, e);
    global = e;
  });
  return { problems, perTenant };
}

t.test('checkAppended: per-tenant chains, the global chain of older logs, and the switch between them', async (t) => {
  const a1 = entry('a', 1, GENESIS_HASH);
  const a2 = entry('a', 2, a1.hash);
  const b1 = entry('b', 1, GENESIS_HASH);
  const a3 = entry('a', 3, a2.hash);
  const b2 = entry('b', 2, b1.hash);
  t.same(replay([a1, a2, b1, a3, b2]), { problems: [], perTenant: true }, 'interleaved tenant chains hold');
  t.equal(checkTenantChain([a1, a2, a3]), null, "a tenant's own entries prove its chain");
  t.equal(checkTenantChain([b1, b2]), null);
  t.match(checkTenantChain([a1, a3]), { index: 1, problem: /seq is 3, expected 2/ }, 'a missing entry shows');
  t.match(checkTenantChain([a1, { ...a2, reason: 'changed' }]), { index: 1, problem: /hash/ }, 'so does a change');

  // An older log: one chain through every tenant, seq counting every entry.
  const g1 = entry('a', 1, GENESIS_HASH);
  const g2 = entry('b', 2, g1.hash);
  const g3 = entry('a', 3, g2.hash);
  // Then per-tenant appends, each going on from its tenant's last entry.
  const a4 = entry('a', 4, g3.hash); // follows a's last entry, which is also the log's last
  const b3 = entry('b', 3, g2.hash); // follows b's last entry only: per-tenant chains begin
  const a5 = entry('a', 5, a4.hash);
  t.same(replay([g1, g2, g3, a4, b3, a5]), { problems: [], perTenant: true }, 'an older log goes on per tenant');
  const legacyOnly = replay([g1, g2, g3]);
  t.same(legacyOnly, { problems: [], perTenant: false }, 'the older log alone verifies');

  // Once per-tenant chains began, a link to the log's last entry of another tenant is refused.
  const late = entry('a', b3.seq + 1, b3.hash);
  const r = replay([g1, g2, g3, a4, b3, late]);
  t.match(r.problems, [[5, /seq is 4, expected 5/]], 'after it, a global link is a broken link');
  t.match(replay([a1, entry('a', 2, b1.hash)]).problems, [[1, /prev_hash/]], 'a wrong previous hash breaks');
});

const node: TestNode = await startTestNode();
t.teardown(() => node.close());

const append = (tenant: string, i: number) =>
  appendAudit(node.ctx, { tenant_id: tenant, actor: 'test', action: 'test.append', subject: `s${i}`, reason: null });

t.test("a quiet tenant's numbers do not move with a busy tenant's activity", async (t) => {
  const quiet: Awaited<ReturnType<typeof append>>[] = [];
  quiet.push(await append('quiet', 0));
  await Promise.all(Array.from({ length: 40 }, (_, i) => append('busy', i)));
  quiet.push(await append('quiet', 1));
  await Promise.all(Array.from({ length: 40 }, (_, i) => append('busy', 100 + i)));
  quiet.push(await append('quiet', 2));
  t.same(
    quiet.map((q) => q.seq),
    [1, 2, 3],
    'the quiet tenant counts 1, 2, 3 with 80 entries of another tenant between',
  );

  const officer = await node.client('security-officer', 'quiet');
  const token = await node.token(officer);
  const seen: AuditEntry[] = [];
  let cursor: string | null = null;
  do {
    const q: string = cursor ? `?limit=2&cursor=${encodeURIComponent(cursor)}` : '?limit=2';
    const page = await call(node.base, 'GET', `/v1/audit${q}`, { token });
    t.equal(page.status, 200);
    seen.push(...page.json.data);
    cursor = page.json.next_cursor;
  } while (cursor);
  t.same(
    seen.map((e) => e.seq),
    [1, 2, 3, 4],
    "GET /v1/audit lists the tenant's entries numbered 1 to 4 (the officer's creation last), no gaps",
  );
  t.equal(seen[0].prev_hash, GENESIS_HASH, 'its first entry starts a chain');
  t.equal(checkTenantChain(seen), null, 'the tenant verifies its chain from its own pages');
  const busyHashes = new Set(node.ctx.auditView.page('busy', 0, 1000).data.map((e) => e.hash));
  t.equal(busyHashes.size, 80);
  t.ok(
    seen.every((e) => !busyHashes.has(e.prev_hash)),
    "no entry links to another tenant's",
  );
  const busy = node.ctx.auditView.page('busy', 0, 1000).data;
  t.same(
    busy.map((e) => e.seq),
    Array.from({ length: 80 }, (_, i) => i + 1),
    'the busy tenant, appended to concurrently, counts 1 to 80',
  );
  t.equal(checkTenantChain(busy), null);

  const verify = await runCli(['audit', 'verify', '--json', '--tenant', 'quiet'], cliEnv(node.config));
  t.equal(verify.code, 0, verify.stdout + verify.stderr);
  const out = JSON.parse(verify.stdout);
  t.equal(out.ok, true, '`sluice audit verify` proves every chain');
  t.same(out.tenant_head, { seq: 4, hash: seen[3].hash }, "and names the quiet tenant's head");
  const text = await runCli(['audit', 'verify', '--tenant', 'quiet'], cliEnv(node.config));
  t.match(text.stdout, new RegExp(`tenant quiet: 4 entries, head hash ${seen[3].hash}`));
});

t.test('a log written with the one global chain of before verifies, and goes on per tenant', async (t) => {
  let old: TestNode = await startTestNode();
  const prefix = old.config.topicPrefix;
  const topic = old.ctx.topics.audit;
  let last = old.ctx.auditView.tail()!; // the signing key's entries, written at start
  await old.close();
  // Entries as the earlier writer made them: seq counts every entry, prev_hash is the log's last.
  const legacy: AuditEntry[] = [];
  for (const tenant of ['acme', 'globex', 'acme']) {
    const e = entry(tenant, last.seq + 1, last.hash, 'legacy');
    legacy.push(e);
    last = e;
  }
  const producer = new Kafka({ clientId: 'legacy', brokers: brokers(), logLevel: logLevel.NOTHING }).producer();
  await producer.connect();
  await producer.send({ topic, messages: legacy.map((e) => ({ key: e.tenant_id, value: JSON.stringify(e) })) });
  await producer.disconnect();

  old = await startTestNode({}, { prefix });
  t.teardown(() => old.close());
  t.equal(old.ctx.auditView.firstBroken, null, 'the older log verifies');
  const acme = await appendAudit(old.ctx, { tenant_id: 'acme', actor: 'x', action: 'test.append', subject: 's' });
  const globex = await appendAudit(old.ctx, { tenant_id: 'globex', actor: 'x', action: 'test.append', subject: 's' });
  t.equal(acme.seq, legacy[2].seq + 1, "acme goes on from its last entry's seq");
  t.equal(old.ctx.auditView.get(acme.id)!.prev_hash, legacy[2].hash, 'and links to it');
  t.equal(globex.seq, legacy[1].seq + 1, 'globex from its own, whatever acme wrote since');
  t.equal(old.ctx.auditView.get(globex.id)!.prev_hash, legacy[1].hash);
  const verified = await verifyAuditLog(createKafka(brokers(), 'audit-tenants-test'), topic, prefix);
  t.equal(verified.broken, null, 'the whole log verifies');
  t.same(verified.heads.globex, { seq: globex.seq, hash: globex.hash });

  // From now on a link in the old style (to the log's last entry, another tenant's) is refused.
  const tail = old.ctx.auditView.tail()!;
  const forged = entry('acme', tail.seq + 1, tail.hash);
  const p = new Kafka({ clientId: 'forger', brokers: brokers(), logLevel: logLevel.NOTHING }).producer();
  await p.connect();
  await p.send({ topic, messages: [{ key: 'acme', value: JSON.stringify(forged) }] });
  await p.disconnect();
  const after = await verifyAuditLog(createKafka(brokers(), 'audit-tenants-test'), topic, prefix);
  t.match(after.broken, { id: forged.id, problem: /seq|prev_hash/ }, 'a global link after the switch is broken');
});
