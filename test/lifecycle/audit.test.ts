import t from 'tap';
import { Kafka, logLevel } from 'kafkajs';
import { startTestNode, call } from '../helpers/sluice.ts';
import { cliEnv, runCli } from '../../harness/sluice-cli.ts';
import { appendAudit } from '../../core/audit/audit-log.ts';
import { topicNames } from '../../core/topics.ts';
import { sealEntry, checkLink, checkTenantChain, GENESIS_HASH, type AuditEntry } from '../../core/audit/entry.ts';

const a = await startTestNode();
// A second node on the same topics: its own Context, its own Kafka producers, its own audit writer.
const b = await startTestNode({}, { prefix: a.config.topicPrefix });
t.teardown(async () => {
  await b.close();
  await a.close();
});

t.test('concurrent appends from two nodes form one unbroken chain', async (t) => {
  const append = (node: typeof a, i: number) =>
    appendAudit(node.ctx, {
      tenant_id: 'race',
      actor: `node-${node === a ? 'a' : 'b'}`,
      action: 'test.append',
      subject: `s${i}`,
      reason: null,
    });
  const results = await Promise.all([
    ...Array.from({ length: 15 }, (_, i) => append(a, i)),
    ...Array.from({ length: 15 }, (_, i) => append(b, i)),
  ]);
  const seqs = results.map((r) => r.seq).sort((x, y) => x - y);
  t.same(
    seqs,
    Array.from({ length: 30 }, (_, i) => i + 1),
    "the tenant's thirty entries are numbered 1 to 30",
  );
  const officer = await a.client('security-officer', 'race');
  const page = await call(a.base, 'GET', '/v1/audit?limit=1000', { token: await a.token(officer) });
  const mine = page.json.data.filter((e: AuditEntry) => e.action === 'test.append');
  t.equal(mine.length, 30);
  t.equal(checkTenantChain(page.json.data), null, 'the pages are one unbroken chain of their own');
  const verify = await runCli(['audit', 'verify', '--json', '--tenant', 'race'], cliEnv(a.config));
  t.equal(verify.code, 0, verify.stdout + verify.stderr);
  const out = JSON.parse(verify.stdout);
  t.equal(out.ok, true);
  t.ok(out.entries >= 31, 'every entry read');
  const heads = Object.values(out.heads) as { seq: number }[];
  t.equal(
    heads.reduce((n, h) => n + h.seq, 0),
    out.entries,
    "the tenants' seqs count every entry: no gaps, no duplicates",
  );
  const last = page.json.data[page.json.data.length - 1];
  t.same(out.tenant_head, { seq: last.seq, hash: last.hash }, "--tenant prints the tenant's last entry");
});

t.test('appends asked for at once share transactions: fewer commits than entries, each chain unbroken', async (t) => {
  const admin = new Kafka({ brokers: a.config.kafkaBrokers!, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  t.teardown(() => admin.disconnect());
  const audit = topicNames(a.config.topicPrefix).audit;
  const end = async () => Number((await admin.fetchTopicOffsets(audit)).find((o) => o.partition === 0)!.high);
  await appendAudit(a.ctx, { tenant_id: 'group-x', actor: 't', action: 'test.group', subject: 'first' });
  const before = await end();
  const results = await Promise.all(
    Array.from({ length: 40 }, (_, i) =>
      appendAudit(a.ctx, {
        tenant_id: i % 2 ? 'group-x' : 'group-y',
        actor: 't',
        action: 'test.group',
        subject: `s${i}`,
      }),
    ),
  );
  // Each transaction takes its entries' offsets and one for its commit marker.
  const transactions = (await end()) - before - 40;
  t.ok(transactions >= 1 && transactions < 40, `40 entries in ${transactions} transactions`);
  const x = results.filter((_, i) => i % 2).map((r) => r.seq);
  const y = results.filter((_, i) => i % 2 === 0).map((r) => r.seq);
  t.same(
    x,
    Array.from({ length: 20 }, (_, i) => i + 2),
    'group-x: 2 to 21 in the order asked',
  );
  t.same(
    y,
    Array.from({ length: 20 }, (_, i) => i + 1),
    'group-y: 1 to 20 in the order asked',
  );
  for (const tenant of ['group-x', 'group-y']) {
    const verify = await runCli(['audit', 'verify', '--json', '--tenant', tenant], cliEnv(a.config));
    t.equal(verify.code, 0, verify.stdout + verify.stderr);
    t.equal(JSON.parse(verify.stdout).ok, true, `${tenant}'s chain verifies`);
  }
});

t.test('the chain links: each entry carries the previous hash and its own', async (t) => {
  const first = sealEntry(
    {
      id: 'aud_1',
      seq: 1,
      at: new Date(0).toISOString(),
      tenant_id: 'x',
      actor: 'y',
      action: 'z',
      subject: 's',
      reason: null,
    },
    GENESIS_HASH,
  );
  const second = sealEntry(
    {
      id: 'aud_2',
      seq: 2,
      at: new Date(0).toISOString(),
      tenant_id: 'x',
      actor: 'y',
      action: 'z',
      subject: 's',
      reason: 'r',
    },
    first.hash,
  );
  t.equal(checkLink(null, first), null);
  t.equal(checkLink(first, second), null);
  t.match(checkLink(first, { ...second, reason: 'changed' }), /hash/);
  t.match(checkLink(null, second), /seq/);
  t.match(checkLink(second, first), /seq/, 'reordering breaks');
});

t.test('`sluice audit verify` catches an entry forged straight into Kafka', async (t) => {
  const before = await runCli(['audit', 'verify', '--json'], cliEnv(a.config));
  t.equal(before.code, 0);
  const head = JSON.parse(before.stdout).heads.race;
  // A forger who knows the format: right seq and prev_hash, but the hash does not cover the content.
  const good = sealEntry(
    {
      id: 'aud_forged',
      seq: head.seq + 1,
      at: new Date().toISOString(),
      tenant_id: 'race',
      actor: 'operator:mallory',
      action: 'credential.reenabled',
      subject: 'cl_x',
      reason: 'nothing to see',
    },
    head.hash,
  );
  const forged = { ...good, actor: 'operator:alice' };
  const kafka = new Kafka({ clientId: 'forger', brokers: a.config.kafkaBrokers!, logLevel: logLevel.NOTHING });
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({ topic: a.ctx.topics.audit, messages: [{ key: 'race', value: JSON.stringify(forged) }] });
  await producer.disconnect();
  const after = await runCli(['audit', 'verify'], cliEnv(a.config));
  t.equal(after.code, 1, 'non-zero exit');
  t.match(after.stdout, /BROKEN: .* offset \d+ \(seq \d+, id aud_forged\): hash does not match/);
});
