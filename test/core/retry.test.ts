import t from 'tap';
import { doubling, retry, type RetryOptions } from '../../core/retry.ts';
import { SluiceBaseError, unavailable } from '../../core/errors.ts';

/** A clock that only moves when the loop sleeps: the waits are recorded, none is waited. */
function fakeTime() {
  let now = 1_000_000;
  const waits: number[] = [];
  return {
    waits,
    opts: {
      now: () => now,
      sleep: async (ms: number) => {
        waits.push(ms);
        now += ms;
      },
    } satisfies Partial<RetryOptions>,
  };
}

/** A function failing with `errors` in turn, then answering 'ok'; `calls` counts its calls. */
function failing(...errors: unknown[]) {
  const f = Object.assign(
    async () => {
      f.calls++;
      if (errors.length > 0) throw errors.shift();
      return 'ok';
    },
    { calls: 0 },
  );
  return f;
}

const transient = () => unavailable('Kafka is away');
const permanent = () => new SluiceBaseError('REFUSED', 'no');

t.test('retries retriable failures with the given waits until it succeeds', async (t) => {
  const time = fakeTime();
  const f = failing(transient(), transient(), transient());
  const seen: [number, number][] = [];
  t.equal(
    await retry(f, { ...time.opts, backoff: doubling(100, 250), onRetry: (_e, n, ms) => void seen.push([n, ms]) }),
    'ok',
  );
  t.equal(f.calls, 4);
  t.same(time.waits, [100, 200, 250], 'doubling, capped');
  t.same(
    seen,
    [
      [0, 100],
      [1, 200],
      [2, 250],
    ],
    'onRetry before each wait',
  );
});

t.test('a failure that is not retriable is thrown at once, as it is', async (t) => {
  const time = fakeTime();
  const err = permanent();
  const f = failing(transient(), err);
  await t.rejects(retry(f, { ...time.opts, backoff: () => 10 }), err);
  t.equal(f.calls, 2);
  t.same(time.waits, [10]);
  const plain = failing(new Error('no retriable flag'));
  await t.rejects(
    retry(plain, { ...time.opts, backoff: () => 10 }),
    /no retriable flag/,
    'an error without the flag is not retried',
  );
  t.equal(plain.calls, 1);
});

t.test('isRetriable overrides the flag', async (t) => {
  const time = fakeTime();
  const f = failing(permanent(), new Error('anything'));
  t.equal(await retry(f, { ...time.opts, backoff: () => 1, isRetriable: () => true }), 'ok');
  t.equal(f.calls, 3);
  const g = failing(transient());
  await t.rejects(retry(g, { ...time.opts, backoff: () => 1, isRetriable: () => false }), /Kafka is away/);
  t.equal(g.calls, 1);
});

t.test('attempts bounds the calls; the last failure is thrown with no wait after it', async (t) => {
  const time = fakeTime();
  const errors = [transient(), transient(), transient(), transient()];
  const f = failing(...errors);
  await t.rejects(retry(f, { ...time.opts, attempts: 3, backoff: (n) => 10 * (n + 1) }), errors[2]);
  t.equal(f.calls, 3);
  t.same(time.waits, [10, 20], 'waits after the first two failures only');
});

t.test('timeoutMs: gives up when the next wait would end past the deadline', async (t) => {
  const time = fakeTime();
  const f = failing(...Array.from({ length: 20 }, transient));
  await t.rejects(retry(f, { ...time.opts, timeoutMs: 1000, backoff: doubling(100, 2000) }), /Kafka is away/);
  t.same(time.waits, [100, 200, 400], '100+200+400 = 700; another 800 would end at 1500 > 1000');
  t.equal(f.calls, 4);
});

t.test('stopped: checked after a failure and after its wait; the failure is thrown', async (t) => {
  const time = fakeTime();
  let stop = false;
  const f = failing(transient(), transient(), transient());
  const sleep = async (ms: number) => {
    await time.opts.sleep(ms);
    stop = true; // stopped during the first wait
  };
  await t.rejects(retry(f, { ...time.opts, sleep, backoff: () => 5, stopped: () => stop }), /Kafka is away/);
  t.equal(f.calls, 1, 'no call after the wait it was stopped in');
  const g = failing(transient());
  await t.rejects(retry(g, { ...time.opts, backoff: () => 5, stopped: () => true }), /Kafka is away/);
  t.equal(g.calls, 1);
  t.same(time.waits, [5], 'no wait once stopped');
});

t.test('fn gets the number of the call', async (t) => {
  const time = fakeTime();
  const calls: number[] = [];
  await retry(
    async (n) => {
      calls.push(n);
      if (n < 2) throw transient();
    },
    { ...time.opts, backoff: () => 1 },
  );
  t.same(calls, [0, 1, 2]);
});
