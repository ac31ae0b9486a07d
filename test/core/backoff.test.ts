import t from 'tap';
import { retryLadder } from '../../core/webhooks/retry-policy.ts';

const { maxAttempts: MAX_ATTEMPTS, rungs: RUNGS, nominalSpanMs, delayAfter: retryDelayMs, rungAfter } = retryLadder;

const H = 3600_000;
const span = (random: () => number, scale = 1) => {
  let total = 0;
  for (let n = 1; n < MAX_ATTEMPTS; n++) total += retryDelayMs(n, scale, random);
  return total;
};

t.test('attempt 17 lands in [60 h, 72 h] after attempt 1 for any jitter', async (t) => {
  t.equal(MAX_ATTEMPTS, 17);
  const nominal = nominalSpanMs();
  t.ok(nominal >= 62 * H && nominal < 62.01 * H, `no jitter: ${(nominal / H).toFixed(3)} h`);
  t.equal(
    span(() => 0),
    nominal,
    'least jitter is the nominal schedule',
  );
  t.ok(Math.abs(span(() => 0.999999) - nominal * 1.1) < 1000, 'most jitter: nominal + 10 % (68.2 h)');
  for (let i = 0; i < 200; i++) {
    const s = span(Math.random);
    t.ok(s >= 60 * H && s <= 72 * H, `random schedule ${(s / H).toFixed(2)} h`);
  }
});

t.test('the delays grow exponentially from 30 s to a 9 h cap, and jitter only lengthens them', async (t) => {
  const delays = Array.from({ length: MAX_ATTEMPTS - 1 }, (_, i) => rungAfter(i + 1).delayMs);
  t.equal(delays[0], 30_000);
  for (let i = 1; i < delays.length; i++) t.ok(delays[i] >= delays[i - 1], `delay ${i + 1} >= delay ${i}`);
  t.equal(delays.at(-1), 9 * H);
  t.equal(new Set(delays).size, RUNGS.length, 'one rung topic per distinct delay');
  for (let n = 1; n < MAX_ATTEMPTS; n++) {
    const d = retryDelayMs(n, 1, Math.random);
    t.ok(d >= rungAfter(n).delayMs && d <= rungAfter(n).delayMs * 1.1, `attempt ${n}: jitter within +10 %`);
  }
});

t.test('SLUICE_TIME_SCALE divides the delays; there is no retry after attempt 17', async (t) => {
  t.equal(
    retryDelayMs(1, 4320, () => 0),
    30_000 / 4320,
  );
  t.ok(Math.abs(span(() => 0, 4320) - nominalSpanMs() / 4320) < 1e-6, 'the 62 h ladder in ~52 s at 4320');
  t.throws(() => rungAfter(17), RangeError);
  t.throws(() => rungAfter(0), RangeError);
});
