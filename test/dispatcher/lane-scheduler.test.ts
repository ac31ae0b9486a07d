import t from 'tap';
import { LaneScheduler, type LaneJob, type LanePolicy, type LaneStep } from '../../dispatcher/lane-scheduler.ts';
import { DeliveryScheduler, type EndpointSignal } from '../../dispatcher/scheduler.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A lane scheduler over a real process scheduler (`slots`), every endpoint under one policy. */
function setup(
  policy: Partial<LanePolicy> = {},
  opts: { concurrency?: number; maxBuffered?: number; waitAllowance?: number } = {},
) {
  /** The time the scheduler last read: an attempt's start as it counts it (a busy host may pause between reads). */
  const clock = { last: 0 };
  const p: LanePolicy | null = { spacingMs: 0, maxInFlight: 100, ordered: false, waiting: false, ...policy };
  const state = { policy: p as LanePolicy | null };
  const slots = new DeliveryScheduler<EndpointSignal>(
    { concurrency: opts.concurrency ?? 100, perEndpoint: 8, maxBuffered: 100_000, now: () => Date.now() },
    (_j, v) => v,
  );
  const lanes = new LaneScheduler({
    slots,
    maxBuffered: opts.maxBuffered ?? 100_000,
    waitAllowance: opts.waitAllowance ?? 1000,
    now: () => (clock.last = Date.now()),
    recheckMs: 20,
    policyOf: () => state.policy,
  });
  return { lanes, state, slots, clock };
}

interface Made {
  job: LaneJob;
  done: Promise<string>;
}

/** A job that takes `ms`, records its start, and answers what `step` says (done by default). */
function job(
  name: string,
  log: string[],
  opts: {
    key?: string | null;
    ms?: number;
    step?: () => LaneStep;
    origin?: string;
    endpoint?: string;
    tenant?: string;
    waiting?: boolean;
  } = {},
): Made {
  let finish!: (how: string) => void;
  const done = new Promise<string>((r) => (finish = r));
  return {
    done,
    job: {
      endpointId: opts.endpoint ?? 'ep_1',
      tenantId: opts.tenant ?? 't_1',
      waiting: opts.waiting,
      key: opts.key ?? null,
      origin: opts.origin ?? 'lanes\u00000',
      async run() {
        log.push(name);
        await sleep(opts.ms ?? 1);
        const step = opts.step?.() ?? { done: true };
        if (step.done) finish('done');
        return step;
      },
      expire(reason) {
        finish(reason);
      },
    },
  };
}

/** Counts the jobs' attempts open at once: `seen` has the count at each start. */
function inFlight(made: Made[]): { seen: number[]; most(): number } {
  const seen: number[] = [];
  let open = 0;
  for (const m of made) {
    const run = m.job.run.bind(m.job);
    m.job.run = async (onRetryAfter) => {
      seen.push(++open);
      try {
        return await run(onRetryAfter);
      } finally {
        open--;
      }
    };
  }
  return { seen, most: () => Math.max(0, ...seen) };
}

t.test('requests start at least spacingMs apart', async (t) => {
  const { lanes, clock } = setup({ spacingMs: 30 });
  const starts: number[] = [];
  const jobs = Array.from({ length: 6 }, (_, i) => {
    const m = job(`j${i}`, []);
    const run = m.job.run.bind(m.job);
    m.job.run = (onRetryAfter) => {
      // The scheduler's own reading of the start: the spacing counts from it.
      starts.push(clock.last);
      return run(onRetryAfter);
    };
    return m;
  });
  for (const m of jobs) lanes.submit(m.job);
  await Promise.all(jobs.map((m) => m.done));
  for (let i = 1; i < starts.length; i++)
    t.ok(starts[i] - starts[i - 1] >= 30, `gap ${i}: ${starts[i] - starts[i - 1]} ms`);
  t.equal(lanes.buffered, 0);
});

t.test('a Retry-After holds the lane from when the answer is read, not when its attempt settles', async (t) => {
  const { lanes } = setup({ spacingMs: 10 });
  const starts: number[] = [];
  const first = job('j0', [], { ms: 0 });
  first.job.run = async (onRetryAfter) => {
    starts.push(Date.now());
    onRetryAfter(Date.now() + 300); // the answer: 429, Retry-After
    await sleep(100); // its bookkeeping: a Kafka write about the endpoint's health
    return { done: true, notBefore: starts[0] + 300 };
  };
  const second = job('j1', []);
  const run = second.job.run.bind(second.job);
  second.job.run = (onRetryAfter) => {
    starts.push(Date.now());
    return run(onRetryAfter);
  };
  lanes.submit(first.job);
  lanes.submit(second.job);
  await second.done;
  t.ok(starts[1] - starts[0] >= 295, `the next request waited for the Retry-After: ${starts[1] - starts[0]} ms`);
});

