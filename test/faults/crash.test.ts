import t from 'tap';
import type { ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawnDispatcher } from '../../harness/sluice-cli.ts';
import { startTestNode, uniquePrefix, call } from '../helpers/sluice.ts';
import { untilStalled } from '../../harness/wait.ts';
import { receiver, registerEndpoint, type TestReceiver } from '../dispatcher/receiver.ts';
import { groupsBehind, whereAre } from './harness.ts';

const EVENTS = 800;
const ENDPOINTS = 4; // 3200 deliveries
const prefix = uniquePrefix('crash');
const CONCURRENCY = 256; // SLUICE_DISPATCH_CONCURRENCY, the default
/** The slow endpoint's answer, and how long before the kill a repeat counts as held back by it. */
const SLOW_ANSWER_MS = 6000;
const HELD_BACK_MS = 3000;
const env = {
  SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
  SLUICE_TIME_SCALE: '600',
  SLUICE_TOPIC_PARTITIONS: '3',
  SLUICE_DISPATCH_CONCURRENCY: String(CONCURRENCY),
  // Each kill's replacement waits out the killed member's session before it takes the partitions:
  // 15 s as in dispatchers.test.ts, not the 30 s default (23-27 s of waiting per kill in full runs).
  SLUICE_DISPATCH_SESSION_TIMEOUT_MS: '15000',
};
const node = await startTestNode(env, { prefix });
// In the faults lane (scripts/test.ts): beside the test lane's files, its kill came while commits
// ran seconds late, and the repeats it counts as held back were those late commits (1,504 and
// 1,910 of about 2,500 in two full runs), not what it guards against.
// Two kills, each waited out while deliveries still arrive (untilStalled, up to 600 s): beside the
// suite's other files they took 94 s and over 200 s, past the suite's 300 s for a file.
t.setTimeout(900_000);
const receivers: TestReceiver[] = [];
const children: ChildProcess[] = [];
t.teardown(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const r of receivers) await r.close();
  await node.close();
});

/**
 * What this test's dispatchers logged at warn and above (and about commits and rebalances), when the
 * run keeps their logs (TEST_CHILD_LOG_DIR, set for the faults lane by scripts/test.ts).
 */
function dispatcherWarnings(): string[] {
  const dir = process.env.TEST_CHILD_LOG_DIR;
  if (!dir || !existsSync(dir)) return ['(no dispatcher logs kept: set TEST_CHILD_LOG_DIR)'];
  const out: string[] = [];
  for (const file of readdirSync(dir).filter((f) => f.startsWith(`dispatcher-${prefix}-`))) {
    for (const line of readFileSync(join(dir, file), 'utf8').split('\n')) {
      if (/"level":"(warn|error|fatal)"|joined the group|commit|rebalanc/i.test(line))
        out.push(`${file}: ${line.slice(0, 300)}`);
    }
  }
  return out.slice(-60);
}

const startDispatcher = async (): Promise<ChildProcess> =>
  (await spawnDispatcher(prefix, env, (c) => children.push(c))).child;

