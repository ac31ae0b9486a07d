import t from 'tap';
import { type ScalingRule, WorkerScaling } from '../../cli/worker-scaling.ts';
import { CLI_SETTINGS } from '../../core/config.ts';
import { ConfigError } from '../../core/errors.ts';

const rule: ScalingRule = { min: 1, max: 2, growBusy: 0.6, shrinkBusy: 0.4, growAfterMs: 5000, shrinkAfterMs: 60_000 };

/** Every worker of `live` reports `busy` once a second from `from` to `to` (ms); the last decision. */
function run(s: WorkerScaling, live: number[], busy: (index: number) => number, from: number, to: number) {
  let step = null as ReturnType<WorkerScaling['decide']>;
  for (let at = from + 1000; at <= to; at += 1000) {
    for (const i of live) s.report(i, busy(i), at);
    step = s.decide(live, at);
    if (step) return { step, at };
  }
  return { step, at: to };
}

t.test('one busy worker grows the node after the grow window, not before', async (t) => {
  const s = new WorkerScaling(rule, 0);
  const r = run(s, [0], () => 0.9, 0, 20_000);
  t.same(r.step, { step: 'grow', busy: 0.9 });
  t.equal(r.at, 5000, 'at the first decision with a full window');
});

t.test('a loop at or under the grow share never grows the node; a short burst neither', async (t) => {
  t.equal(run(new WorkerScaling(rule, 0), [0], () => 0.6, 0, 120_000).step, null, 'exactly 0.6');
  // Two seconds at 100 % in every ten, 10 % otherwise: no five-second mean passes 0.6.
  const s = new WorkerScaling(rule, 0);
  let step = null as ReturnType<WorkerScaling['decide']>;
  for (let at = 1000; at <= 30_000 && !step; at += 1000) {
    s.report(0, at % 10_000 < 2000 ? 1 : 0.1, at);
    step = s.decide([0], at);
  }
  t.equal(step, null, 'two busy seconds in ten do not');
});

t.test('two workers shrink to one when one would have carried their load, after the shrink window', async (t) => {
  const s = new WorkerScaling(rule, 0);
  const r = run(s, [0, 1], () => 0.125, 0, 120_000);
  t.same(r.step, { step: 'shrink', busy: 0.25 });
  t.equal(r.at, 60_000);
  t.equal(run(new WorkerScaling(rule, 0), [0, 1], () => 0.25, 0, 200_000).step, null, '0.5 for one: kept');
  t.equal(run(new WorkerScaling(rule, 0), [0], () => 0, 0, 200_000).step, null, 'never below min');
});

t.test('no change within a window of the last; a silent worker is busy', async (t) => {
  const s = new WorkerScaling(rule, 0);
  s.changed(10_000);
  t.same(run(s, [0], () => 1, 10_000, 30_000).at, 15_000, 'the grow window counts from the change');
  const quiet = new WorkerScaling({ ...rule, max: 3 }, 0);
  for (let at = 1000; at <= 10_000; at += 1000) quiet.report(0, 1, at);
  t.same(quiet.decide([0, 1], 10_000), { step: 'grow', busy: 1 }, 'worker 1 sent nothing: its loop is blocked');
  const idle = new WorkerScaling(rule, 0);
  for (let at = 1000; at <= 60_000; at += 1000) idle.report(0, 0, at);
  t.equal(idle.decide([0, 1], 60_000), null, 'and one fewer is never judged without its reports');
  const gone = new WorkerScaling({ ...rule, max: 3 }, 0);
  for (let at = 1000; at <= 10_000; at += 1000) {
    gone.report(0, 0.9, at);
    gone.report(1, 0.9, at);
  }
  gone.changed(10_000, 1);
  for (let at = 11_000; at <= 15_000; at += 1000) gone.report(0, 0.9, at);
  t.same(gone.decide([0], 15_000), { step: 'grow', busy: 0.9 }, "a retired worker's reports are forgotten");
});

t.test('SLUICE_WORKERS takes auto or a count; the scaling settings are checked', async (t) => {
  t.equal(CLI_SETTINGS.workers.read({ SLUICE_WORKERS: 'auto' }), 'auto');
  t.equal(CLI_SETTINGS.workers.read({ SLUICE_WORKERS: '3' }), 3);
  t.equal(CLI_SETTINGS.workers.read({}), null);
  t.throws(() => CLI_SETTINGS.workers.read({ SLUICE_WORKERS: 'many' }), ConfigError);
  t.throws(() => CLI_SETTINGS.workers.read({ SLUICE_WORKERS: '0' }), ConfigError);
  t.same(CLI_SETTINGS.workerScaling.read({}), {
    max: null,
    growBusy: 0.6,
    shrinkBusy: 0.4,
    growAfterMs: 5000,
    shrinkAfterMs: 60_000,
  });
  t.equal(CLI_SETTINGS.workerScaling.read({ SLUICE_WORKERS_MAX: '4' }).max, 4);
  t.throws(() => CLI_SETTINGS.workerScaling.read({ SLUICE_WORKERS_GROW_BUSY: '1.5' }), /SLUICE_WORKERS_GROW_BUSY/);
  t.throws(
    () => CLI_SETTINGS.workerScaling.read({ SLUICE_WORKERS_SHRINK_AFTER_MS: '10' }),
    /SLUICE_WORKERS_SHRINK_AFTER_MS/,
  );
});
