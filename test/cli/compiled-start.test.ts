/**
 * `npm start` runs the compiled server (`npm run build:server` into build/, then build/cli/main.js):
 * no TypeScript loader in any process. Here the compiled `sluice ingress` starts against the test
 * broker and serves what it reads from the project's files (the console, the contract), which it
 * finds from build/ as the sources do from core/ (core/paths.ts).
 */
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../scripts/free-port.ts';
import { brokers, uniquePrefix } from '../helpers/sluice.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const main = join(root, 'build/cli/main.js');

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
  if (!existsSync(main)) {
    const tsc = spawnSync(
      process.execPath,
      [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.server.json'],
      {
        cwd: root,
        stdio: 'inherit',
      },
    );
    t.equal(tsc.status, 0, 'npm run build:server compiled the server');
  }
  const [port, adminPort] = [await freePort(), await freePort()];
  const dataDir = mkdtempSync(join(tmpdir(), 'sluice-compiled-'));
  const child = spawn(process.execPath, [main, 'ingress'], {
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
  const cmdline = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0');
  t.same(cmdline.slice(0, 3), [process.execPath, main, 'ingress'], 'it runs build/cli/main.js itself');
  t.same(childrenOf(child.pid!), [], "no TypeScript loader's helper (tsx runs an esbuild service per process)");
  const console = await fetch(`http://127.0.0.1:${port}/console`);
  t.equal(console.status, 200, 'the console, from console/');
  t.match(await console.text(), /<html/i);
  const contract = await fetch(`http://127.0.0.1:${port}/v1/openapi.json`);
  t.equal(contract.status, 200, 'the contract, from contracts/openapi.yaml');
  t.match((await contract.json()) as object, { openapi: /^3\./ });
});
