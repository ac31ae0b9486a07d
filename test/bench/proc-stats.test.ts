import t from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { ProcSampler } from '../../harness/proc-cpu.ts';

// Burns 600 ms of CPU, stays alive 1.5 s more (samples are taken every 500 ms), then exits.
const BURN = `
const cpu = () => process.cpuUsage().user / 1000;
while (cpu() < 600) {}
setTimeout(() => process.exit(0), 1500);
`;

t.test('a process that exits inside a window counts the CPU it used there', async (t) => {
  const groups = new Map<string, number[]>();
  const sampler = new ProcSampler(() => groups);
  t.teardown(() => sampler.stop());
  const window = sampler.begin();
  const child = spawn(process.execPath, ['-e', BURN], { stdio: 'ignore' });
  groups.set('burner', [child.pid!]);
  await once(child, 'exit');
  const usage = sampler.end(window);
  const cpu = usage.get('burner')?.cpuSec ?? 0;
  t.ok(cpu >= 0.5, `the exited process's ${cpu.toFixed(2)} CPU-s counted (it burned at least 0.6)`);
});

t.test("a window counts the wake-ups of a process's main thread: one that sleeps often wakes often", async (t) => {
  // 40 timers of 10 ms one after another: ~40 waits of the main thread; an idle process: next to none.
  const TICKER =
    'let n = 0; const tick = () => { if (++n < 40) setTimeout(tick, 10); }; tick(); setTimeout(() => {}, 60_000);';
  const idle = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)'], { stdio: 'ignore' });
  t.teardown(() => idle.kill());
  await new Promise((r) => setTimeout(r, 300)); // started and settled
  const groups = new Map([['idle', [idle.pid!]]]);
  const sampler = new ProcSampler(() => groups);
  t.teardown(() => sampler.stop());
  const quiet = sampler.begin();
  await new Promise((r) => setTimeout(r, 200));
  const idleWakeups = sampler.end(quiet).get('idle')!.wakeups;
  t.ok(idleWakeups <= 3, `an idle process barely wakes (${idleWakeups})`);
  const busy = spawn(process.execPath, ['-e', TICKER], { stdio: 'ignore' });
  t.teardown(() => busy.kill());
  groups.set('busy', [busy.pid!]);
  const window = sampler.begin();
  await new Promise((r) => setTimeout(r, 1500));
  const busyWakeups = sampler.end(window).get('busy')!.wakeups;
  t.ok(busyWakeups >= 30, `a process with 40 timers of 10 ms woke ${busyWakeups} times`);
});
