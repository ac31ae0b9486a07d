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
