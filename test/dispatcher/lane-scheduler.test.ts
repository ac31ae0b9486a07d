import t from 'tap';
import { LaneScheduler, type LaneJob, type LanePolicy, type LaneStep } from '../../dispatcher/lane-scheduler.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function setup(policy: Partial<LanePolicy> = {}, concurrency = 100) {
  const p: LanePolicy | null = { spacingMs: 0, maxInFlight: 100, ordered: false, waiting: false, ...policy };
  const state = { policy: p as LanePolicy | null };
  const lanes = new LaneScheduler({
    concurrency,
    now: () => Date.now(),
    recheckMs: 20,
    policyOf: () => state.policy,
  });
  return { lanes, state };
}

interface Made {
  job: LaneJob;
  done: Promise<string>;
}

/** A job that takes `ms`, records its start, and answers what `step` says (done by default). */
function job(
  name: string,
  log: string[],
  opts: { key?: string | null; ms?: number; step?: () => LaneStep; origin?: string } = {},
): Made {
  let finish!: (how: string) => void;
  const done = new Promise<string>((r) => (finish = r));
  return {
    done,
    job: {
      endpointId: 'ep_1',
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

t.test('requests start at least spacingMs apart', async (t) => {
  const { lanes } = setup({ spacingMs: 30 });
  const starts: number[] = [];
  const jobs = Array.from({ length: 6 }, (_, i) => {
    const m = job(`j${i}`, []);
    const run = m.job.run.bind(m.job);
    m.job.run = () => {
      starts.push(Date.now());
      return run();
    };
    return m;
  });
  for (const m of jobs) lanes.submit(m.job);
  await Promise.all(jobs.map((m) => m.done));
  for (let i = 1; i < starts.length; i++)
    t.ok(starts[i] - starts[i - 1] >= 28, `gap ${i}: ${starts[i] - starts[i - 1]} ms`);
  t.equal(lanes.buffered, 0);
});

t.test('no more than maxInFlight run at once', async (t) => {
  const { lanes } = setup({ maxInFlight: 3 });
  let open = 0;
  let most = 0;
  const jobs = Array.from({ length: 20 }, (_, i) => {
    const m = job(`j${i}`, [], { ms: 10 });
    const run = m.job.run.bind(m.job);
    m.job.run = async () => {
      open++;
      most = Math.max(most, open);
      const s = await run();
      open--;
      return s;
    };
    return m;
  });
  for (const m of jobs) lanes.submit(m.job);
  await Promise.all(jobs.map((m) => m.done));
  t.equal(most, 3);
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
