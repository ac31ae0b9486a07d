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
  // Each child says when its setup is done (idle) or its 40 timers of 10 ms have run (ticker), so
  // a slow start on a busy machine is not counted, and the window waits for the work, not a clock.
  const child = (code: string) => {
    const c = spawn(process.execPath, ['-e', `${code}; setTimeout(() => {}, 60_000);`], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    t.teardown(() => c.kill());
    return {
      pid: c.pid!,
      said: (word: string) =>
        new Promise<void>((r) => c.stdout.on('data', (d: Buffer) => String(d).includes(word) && r())),
    };
  };
  const groups = new Map<string, number[]>();
  const sampler = new ProcSampler(() => groups);
  t.teardown(() => sampler.stop());

  const idle = child("process.stdout.write('ready')");
  await idle.said('ready');
  groups.set('idle', [idle.pid]);
  const quiet = sampler.begin();
  await new Promise((r) => setTimeout(r, 200));
  const idleWakeups = sampler.end(quiet).get('idle')!.wakeups;
  t.ok(idleWakeups <= 3, `an idle process barely wakes (${idleWakeups})`);

  const TICKER =
    "let n = 0; const tick = () => { if (++n < 40) setTimeout(tick, 10); else process.stdout.write('done'); };";
  const ticker = child(`${TICKER} process.stdout.write('ready'); setTimeout(tick, 100)`);
  await ticker.said('ready');
  groups.set('ticker', [ticker.pid]);
  const window = sampler.begin();
  await ticker.said('done');
  const tickerWakeups = sampler.end(window).get('ticker')!.wakeups;
  t.ok(tickerWakeups >= 30, `a process with 40 timers of 10 ms one after another woke ${tickerWakeups} times`);
});
