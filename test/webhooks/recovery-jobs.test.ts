/**
 * The pieces of a recovery that need no Kafka: which of two overlapping jobs wins (by topic order,
 * the same on every node), when a silent job reads interrupted, the superseded marks, the window's
 * checks, and how the attempt digests count a job's delivered and failed deliveries.
 */
import t from 'tap';
import {
  RecoveryView,
  RECOVERY_STALE_MS,
  validateWindow,
  type RecoveryJob,
} from '../../core/webhooks/recovery-jobs.ts';
import { DigestBuilder } from '../../core/webhooks/attempt-digest.ts';
import type { AttemptRecord } from '../../core/webhooks/attempt-history.ts';
import type { SluiceError } from '../../core/errors.ts';

const NOW = Date.parse('2026-11-28T10:00:00Z');
const H = 3600_000;

function job(id: string, since: number, until: number, extra: Partial<RecoveryJob> = {}): RecoveryJob {
  return {
    kind: 'recovery',
    id,
    tenant_id: 'acme',
    endpoint_id: 'ep_1',
    since,
    until,
    state: 'running',
    found: 10,
    sent: 0,
    rate_per_second: 50,
    actor: 'cl_1',
    created_at: NOW,
    updated_at: NOW,
    finished_at: null,
    error: null,
    ...extra,
  };
}

let offset = 0;
const put = (v: RecoveryView, key: string, value: unknown) =>
  v.apply({
    topic: 't',
    partition: 0,
    offset: String(offset++),
    key,
    value: value === null ? null : Buffer.from(JSON.stringify(value)),
    headers: {},
    timestamp: NOW,
  });

t.test('of two overlapping running jobs the one written first wins, on every node alike', async (t) => {
  const v = new RecoveryView('t');
  const a = job('rcv_a', NOW - 3 * H, NOW);
  const b = job('rcv_b', NOW - 2 * H, NOW - H);
  const c = job('rcv_c', NOW - 6 * H, NOW - 3 * H); // touches a's start: [since, until) do not overlap
  put(v, a.id, a);
  put(v, b.id, b);
  put(v, c.id, c);
  t.equal(v.overlapping(a, NOW), undefined, 'the first has no earlier rival');
  t.equal(v.overlapping(b, NOW)?.id, 'rcv_a', 'the second loses to it');
  t.equal(v.overlapping(c, NOW), undefined, 'a disjoint window runs beside it');
  // Progress records of the first keep its place.
  put(v, a.id, { ...a, sent: 5, updated_at: NOW + 1000 });
  t.equal(v.overlapping(b, NOW + 1000)?.id, 'rcv_a');
  // A finished or silent job no longer blocks.
  put(v, a.id, { ...a, state: 'completed', updated_at: NOW + 2000 });
  t.equal(v.overlapping(b, NOW + 2000), undefined, 'a completed job does not block');
  put(v, a.id, { ...a, updated_at: NOW + 3000 });
  t.equal(v.get('acme', a.id, NOW + 3000 + RECOVERY_STALE_MS + 1)?.state, 'interrupted', 'a silent job is interrupted');
  t.equal(v.overlapping(b, NOW + 3000 + RECOVERY_STALE_MS + 1), undefined, 'and no longer blocks');
  t.equal(v.get('globex', a.id, NOW), undefined, 'another tenant does not see it');
  put(v, b.id, null);
  t.equal(v.get('acme', b.id, NOW), undefined, 'a tombstone removes a job');
  put(v, 'dlv:dlv_1', { kind: 'superseded', delivery_id: 'dlv_1', tenant_id: 'acme', job: 'rcv_a', at: NOW });
  put(v, 'dlv:dlv_2', { kind: 'superseded', delivery_id: 'dlv_other', tenant_id: 'acme', job: 'rcv_a', at: NOW });
  t.ok(v.isSuperseded('dlv_1'), 'a superseded mark');
  t.notOk(v.isSuperseded('dlv_2'), 'a mark whose key and id disagree is ignored');
  t.notOk(v.isSuperseded('dlv_3'));
});

t.test('a window is checked against now and the retention, naming the field', async (t) => {
  const paths = (since: number, until: number) => {
    try {
      validateWindow(NOW, since, until, 7 * 24 * H);
      return [];
    } catch (err) {
      return ((err as SluiceError).extra.errors as { path: string }[]).map((e) => e.path);
    }
  };
  t.same(paths(NOW - H, NOW), []);
  t.same(paths(Number.NaN, NOW), ['$.since']);
  t.same(paths(NOW - H, Number.NaN), ['$.until']);
  t.same(paths(NOW + 1, NOW + H), ['$.since'], 'in the future');
  t.same(paths(NOW - 7 * 24 * H - 1, NOW), ['$.since'], 'older than the retention');
  t.same(paths(NOW - 7 * 24 * H, NOW), [], 'exactly the retention');
  t.same(paths(NOW - H, NOW - H), ['$.until'], 'an empty window');
});

t.test("the digests count a recovery's deliveries: delivered, and failed until one succeeds", async (t) => {
  const d = new DigestBuilder();
  const a = (delivery: string, attempt: number, ok: boolean, recovery?: string): AttemptRecord => ({
    delivery_id: delivery,
    endpoint_id: 'ep_1',
    tenant_id: 'acme',
    event_id: `evt_${delivery}`,
    event_type: 'pipeline.failed',
    attempt,
    at: NOW + attempt,
    duration_ms: 3,
    status: ok ? 200 : 500,
    error: null,
    ok,
    outcome: ok ? 'delivered' : 'retry',
    ...(recovery ? { recovery } : {}),
  });
  d.add(a('d1', 1, true, 'rcv_a')); // delivered at once
  d.add(a('d2', 1, false, 'rcv_a')); // failed...
  d.add(a('d2', 2, true, 'rcv_a')); // ...then delivered
  d.add(a('d3', 1, false, 'rcv_a')); // failed
  d.add(a('d3', 2, false, 'rcv_a')); // still failed: counted once
  d.add(a('d4', 1, true)); // a live delivery: not the job's
  d.add(a('d5', 1, false, 'rcv_b'));
  const [digest] = d.take();
  t.same(digest.recoveries, [
    ['rcv_a', 2, 1],
    ['rcv_b', 0, 1],
  ]);
});