t.test('no more than maxInFlight run at once', async (t) => {
  const { lanes } = setup({ maxInFlight: 3 });
  const jobs = Array.from({ length: 20 }, (_, i) => job(`j${i}`, [], { ms: 10 }));
  const open = inFlight(jobs);
  for (const m of jobs) lanes.submit(m.job);
  await Promise.all(jobs.map((m) => m.done));
  t.equal(open.most(), 3);
});

t.test('an ordered key goes one at a time; a failing head holds back only its key', async (t) => {
  const { lanes } = setup({ ordered: true });
  const log: string[] = [];
  let failures = 2;
  const a1 = job('a1', log, {
    key: 'a',
    ms: 5,
    step: () => (failures-- > 0 ? { done: false, retryAt: Date.now() + 30 } : { done: true }),
  });
  const a2 = job('a2', log, { key: 'a' });
  const b1 = job('b1', log, { key: 'b' });
  const b2 = job('b2', log, { key: 'b' });
  for (const m of [a1, a2, b1, b2]) lanes.submit(m.job);
  await Promise.all([b1.done, b2.done]);
  t.notOk(log.includes('a2'), 'a2 waits while a1 fails');
  t.ok(log.indexOf('b2') > log.indexOf('b1'), 'b flows in order meanwhile');
  await Promise.all([a1.done, a2.done]);
  t.same(
    log.filter((n) => n.startsWith('a')),
    ['a1', 'a1', 'a1', 'a2'],
    'a1 three times, then a2',
  );
});

t.test('a waiting endpoint starts nothing until woken; a gone one expires its jobs', async (t) => {
  const { lanes, state } = setup({ waiting: true });
  const log: string[] = [];
  const m = job('w', log);
  lanes.submit(m.job);
  await sleep(60);
  t.same(log, [], 'nothing while waiting');
  state.policy = { ...state.policy!, waiting: false };
  lanes.wake('ep_1');
  t.equal(await m.done, 'done');
  state.policy = { ...state.policy!, waiting: true };
  const g = job('g', log);
  lanes.submit(g.job);
  state.policy = null;
  lanes.wake('ep_1');
  t.equal(await g.done, 'gone');
  t.equal(lanes.buffered, 0);
});

t.test('frozen, nothing starts; a moved partition drops its queued jobs', async (t) => {
  const { lanes } = setup({ maxInFlight: 1 });
  const log: string[] = [];
  lanes.freeze();
  const mine = job('mine', log, { origin: 'lanes\u00001' });
  const moved = job('moved', log, { origin: 'lanes\u00002' });
  lanes.submit(mine.job);
  lanes.submit(moved.job);
  await sleep(30);
  t.same(log, []);
  t.equal(lanes.dropQueued(new Set(['lanes\u00002'])), 1);
  lanes.thaw();
  await mine.done;
  await sleep(30);
  t.same(log, ['mine'], 'the moved job never ran');
  t.equal(lanes.buffered, 0);
});

t.test('a running head whose partition moved is not retried here when it fails', async (t) => {
  const { lanes } = setup({ ordered: true });
  const log: string[] = [];
  const head = job('head', log, { key: 'k', ms: 50, step: () => ({ done: false, retryAt: Date.now() }) });
  lanes.submit(head.job);
  await sleep(10);
  lanes.freeze();
  t.equal(lanes.dropQueued(new Set(['lanes\u00000'])), 0, 'the running head is not dropped while it runs');
  lanes.thaw();
  await sleep(300);
  t.same(log, ['head'], 'tried once, never again by the old owner');
  t.equal(lanes.buffered, 0);
});

t.test('keyless jobs of an ordered endpoint take turns with the keys', async (t) => {
  const { lanes } = setup({ ordered: true, maxInFlight: 1 });
  const log: string[] = [];
  const made = [
    ...Array.from({ length: 4 }, (_, i) => job(`k${i}`, log, { key: `k${i}` })),
    ...Array.from({ length: 4 }, (_, i) => job(`f${i}`, log)),
  ];
  lanes.freeze();
  for (const m of made) lanes.submit(m.job);
  lanes.thaw();
  await Promise.all(made.map((m) => m.done));
  t.ok(
    log.slice(0, 4).some((n) => n.startsWith('f')),
    `a free job within the first four (${log.join(' ')})`,
  );
});

