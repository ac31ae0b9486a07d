/**
 * A process loads what its work needs: a CLI command's module only when it runs, and CEL only when
 * a filter is compiled. Read from Node's own loader (NODE_DEBUG=esm,module names every module it
 * loads), in processes started on the compiled tree.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../core/paths.ts';

const build = (path: string) => join(PROJECT_ROOT, 'build', path);

/** What Node's loader said it loaded while `node args` ran (its stderr under NODE_DEBUG). */
function loaded(args: string[]): string {
  const run = spawnSync(process.execPath, args, {
    cwd: PROJECT_ROOT,
    env: { ...process.env, NODE_DEBUG: 'esm,module', NODE_OPTIONS: '' },
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (run.status !== 0) throw new Error(`node ${args.join(' ')} exited ${run.status}: ${run.stderr.slice(-2000)}`);
  return run.stderr;
}

t.test('`sluice kafka` and `sluice start` load none of the app until they run a node', async (t) => {
  for (const command of ['kafka', 'start']) {
    const log = loaded([build('cli/main.js'), command, '--help']);
    t.match(log, `build/cli/commands/${command}.js`, `${command}: its own module is loaded`);
    for (const heavy of ['kafkajs', 'build/cli/assemble.js', 'uws', '@bufbuild/cel', 'build/cli/commands/admin.js'])
      t.notOk(log.includes(heavy), `${command}: ${heavy} is not loaded`);
  }
});

t.test('the app loads CEL only when a filter is compiled', async (t) => {
  const importApp = `await import(${JSON.stringify(build('cli/assemble.js'))});`;
  const compile = `const f = await import(${JSON.stringify(build('core/webhooks/filters/endpoint-filter.js'))});
    f.compileFilter('data.total > 1');`;
  const idle = loaded(['--input-type=module', '-e', importApp]);
  t.match(idle, 'build/cli/assemble.js', 'the app is loaded');
  t.notOk(idle.includes('@bufbuild/cel'), 'without a filter, no CEL');
  const filtering = loaded(['--input-type=module', '-e', `${importApp}\n${compile}`]);
  t.ok(filtering.includes('@bufbuild/cel'), 'a compiled filter loads it');
});
