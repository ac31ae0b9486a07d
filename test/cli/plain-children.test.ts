/**
 * A process a test starts carries none of tap's processinfo hooks (test/helpers/plain-children.ts):
 * neither through NODE_OPTIONS nor through the hook tap puts on spawn.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';

const probe = `process.stdout.write(JSON.stringify({
  hooked: process.execArgv.join(' ') + ' ' + (process.env.NODE_OPTIONS ?? ''),
}))`;

t.test('a child process of a test runs without @tapjs/processinfo', async (t) => {
  const run = spawnSync(process.execPath, ['-e', probe], { encoding: 'utf8' });
  t.equal(run.status, 0, run.stderr);
  const seen = JSON.parse(run.stdout) as { hooked: string };
  t.notMatch(seen.hooked, /processinfo/, 'no processinfo import in its flags or NODE_OPTIONS');
  t.notMatch(process.env.NODE_OPTIONS ?? '', /processinfo/, 'and none left for later spawns');
});
