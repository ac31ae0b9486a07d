/**
 * One marked section of bench/RESULTS.md, between `<!-- <name>:begin -->` and `<!-- <name>:end -->`:
 * replaced in place, else added (at the end, or before the first "## " heading); the rest of the
 * file is left alone. The dispatch bench keeps labelled blocks inside its own markers.
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
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmark results\n';
  writeFileSync(file, placeSection(text, name, body, where === 'after-intro' ? text.indexOf('\n## ') + 1 : -1));
}

/** `text` with the block `name` replaced in place, else put at `at` (-1: at the end). */
function placeSection(text: string, name: string, body: string, at: number): string {
  const [begin, end] = [`<!-- ${name}:begin -->`, `<!-- ${name}:end -->`];
  const block = `${begin}\n${body.trim()}\n${end}`;
  const [start, stop] = [text.indexOf(begin), text.indexOf(end)];
  if (start >= 0 && stop > start) return text.slice(0, start) + block + text.slice(stop + end.length);
  if (at > 0) return `${text.slice(0, at)}${block}\n\n${text.slice(at)}`;
  return `${text.trimEnd()}\n\n${block}\n`;
}

/**
 * The dispatch bench's labelled run: `<!-- dispatch:<label>:begin/end -->` inside its own container
 * (`<!-- dispatch:begin/end -->`, made with its heading when missing), replaced in place, else added last.
 */
export function writeDispatchSection(file: string, label: string, body: string): void {
  let text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmark results\n';
  const [begin, end] = ['<!-- dispatch:begin -->', '<!-- dispatch:end -->'];
  const heading = '## Webhook dispatch, every piece its own OS process (`npm run bench:dispatch`)';
  if (!text.includes(begin) || !text.includes(end)) text = `${text.trimEnd()}\n\n${begin}\n${heading}\n\n${end}\n`;
  writeFileSync(file, placeSection(text, `dispatch:${label}`, body, text.indexOf(end)));
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
