/**
 * `npm start` and the `sluice` command (bin/sluice.js) run the compiled server (`npm run
 * build:server` into build/): no TypeScript loader in any process. Here `sluice ingress` starts
 * against the test broker and serves what it reads from the project's files (the console, the
 * contract), which it finds from build/ as the sources do from core/ (core/paths.ts). A build
 * older than its sources is never run: bin/sluice.js says so and runs the sources.
 */
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../core/net/free-port.ts';
import { brokers, uniquePrefix } from '../helpers/sluice.ts';
import { PROJECT_ROOT } from '../../core/paths.ts';

const root = PROJECT_ROOT;
const bin = join(root, 'bin/sluice.js');

/** The commands of a process's children, from /proc. */
function childrenOf(pid: number): string[] {
  const out: string[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(comm);
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

t.test('the compiled server starts and serves the console and the contract', async (t) => {
  // npm test builds it first; a run of this file alone builds it here.
  if (!existsSync(join(root, 'build/.built'))) {
    const build = spawnSync('npm', ['run', '--silent', 'build:server'], { cwd: root, stdio: 'inherit' });
    t.equal(build.status, 0, 'npm run build:server compiled the server');
  }
  const [port, adminPort] = [await freePort(), await freePort()];
  const dataDir = mkdtempSync(join(tmpdir(), 'sluice-compiled-'));
  const child = spawn(process.execPath, [bin, 'ingress'], {
    cwd: root,
    env: {
      ...process.env,
      NODE_OPTIONS: '',
      KAFKA_BROKERS: brokers().join(','),
      SLUICE_TOPIC_PREFIX: uniquePrefix('compiled'),
      SLUICE_DATA_DIR: dataDir,
      SLUICE_PORT: String(port),
      SLUICE_ADMIN_PORT: String(adminPort),
      SLUICE_LOG_LEVEL: 'error',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  t.teardown(async () => {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
    rmSync(dataDir, { recursive: true, force: true });
  });

  const deadline = Date.now() + 120_000;
  let ready = 0;
  while (Date.now() < deadline && child.exitCode === null) {
    ready = await fetch(`http://127.0.0.1:${adminPort}/readyz`).then(
      (r) => r.status,
      () => 0,
    );
    if (ready === 200) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  t.equal(ready, 200, `the compiled ingress is ready\n${ready === 200 ? '' : out.slice(-2000)}`);
  t.notMatch(out, /running the sources/, 'the build was current: bin/sluice.js ran build/cli/main.js');
  t.same(childrenOf(child.pid!), [], "no TypeScript loader's helper (tsx runs an esbuild service per process)");
  const console = await fetch(`http://127.0.0.1:${port}/console`);
  t.equal(console.status, 200, 'the console, from console/');
  t.match(await console.text(), /<html/i);
  const contract = await fetch(`http://127.0.0.1:${port}/v1/openapi.json`);
  t.equal(contract.status, 200, 'the contract, from contracts/openapi.yaml');
  t.match((await contract.json()) as object, { openapi: /^3\./ });
});

t.test('bin/sluice.js runs build/ while it is current, and the sources once one is newer', async (t) => {
  // A copy of the command beside a stand-in build and sources, each saying which one ran.
  const dir = mkdtempSync(join(tmpdir(), 'sluice-bin-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const sub of ['bin', 'build/cli', 'cli', 'core']) mkdirSync(join(dir, sub), { recursive: true });
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
  writeFileSync(join(dir, 'package.json'), '{"type":"module"}');
  writeFileSync(join(dir, 'bin/sluice.js'), readFileSync(bin));
  writeFileSync(join(dir, 'build/cli/main.js'), "console.log('compiled');");
  writeFileSync(join(dir, 'cli/main.ts'), "const from: string = 'sources';\nconsole.log(from);");
  writeFileSync(join(dir, 'core/a.ts'), 'export const a = 1;');
  const run = () => spawnSync(process.execPath, [join(dir, 'bin/sluice.js')], { encoding: 'utf8' });
  const past = new Date(Date.now() - 60_000);
  for (const f of ['cli/main.ts', 'core/a.ts']) utimesSync(join(dir, f), past, past);

  t.match(run(), { status: 0, stdout: 'sources\n' }, 'no build/.built: the sources run');
  writeFileSync(join(dir, 'build/.built'), '');
  t.match(run(), { status: 0, stdout: 'compiled\n', stderr: '' }, 'a current build runs, quietly');
  utimesSync(join(dir, 'core/a.ts'), new Date(), new Date(Date.now() + 1000));
  const stale = run();
  t.match(stale, { status: 0, stdout: 'sources\n' }, 'an edit since the build: the sources run');
  t.match(stale.stderr, /older than core\/a\.ts/, 'and it names the newer source');
});