t.test('a moved partition drops a ticket still waiting for a slot in the process scheduler', async (t) => {
  const { lanes, slots } = setup({ maxInFlight: 1 });
  const log: string[] = [];
  slots.freeze('lanes-group');
  const moved = job('moved', log, { origin: 'lanes\u00002' });
  lanes.submit(moved.job);
  t.equal(lanes.ticketed, 1, 'the lane holds a ticket');
  t.equal(slots.buffered, 1, 'which waits in the process scheduler');
  t.equal(lanes.dropQueued(new Set(['lanes\u00002'])), 1);
  t.equal(slots.dropQueued(new Set(['lanes\u00002'])), 1);
  slots.thaw('lanes-group');
  await sleep(30);
  t.same(log, [], 'never ran');
  t.equal(lanes.buffered, 0);
  t.equal(lanes.ticketed, 0);
  t.equal(slots.buffered, 0);
});

t.test("lane attempts take the process's slots under the tenant share: one tenant cannot starve another", async (t) => {
  // 8 slots; tenant C has 40 lanes of slow requests, tenant B one lane that arrives after them.
  const { lanes, slots } = setup({ maxInFlight: 1000 }, { concurrency: 8 });
  const log: string[] = [];
  const slow = Array.from({ length: 40 * 2 }, (_, i) =>
    job(`c${i}`, log, { endpoint: `ep_c${i % 40}`, tenant: 'C', ms: 30 }),
  );
  const open = inFlight(slow);
  for (const m of slow) lanes.submit(m.job);
  t.equal(slots.active, 4, 'tenant C alone: half the slots (8 / (1 + 1))');
  const started = Date.now();
  let bAt = 0;
  const b = job('b', log, { endpoint: 'ep_b', tenant: 'B', ms: 1 });
  const bRun = b.job.run.bind(b.job);
  b.job.run = (onRetryAfter) => {
    bAt = Date.now();
    return bRun(onRetryAfter);
  };
  lanes.submit(b.job);
  t.ok(bAt > 0, "B's delivery starts at once, in a slot C could not take");
  t.ok(bAt - started < 30, `B started after ${bAt - started} ms`);
  await Promise.all([...slow.map((m) => m.done), b.done]);
  t.ok(open.most() <= 4, `C never had more than its share in flight (${open.most()})`);
  await sleep(10); // the last attempts settle in the scheduler after their jobs finished
  t.equal(slots.buffered, 0);
  t.equal(lanes.buffered, 0);
});

t.test("a slow lane endpoint's limit is halved by the process scheduler, as any endpoint's", async (t) => {
  const { lanes } = setup({ maxInFlight: 8 });
  const made = Array.from({ length: 24 }, (_, i) =>
    job(`j${i}`, [], { ms: 5, step: () => ({ done: true, slow: true }) }),
  );
  const { seen } = inFlight(made);
  for (const m of made) lanes.submit(m.job);
  await Promise.all(made.map((m) => m.done));
  t.equal(Math.max(...seen.slice(0, 8)), 8, 'the first burst fills max_in_flight');
  t.equal(Math.max(...seen.slice(-8)), 1, 'after slow answers, one at a time');
});

t.test('the lane buffer is shared out by tenant; waiting deliveries have a small allowance', async (t) => {
  const { lanes } = setup({ waiting: true, ordered: true }, { maxBuffered: 100, waitAllowance: 10 });
  const held = (tenant: string, n: number, waiting: boolean) => {
    for (let i = 0; i < n; i++) lanes.submit(job(`${tenant}${i}`, [], { tenant, waiting, key: 'k' }).job);
  };
  t.ok(lanes.admits('C', true), 'an empty buffer admits a waiting delivery');
  held('C', 10, true);
  t.notOk(lanes.admits('C', true), "C's waiting allowance (10) is used up");
  t.ok(lanes.admits('C', false), 'C may still hold deliveries that go');
  t.ok(lanes.admits('B', true), 'B has its own allowance');
  held('C', 90, false);
  t.notOk(lanes.admits('C', false), 'C alone may hold the whole buffer (100), no more');
  t.ok(lanes.admits('B', false), 'B, arriving, is under its share (100 / 2)');
  held('B', 1, false);
  t.notOk(lanes.admits('C', true), 'with B here, C is over its share (50)');
  held('B', 48, false);
  t.ok(lanes.admits('B', false), 'B at 49 of its 50');
  held('B', 1, false);
  t.notOk(lanes.admits('B', false), 'B at 50 of its 50');
  t.notOk(lanes.hasRoom('C', false), 'C has no room again until it drains to half its share');
  t.same(lanes.heldBy('C'), { held: 100, waiting: 10 });
  lanes.close();
});
