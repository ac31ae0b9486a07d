import t from 'tap';
import { startTestNode } from '../helpers/sluice.ts';
import { runLimits, formatLimits } from '../../contracts/limits/index.ts';

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

t.test('every limit of the spec is measured against a live Sluice, or skipped with a reason', async (t) => {
  const admin = await node.client('admin', 'acme');
  const victim = await node.client('webhook-publisher', 'acme');
  const rows = await runLimits({ baseUrl: node.base, clientId: admin.client_id, clientSecret: admin.client_secret, revocable: { clientId: victim.client_id, clientSecret: victim.client_secret }, timeScale: SCALE, rotation: ROTATION });
  t.comment(`\n${formatLimits(rows)}`);
  t.equal(rows.length, 9, 'one row per limit of spec section 8');
  t.same(rows.filter((r) => r.outcome === 'fail').map((r) => `${r.limit}: ${r.measured}${r.reason ? ` (${r.reason})` : ''}`), [], 'no guard fails');
  for (const r of rows.filter((r) => r.outcome === 'skip')) t.ok(r.reason, `${r.limit} says why it is skipped`);
  const byName = Object.fromEntries(rows.map((r) => [r.limit, r]));
  t.equal(byName['access token lifetime'].outcome, 'pass');
  t.equal(byName['replay window'].outcome, 'pass');
  t.equal(byName['credential rotation cycle'].outcome, 'pass', `rotation cycle: ${byName['credential rotation cycle'].measured}`);
});
