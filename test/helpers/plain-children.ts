import { ownAndReapedCpuSec } from '../../harness/proc-cpu.ts';
/**
 * Loaded into every test file's process (.taprc node-arg): the processes a test starts run as an
 * operator's would. tap's @tapjs/processinfo puts its module hooks into every child process (a
 * loader thread and a message per module loaded, source maps on, ~0.25 CPU-s more per start) through
 * NODE_OPTIONS and a hook on spawn; with coverage off nothing reads what it records, and a Sluice
 * process under test should not carry it.
 */
const SPAWN_HOOKS = Symbol.for('process-on-spawn@*:singletonId');
const hooks = (globalThis as unknown as Record<symbol, { listeners: unknown[] } | undefined>)[SPAWN_HOOKS];
if (hooks) hooks.listeners.length = 0;

const options = process.env.NODE_OPTIONS;
if (options !== undefined) {
  const kept = options
    .split(/\s+/)
    .filter((o) => o !== '' && !/@tapjs[\\/]processinfo/.test(o))
    .join(' ');
  if (kept === '') delete process.env.NODE_OPTIONS;
  else process.env.NODE_OPTIONS = kept;
}

/**
 * The CPU this file cost, its own and that of the processes it started and saw exit (Sluice
 * nodes, brokers, receivers), from /proc at exit: the test runner shows it beside the file's time.
 */
process.once('exit', () => {
  const cpu = ownAndReapedCpuSec(process.pid);
  if (cpu) process.stdout.write(`# cpu: ${cpu.own.toFixed(1)} s, its children ${cpu.reaped.toFixed(1)} s\n`);
});
