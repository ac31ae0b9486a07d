/**
 * `sluice dlq replay` with thousands of entries: 2000 DlqEntry records for one tenant are written
 * straight onto the node's DLQ topic with a plain kafkajs producer, then the real CLI (a child
 * process on the node's Kafka and prefix) replays them, printing its progress.
 */
import t from 'tap';
import { startTestNode, call, until } from '../helpers/sluice.ts';
import { deadLetters, writeDeadLetters } from '../helpers/dead-letters.ts';
import { cliEnv, runCli } from '../../harness/sluice-cli.ts';
import { receiver, registerEndpoint, type TestReceiver } from './receiver.ts';
import type { DlqEntry } from '../../core/webhooks/records.ts';

const N = 2000;
const OTHER_N = 7;
const TENANT = 'acme';
const OTHER = 'globex';

// A 2,000-entry replay beside the rest of the suite can starve the node's state view of CPU for
// seconds; this test is about the CLI, not about failing closed (test/lifecycle/fail-closed.test.ts).
const node = await startTestNode(
  { SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true', SLUICE_KAFKA_STALE_MS: '30000' },
  { dispatcher: true },
);
const receivers: TestReceiver[] = [];
t.teardown(async () => {
  for (const r of receivers) await r.close();
  await node.close();
});

const token = await node.token(await node.client('admin', TENANT));
const otherToken = await node.token(await node.client('admin', OTHER));

/** Every entry of the caller's tenant through the API, following the cursor. */
async function listAll(tok: string): Promise<DlqEntry[]> {
  const all: DlqEntry[] = [];
  let cursor: string | null = null;
  do {
    const res = await call(
      node.base,
      'GET',
      `/v1/webhooks/dlq?limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      { token: tok },
    );
    if (res.status !== 200) throw new Error(`DLQ list answered ${res.status}: ${res.text}`);
    all.push(...res.json.data);
    cursor = res.json.next_cursor;
  } while (cursor);
  return all;
}

const entries = (tenant: string, endpointId: string, n: number, tag: string): DlqEntry[] =>
  deadLetters(tenant, endpointId, n, tag, { firstAt: Date.now() - 3600_000 });

t.test('sluice dlq replay puts 2000 entries back into delivery, printing its progress', async (t) => {
  const target = await receiver(200);
  const otherTarget = await receiver(200);
  receivers.push(target, otherTarget);
  const ep = await registerEndpoint(node, token, target.url, ['pipeline.failed']);
  const otherEp = await registerEndpoint(node, otherToken, otherTarget.url, ['pipeline.failed']);
  t.equal(ep.state, 'ACTIVE', 'the replay target is ACTIVE');

  // The records the dispatcher would have dead-lettered, written with a plain producer.
  const mine = entries(TENANT, ep.id, N, 'cli');
  const theirs = entries(OTHER, otherEp.id, OTHER_N, 'other');
  await writeDeadLetters(node.ctx.topics.dlq, mine);
  await writeDeadLetters(node.ctx.topics.dlq, theirs);
  const before = await until(
    () => listAll(token),
    (l) => l.length === N,
    90_000,
    `${N} entries listed`,
  );
  t.same(
    before.map((e) => e.id),
    mine.map((e) => e.id),
    'the API lists all of them, oldest first',
  );
  t.equal(
    (
      await until(
        () => listAll(otherToken),
        (l) => l.length === OTHER_N,
        30_000,
        'the other tenant listed',
      )
    ).length,
    OTHER_N,
  );

  const env = cliEnv(node.config);
  const listed = await runCli(['dlq', 'list', '--tenant', TENANT], env);
  t.equal(listed.code, 0, 'dlq list exits 0', { stderr: listed.stderr });
  const lines = listed.stdout.trim().split('\n');
  t.equal(lines[lines.length - 1], `${N} entries`, 'dlq list counts them before the replay');
  t.equal(lines.filter((l) => l.startsWith('dlq_cli_')).length, N, 'one line per entry');

  const replay = await runCli(['dlq', 'replay', '--tenant', TENANT, '--reason', 'dlq-cli test'], env);
  t.equal(replay.code, 0, 'dlq replay exits 0', { stderr: replay.stderr });
  const progress = [...replay.stdout.matchAll(/^replayed (\d+)\/(\d+) \((\d+)%\)$/gm)].map((m) => ({
    done: Number(m[1]),
    total: Number(m[2]),
  }));
  t.ok(progress.length >= 3, `several progress lines (${progress.length}):\n${replay.stdout}`);
  t.ok(
    progress.every((p) => p.total === N),
    `every progress line counts against ${N}`,
  );
  t.ok(
    progress.every((p, i) => i === 0 || p.done > progress[i - 1].done),
    `n grows: ${progress.map((p) => p.done).join(', ')}`,
  );
  t.ok(progress[0].done < N, 'the first line comes before the end');
  t.equal(progress[progress.length - 1]?.done, N, 'the last progress line is N/N');
  t.match(replay.stdout, new RegExp(`^done: ${N} entries back in delivery in [\\d.]+ s$`, 'm'), 'a closing summary');

  const after = await until(
    () => listAll(token),
    (l) => l.length === 0,
    // The node's view applies the 2,000 replay records as they arrive: beside the suite's load, more than 30 s.
    90_000,
    'the tenant DLQ empty via the API',
  );
  t.same(after, [], "the tenant's DLQ is empty via the API");
  const otherAfter = await listAll(otherToken);
  t.same(otherAfter, theirs, "the other tenant's entries are untouched");

  const json = await runCli(['dlq', 'list', '--tenant', TENANT, '--json'], env);
  t.equal(json.code, 0, 'dlq list --json exits 0', { stderr: json.stderr });
  t.same(JSON.parse(json.stdout), [], 'dlq list --json agrees: nothing left');
  const otherJson = await runCli(['dlq', 'list', '--tenant', OTHER, '--json'], env);
  t.same(
    (JSON.parse(otherJson.stdout) as DlqEntry[]).map((e) => e.id),
    theirs.map((e) => e.id),
    "and still lists the other tenant's entries",
  );

  // The replayed deliveries reach the ACTIVE endpoint, once per entry; nothing of the other tenant does.
  const delivered = await target.until(
    (ev) => new Set(ev.map((h) => h.body.id)).size >= N,
    120_000,
    `${N} replayed deliveries`,
  );
  t.same(
    [...new Set(delivered.map((h) => h.body.id))].sort(),
    mine.map((e) => e.event_id),
    'every replayed event was delivered',
  );
  t.ok(
    delivered.every((h) => h.headers['x-service-delivery-attempt'] === '1'),
    'each as a fresh first attempt',
  );
  t.equal(otherTarget.events().length, 0, 'the other tenant got no deliveries');
});
