/** A bench's recorded command names no path of the machine it ran on. */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { benchCommand, measuredCommit } from '../../harness/results-section.ts';
import { PROJECT_ROOT } from '../../core/paths.ts';

const ROOT = '/home/ci/sluice';

function commandFor(args: string[], brokers: string[] | null = null): string {
  const saved = process.argv;
  process.argv = ['node', 'bench.ts', ...args];
  try {
    return benchCommand('bench:state', ROOT, brokers);
  } finally {
    process.argv = saved;
  }
}

t.equal(commandFor([]), 'npm run bench:state', 'no arguments');
t.equal(
  commandFor(['--results', '/tmp/run-1.md', '--sluice-dir', '/srv/baseline', '--quick']),
  'npm run bench:state -- --results <path> --sluice-dir <path> --quick',
  'paths outside the checkout become <path>',
);
t.equal(
  commandFor(['--sluice-dir', ROOT, '--results=/home/ci/sluice/bench/out.md']),
  'npm run bench:state -- --sluice-dir . --results=bench/out.md',
  'paths inside the checkout are relative to it, in either option form',
);
t.equal(
  commandFor(['--only', 'f10-batch'], ['127.0.0.1:9092']),
  'KAFKA_BROKERS=127.0.0.1:9092 npm run bench:state -- --only f10-batch',
  "the caller's brokers",
);

t.test('no tracked file names where this checkout lives', async (t) => {
  const { execFileSync } = await import('node:child_process');
  const { readFileSync } = await import('node:fs');
  const root = PROJECT_ROOT;
  const files = execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' }).split('\0').filter(Boolean);
  const naming = files.filter((f) => {
    try {
      return readFileSync(`${root}/${f}`, 'utf8').includes(root);
    } catch {
      return false; // listed but removed in the working tree
    }
  });
  t.ok(files.length > 100, `${files.length} tracked files read`);
  t.same(naming, [], `no tracked file contains ${root}`);
});

t.test('a section names the commit it measured, and says when the checkout differs from it', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-measured-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  t.equal(measuredCommit(dir), 'unknown (not a git checkout)', 'no checkout');
  const git = (...args: string[]) =>
    execFileSync('git', ['-C', dir, '-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], {
      encoding: 'utf8',
    }).trim();
  git('init', '-q');
  mkdirSync(join(dir, 'bench'));
  writeFileSync(join(dir, 'code.ts'), 'one');
  writeFileSync(join(dir, 'bench/RESULTS.md'), 'results');
  git('add', '.');
  git('commit', '-q', '-m', 'first');
  const head = git('rev-parse', '--short', 'HEAD');
  t.equal(measuredCommit(dir), head, 'a clean checkout: its commit');
  writeFileSync(join(dir, 'bench/RESULTS.md'), 'results, rewritten by a bench');
  t.equal(measuredCommit(dir), head, 'RESULTS.md, which the bench writes, does not count');
  writeFileSync(join(dir, 'code.ts'), 'two');
  t.equal(measuredCommit(dir), `${head} + changes`, 'a changed file: said');
  t.end();
});
