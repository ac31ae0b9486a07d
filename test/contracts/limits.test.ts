import t from 'tap';
import { startTestNode } from '../helpers/sluice.ts';
import { runLimits, formatLimits, LIMIT_NAMES } from '../../contracts/limits/index.ts';
import { maxInWindow } from '../../contracts/limits/burst.ts';

const SCALE = 4320; // 72 h of retries in about a minute
// Secrets and signing keys rotate every 30 days / 129600 = 20 s: the rotation guard sees two of
// each (about 40 s) while the retry ladder runs (about 55 s), so it adds no time.
const ROTATION = { scale: 129_600, checkMs: 250 };
const node = await startTestNode(
  {
    SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
    SLUICE_TIME_SCALE: String(SCALE),
    SLUICE_SECRET_ROTATION_DAYS: String(30 / ROTATION.scale),
    SLUICE_KEY_ROTATION_DAYS: String(30 / ROTATION.scale),
    SLUICE_ROTATION_CHECK_MS: String(ROTATION.checkMs),
  },
  { dispatcher: true },
);
t.teardown(() => node.close());

t.test('every limit of the spec is measured against a live Sluice, and every one passes', async (t) => {
  const admin = await node.client('admin', 'acme');
  const victim = await node.client('webhook-publisher', 'acme');
  const rows = await runLimits({
    baseUrl: node.base,
    clientId: admin.client_id,
    clientSecret: admin.client_secret,
    revocable: { clientId: victim.client_id, clientSecret: victim.client_secret },
    timeScale: SCALE,
    rotation: ROTATION,
    // Wall-clock bounds fail on a busy machine, not on a broken Sluice: here the guards judge what
    // Sluice decided; `sluice contract verify --limits` judges the spec's numbers.
    judgeDurations: false,
  });
  t.comment(`\n${formatLimits(rows)}`);
  t.same(rows.map((r) => r.limit).sort(), [...LIMIT_NAMES].sort(), 'one row per limit the service promises');
  t.equal(rows.length, 15);
  // Nothing was asked to skip, so a skip is as much a failure as a fail.
  t.same(
    rows
      .filter((r) => r.outcome !== 'pass')
      .map((r) => `${r.outcome.toUpperCase()} ${r.limit}: ${r.measured}${r.reason ? ` (${r.reason})` : ''}`),
    [],
    'every guard passes',
  );
  for (const r of rows) t.equal(r.outcome, 'pass', `${r.limit}: ${r.measured}`);
});

t.test('a guard reports skip only when asked to, and a failure to measure as a fail', async (t) => {
  const admin = await node.client('admin', 'acme');
  // Asked to skip: every row says skip, and none runs.
  const skipped = await runLimits({
    baseUrl: node.base,
    clientId: admin.client_id,
    clientSecret: admin.client_secret,
    skip: LIMIT_NAMES,
  });
  t.same(
    skipped.map((r) => r.outcome),
    LIMIT_NAMES.map(() => 'skip'),
    'every named limit is skipped',
  );
  // A Sluice that cannot be measured is a failure, not a skip: here nothing listens at the base URL.
  const dead = 'http://127.0.0.1:9';
  const rows = await runLimits({
    baseUrl: dead,
    clientId: admin.client_id,
    clientSecret: admin.client_secret,
    revocable: { clientId: 'x', clientSecret: 'y' },
    timeScale: SCALE,
    skip: ['credential rotation cycle'],
  });
  t.same(
    rows
      .filter((r) => r.limit !== 'credential rotation cycle' && r.outcome !== 'fail')
      .map((r) => `${r.outcome} ${r.limit}`),
    [],
    'every guard that could not measure fails',
  );
});

t.test('the rate guard counts the busiest sliding 1 s window, not fixed seconds', async (t) => {
  t.equal(maxInWindow([], 1000), 0);
  // 20 a second, evenly: 20 in any window.
  t.equal(
    maxInWindow(
      Array.from({ length: 100 }, (_, i) => i * 50),
      1000,
    ),
    20,
  );
  // 15 at the end of one second and 15 at the start of the next: two fixed seconds of 15, one window of 30.
  const straddling = [
    ...Array.from({ length: 15 }, (_, i) => 900 + i),
    ...Array.from({ length: 15 }, (_, i) => 1000 + i),
  ];
  t.equal(maxInWindow(straddling, 1000), 30);
  t.equal(maxInWindow([0, 1000, 2000], 1000), 1, 'a window is [t, t + 1 s)');
});