t.test('a dispatcher killed with SIGKILL mid-way loses no delivery once another takes over', async (t) => {
  const token = await node.token(await node.client('admin', 'crash'));
  for (let i = 0; i < ENDPOINTS; i++) receivers.push(await receiver(200));
  // One receiver fails every first attempt, so retries are on the rungs when the kill comes.
  receivers[0].answerFor = (h) => (h.headers['x-service-delivery-attempt'] === '1' ? 500 : 200);
  const eps: Array<{ id: string }> = [];
  for (const r of receivers) eps.push(await registerEndpoint(node, token, r.url, ['*']));
  let first = await startDispatcher();

  const ids: string[] = [];
  const created = Date.now();
  for (let i = 0; i < EVENTS; i += 200) {
    const records = [];
    for (let j = i; j < Math.min(EVENTS, i + 200); j++) {
      const id = `crash-${j}`;
      ids.push(id);
      records.push({
        key: 'crash',
        value: JSON.stringify({ id, tenant_id: 'crash', type: 'pipeline.completed', data: { j }, created_at: created }),
      });
    }
    // Straight onto sluice.events, as a data-plane producer would.
    await node.ctx.producer.send(node.ctx.topics.events, records);
  }
  const total = EVENTS * ENDPOINTS;
  // A delivery counts once its receiver answered it with a 2xx: a real receipt. A dead letter is
  // not a delivery (and none is expected here: 17 failures in a row never happen).
  const receipts = () => {
    const got = new Map<string, number>();
    receivers.forEach((r, i) => {
      for (const h of r.receipts()) got.set(`${h.body.id}@${i}`, (got.get(`${h.body.id}@${i}`) ?? 0) + 1);
    });
    return got;
  };
  const delivered = () => receipts().size;
  const deadline = Date.now() + 300_000;
  while (delivered() < total * 0.5 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  first.kill('SIGKILL');
  await new Promise((r) => first.once('exit', r));
  // Counted after the process is gone: nothing more can arrive from it.
  const atKill = delivered();
  t.ok(atKill >= total * 0.5, `the first dispatcher delivered ${atKill} of ${total} before it was killed`);
  t.ok(atKill < total, `the kill came mid-run: ${total - atKill} deliveries were still outstanding`);
  first = await startDispatcher();

  // Waited for while deliveries still arrive (a loaded machine is slow), not once they stopped.
  await untilStalled(delivered, total);
  const got = receipts();
  const missing: string[] = [];
  for (const id of ids) for (let i = 0; i < ENDPOINTS; i++) if (!got.has(`${id}@${i}`)) missing.push(`${id}@${i}`);
  t.same(missing.slice(0, 10), [], `every delivery was received with a 2xx (${missing.length} missing)`);
  const dlq = await call(node.base, 'GET', '/v1/webhooks/dlq?limit=1000', { token });
  t.equal(dlq.status, 200);
  t.same(dlq.json.data, [], 'nothing was dead-lettered');

  // At least once, and what repeats is what was not committed: a partition's commit point (every
  // 100 ms) is its oldest delivery without a durable outcome, a set of deliveries is done when all
  // of them are, and one that failed is done once its retry is written. So the deliveries to the
  // fast endpoints made while the failing endpoint's oldest retry was being written come again, with
  // the attempts in flight: docs/operations.md. Committing must have happened all the same: fewer
  // repeats than deliveries made before the kill ("nothing committed" would repeat them all).
  await new Promise((r) => setTimeout(r, 1000));
  const duplicates = [...receipts().values()].reduce((n, c) => n + (c - 1), 0);
  t.ok(duplicates < atKill, `${duplicates} duplicate receipts, fewer than the ${atKill} made before the kill`);
  t.comment(`deliveries: ${total}; ${atKill} received before the kill; ${duplicates} duplicates after SIGKILL`);
  const exited = new Promise((r) => first.once('exit', r));
  first.kill('SIGTERM');
  await exited;
});

t.test('a SIGKILL behind a slow endpoint repeats what was in flight, not all its commit point held back', async (t) => {
  // The setup, scaled down: fast endpoints and one that answers after 3 s, events arriving
  // all along; the commit point of a partition waits for the slow endpoint's oldest attempt, while
  // the fast deliveries after it finish. Only the fast endpoints' repeats are counted.
  const token = await node.token(await node.client('admin', 'crash-slow'));
  const fast: TestReceiver[] = [];
  for (let i = 0; i < 4; i++) fast.push(await receiver(200));
  receivers.push(...fast);
  // Answers every event after 6 s (slower than SLUICE_DISPATCH_SLOW_MS, within the 10 s attempt
  // timeout), the ping at once.
  let firstSlowAnswerAt: number | null = null;
  const slow = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const ping = Buffer.concat(chunks).toString().includes('"type":"ping"');
      setTimeout(
        () => {
          if (!ping) firstSlowAnswerAt ??= Date.now();
          res.end('ok');
        },
        ping ? 0 : SLOW_ANSWER_MS,
      );
    });
  });
  await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    slow.closeAllConnections();
    slow.close();
  });
  for (const r of fast) await registerEndpoint(node, token, r.url, ['*']);
  await registerEndpoint(node, token, `http://127.0.0.1:${(slow.address() as { port: number }).port}/hook`, ['*']);
  let first = await startDispatcher();
  const created = Date.now();
  let n = 0;
  const publish = async (count: number) => {
    const records = [];
    for (let j = 0; j < count; j++, n++)
      records.push({
        key: 'crash-slow',
        value: JSON.stringify({
          id: `slow-${n}`,
          tenant_id: 'crash-slow',
          type: 'pipeline.completed',
          data: { n },
          created_at: created,
        }),
      });
    await node.ctx.producer.send(node.ctx.topics.events, records);
  };
  // 60 events every 250 ms; the kill comes after 8 s, and at least 2 s after the slow endpoint's
  // first answer: until that answer nothing tells the dispatcher the endpoint is slow, and every
  // delivery set waits on its attempt (on a loaded machine the answer came after 8 s, and all 5,448
  // fast deliveries before the kill repeated). From it on, its deliveries go to a rung and the
  // sets finish without it.
  const started = Date.now();
  const answeredLongEnough = () => firstSlowAnswerAt !== null && Date.now() - firstSlowAnswerAt >= 2000;
  while (Date.now() - started < 8000 || !answeredLongEnough()) {
    if (Date.now() - started > 60_000) break;
    await publish(60);
    await new Promise((r) => setTimeout(r, 250));
  }
  t.ok(firstSlowAnswerAt !== null, 'the slow endpoint answered before the kill');
  t.comment(`the slow endpoint first answered ${(firstSlowAnswerAt ?? Number.NaN) - started} ms into publishing`);
  const fastReceipts = () => fast.reduce((s, r) => s + r.receipts().length, 0);
  const killedAt = Date.now();
  first.kill('SIGKILL');
  await new Promise((r) => first.once('exit', r));
  const atKill = fastReceipts();
  // What the killed member had committed: printed when the repeats say the commits did not carry.
  const committedAtKill = await groupsBehind(node.ctx.kafka, prefix, { metadata: true }).catch((err: Error) => [
    `(not read: ${err.message})`,
  ]);
  const distinct = () => new Set(fast.flatMap((r, i) => r.receipts().map((h) => `${h.body.id}@${i}`))).size;
  t.ok(atKill > 0, `${atKill} fast deliveries before the kill`);
  first = await startDispatcher();
  const total = n * fast.length;
  await untilStalled(distinct, total);
  t.equal(distinct(), total, `every fast delivery arrived (${total})`);
  if (distinct() < total) {
    // Where the missing ones are, and which group holds them: what a failure under load needs.
    const got = new Set(fast.flatMap((r, i) => r.receipts().map((h) => `${h.body.id}@${i}`)));
    const lost: string[] = [];
    for (let e = 0; e < n; e++)
      for (let i = 0; i < fast.length; i++) if (!got.has(`slow-${e}@${i}`)) lost.push(`slow-${e}@${i}`);
    const events = [...new Set(lost.map((l) => l.split('@')[0]))];
    t.comment(`missing ${lost.length}: ${lost.slice(0, 12).join(' ')}`);
    t.comment(`where: ${await whereAre(node.ctx.kafka, prefix, events.slice(0, 6))}`);
    t.comment(`groups behind: ${(await groupsBehind(node.ctx.kafka, prefix)).join('; ') || 'none'}`);
  }
  await new Promise((r) => setTimeout(r, 1000));
  const repeats = fastReceipts() - distinct();
  t.comment(`${n} events, ${total} fast deliveries, ${atKill} before the kill, ${repeats} repeated`);
  // A repeat is either what was in flight or finished since the last commit (every 100 ms; later on
  // a loaded machine), or what the slow endpoint's attempt held the commit point back over: fast
  // deliveries finished up to its 6 s before the kill, which the commit's offset map must carry.
  // The second kind is what this test is about: repeats first received over 3 s before the kill.
  // (With a 2.5 s answer and 1.5 s, commits running late beside the suite's load were taken for
  // the second kind: 31 repeats in one full run.)
  // How many repeat in all (103 here on a quiet machine; 395 before the offset map) is a figure to
  // print, not a bound: it grows with how late commits run on a busy machine.
  const firstAt = new Map<string, number>();
  const seen = new Map<string, number>();
  for (const [i, r] of fast.entries())
    for (const h of r.receipts()) {
      const key = `${h.body.id}@${i}`;
      seen.set(key, (seen.get(key) ?? 0) + 1);
      firstAt.set(key, Math.min(firstAt.get(key) ?? h.at, h.at));
    }
  const heldBack = [...seen].filter(([key, c]) => c > 1 && firstAt.get(key)! < killedAt - HELD_BACK_MS).length;
  t.comment(`${heldBack} of the repeats were first received over ${HELD_BACK_MS / 1000} s before the kill`);
  if (heldBack > 16) {
    t.comment(`committed at the kill: ${committedAtKill.join('; ') || 'everything'}`);
    for (const line of dispatcherWarnings()) t.comment(line);
  }
  t.ok(
    heldBack <= 16,
    `${heldBack} repeats of deliveries finished over ${HELD_BACK_MS / 1000} s before the kill: the commit carried ` +
      'what the slow attempt held its point back over',
  );
  t.ok(repeats < atKill, `${repeats} repeats, fewer than the ${atKill} fast deliveries before the kill`);
  const exited = new Promise((r) => first.once('exit', r));
  first.kill('SIGTERM');
  await exited;
});
