/**
 * The ladder's decisions on an injected clock (dispatcher/ladder.ts `afterAttempt`): a delivery
 * that always fails, attempted exactly when due, is retried at growing intervals, and its 17th
 * attempt lands 60-72 h after the first for any jitter; a Retry-After lengthens a wait, never
 * shortens it, and is capped at what is left of the 72 h span. The end-to-end ladder test
 * (ladder.test.ts) checks on a real broker that no attempt comes before these times.
 */
import t from 'tap';
import { afterAttempt, remainingSpanMs } from '../../dispatcher/ladder.ts';
import { newDelivery } from '../../core/webhooks/deliveries.ts';
import type { AttemptOutcome } from '../../outbound/attempt.ts';
import type { DeliveryRecord } from '../../core/webhooks/records.ts';

const H = 3600_000;
const T0 = Date.parse('2026-11-28T00:00:00Z');
const failed = (retryAfterMs: number | null = null): AttemptOutcome => ({
  ok: false,
  status: retryAfterMs === null ? 500 : 503,
  error: 'HTTP 500',
  durationMs: 5,
  retryAfterMs,
});
const fresh = (): DeliveryRecord =>
  newDelivery({ id: 'evt_1', tenant_id: 'acme', type: 'pipeline.failed', data: {}, created_at: T0 }, 'ep_1', T0);

/** Attempt times of a delivery that always fails, each attempt made the moment it is due. */
function walk(random: () => number, timeScale = 1): { at: number[]; last: string } {
  let rec = fresh();
  let now = T0;
  const at: number[] = [];
  for (;;) {
    at.push(now);
    const o = afterAttempt(rec, failed(), now, { now, timeScale, random });
    if (o.kind !== 'retry') return { at, last: o.kind };
    rec = o.next;
    now = o.next.due_at;
  }
}

for (const [name, random] of [
  ['no jitter', () => 0],
  ['most jitter', () => 0.999999],
  ['random jitter', Math.random],
] as const) {
  t.test(`${name}: 17 attempts at growing intervals, the 17th 60-72 h after the first, then the DLQ`, async (t) => {
    const { at, last } = walk(random);
    t.equal(at.length, 17, '17 attempts');
    t.equal(last, 'dead-letter', 'then dead-lettered');
    const gaps = at.slice(1).map((a, i) => a - at[i]);
    t.equal(gaps[0] >= 30_000 && gaps[0] <= 33_000, true, `the first retry after 30-33 s (${gaps[0]} ms)`);
    // Jitter stretches each delay by 0-10 %: a gap is at least the nominal one before it, so with
    // doubling delays (and the 9 h cap) no gap is shorter than 10/11 of the one before.
    t.ok(
      gaps.every((g, i) => i === 0 || g >= (gaps[i - 1] * 10) / 11),
      `intervals grow: ${gaps.map((g) => (g / 60_000).toFixed(1)).join(' ')} min`,
    );
    t.ok(gaps[15] > gaps[0] * 500, 'the last interval is hours, the first seconds');
    const span = at[16] - at[0];
    t.ok(span >= 60 * H && span <= 72 * H, `attempt 17 at ${(span / H).toFixed(2)} h`);
  });
}

t.test('SLUICE_TIME_SCALE divides every interval', async (t) => {
  const real = walk(() => 0).at;
  const scaled = walk(() => 0, 4320).at;
  t.same(
    scaled.map((a) => Math.round((a - T0) * 4320)),
    real.map((a) => a - T0),
    'the same schedule, 4320 times faster',
  );
});

t.test('a Retry-After lengthens a wait, never shortens it, and is capped at what is left of the span', async (t) => {
  const clock = (now: number) => ({ now, timeScale: 1, random: () => 0 });
  // Shorter than the backoff (30 s after attempt 1): the backoff stands.
  const short = afterAttempt(fresh(), failed(5_000), T0, clock(T0));
  t.equal(short.kind === 'retry' && short.next.due_at - T0, 30_000, 'a 5 s Retry-After does not shorten 30 s');
  // Longer: the receiver's wait.
  const longer = afterAttempt(fresh(), failed(600_000), T0, clock(T0));
  t.equal(longer.kind === 'retry' && longer.next.due_at - T0, 600_000, 'a 10 min Retry-After is kept');
  // A day asked with 70 h of the span gone: the retry is due at the span's end, not a day later.
  const late: DeliveryRecord = { ...fresh(), attempt: 9, first_attempt_at: T0 };
  const now = T0 + 70 * H;
  t.equal(remainingSpanMs(late, clock(now)), 2 * H, '2 h of the span left');
  const capped = afterAttempt(late, failed(24 * H), now, clock(now));
  t.equal(capped.kind, 'retry');
  t.equal(capped.kind === 'retry' && capped.next.due_at, T0 + 72 * H, 'due at the end of the 72 h span');
  // Past the span, a Retry-After adds nothing: the ladder's own backoff.
  const past = afterAttempt({ ...late, attempt: 10 }, failed(24 * H), T0 + 73 * H, clock(T0 + 73 * H));
  t.equal(
    past.kind === 'retry' && past.next.due_at - (T0 + 73 * H) < 24 * H,
    true,
    'after the span a day is not waited',
  );
});
