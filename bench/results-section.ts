/**
 * One marked section of bench/RESULTS.md, between `<!-- <name>:begin -->` and `<!-- <name>:end -->`:
 * replaced in place, else added (at the end, or before the first "## " heading); the rest of the
 * file is left alone. The state bench and the suite write theirs with it; the dispatch bench keeps
 * labelled blocks inside its own markers (bench/dispatch/results.ts).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, release, totalmem, type } from 'node:os';
import { isAbsolute, relative } from 'node:path';

export function writeMarkedSection(
  file: string,
  name: string,
  body: string,
  where: 'end' | 'after-intro' = 'end',
): void {
  const begin = `<!-- ${name}:begin -->`;
  const end = `<!-- ${name}:end -->`;
  let text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmark results\n';
  const block = `${begin}\n${body.trim()}\n${end}`;
  const start = text.indexOf(begin);
  const stop = text.indexOf(end);
  const intro = where === 'after-intro' ? text.indexOf('\n## ') : -1;
  if (start >= 0 && stop > start) text = text.slice(0, start) + block + text.slice(stop + end.length);
  else if (intro >= 0) text = `${text.slice(0, intro + 1)}${block}\n\n${text.slice(intro + 1)}`;
  else text = `${text.trimEnd()}\n\n${block}\n`;
  writeFileSync(file, text);
}

/**
 * The command that ran a bench, for its section: `npm run <script> -- <args>`, with the brokers
 * when Kafka was the caller's. A path argument names no place of this machine: one inside this
 * checkout is relative to it, any other is `<path>` (a baseline worktree, a results file in /tmp).
 */
export function benchCommand(script: string, root: string, externalBrokers: string[] | null): string {
  const args = process.argv.slice(2).map((arg) => portableArg(arg, root));
  const kafka = externalBrokers ? `KAFKA_BROKERS=${externalBrokers.join(',')} ` : '';
  return `${kafka}npm run ${script}${args.length ? ` -- ${args.join(' ')}` : ''}`;
}

function portableArg(arg: string, root: string): string {
  const eq = arg.startsWith('--') ? arg.indexOf('=') : -1;
  const value = eq >= 0 ? arg.slice(eq + 1) : arg;
  if (!isAbsolute(value)) return arg;
  const inside = relative(root, value);
  const portable = inside.startsWith('..') || isAbsolute(inside) ? '<path>' : inside || '.';
  return eq >= 0 ? `${arg.slice(0, eq + 1)}${portable}` : portable;
}

/**
 * The commit a bench measured, for its section: the short hash of `dir`'s HEAD, with "+ changes"
 * when its tracked files differ from it (RESULTS.md aside, which the bench itself writes).
 */
export function measuredCommit(dir: string): string {
  const git = (...args: string[]) =>
    execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  try {
    const head = git('rev-parse', '--short', 'HEAD');
    const changed = git('status', '--porcelain', '--untracked-files=no')
      .split('\n')
      .filter((l) => l.trim() !== '' && !l.endsWith('bench/RESULTS.md'));
    return changed.length > 0 ? `${head} + changes` : head;
  } catch {
    return 'unknown (not a git checkout)';
  }
}

/** The machine a bench ran on, for its section: cores and model, memory, kernel, Node. */
export function machineLine(): string {
  const gib = (totalmem() / 2 ** 30).toFixed(1);
  const cpu = cpus()[0]?.model.trim() ?? 'unknown CPU';
  return `${cpus().length} × ${cpu}, ${gib} GiB, ${type()} ${release()}, Node ${process.version}`;
}
