/**
 * The child processes of a bench: `sluice kafka`, `sluice start`, `sluice dispatcher`, the bench's
 * own helpers (receiver, load generator). Each one's stdout and stderr go to <work>/<name>.log;
 * stopAll() stops them in stages (helpers, then Sluice, then Kafka).
 */
import { shebangNodeFlags } from '../cli/heap.ts';
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The order of shutdown, first to last. */
export type Stage = 'helper' | 'sluice' | 'kafka';
const STAGES: Stage[] = ['helper', 'sluice', 'kafka'];

export interface Launched {
  proc: ChildProcess;
  log: string;
  /** Resolves with the exit code (or the signal's name) once the process is gone. */
  exited: Promise<number | string>;
}

export class Children {
  private readonly list: { proc: ChildProcess; stage: Stage }[] = [];
  private readonly used = new Map<string, number>();

  constructor(
    /** Where the logs go. */
    private readonly work: string,
    /** The Sluice checkout: cwd of every child (of the Sluice processes: `sluiceRoot`, another checkout). */
    private readonly root: string,
    private readonly sluiceRoot = root,
  ) {}

  /**
   * `node [its #! flags] [nodeArgs] <script> …args` (a JavaScript entry point such as bin/sluice.js):
   * run as the executable would run itself, so a bench's `sluice` is an operator's.
   */
  spawn(
    name: string,
    script: string,
    args: string[],
    env: NodeJS.ProcessEnv,
    stage: Stage,
    nodeArgs: string[] = [],
  ): Launched {
    const log = this.logFile(name);
    const out = createWriteStream(log);
    const proc = spawn(process.execPath, [...shebangNodeFlags(script), ...nodeArgs, script, ...args], {
      cwd: stage === 'sluice' ? this.sluiceRoot : this.root,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    proc.stdout!.pipe(out);
    proc.stderr!.pipe(out);
    return this.track(proc, stage, log);
  }

  /** A TypeScript helper through bin/run-ts.js, with an IPC channel. */
  forkTs(name: string, script: string, args: string[] = []): Launched {
    const log = this.logFile(name);
    const out = createWriteStream(log);
    const proc = fork(join(this.root, 'bin/run-ts.js'), [script, ...args], {
      cwd: this.root,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    proc.stdout!.pipe(out);
    proc.stderr!.pipe(out);
    return this.track(proc, 'helper', log);
  }

  private logFile(name: string): string {
    const n = (this.used.get(name) ?? 0) + 1;
    this.used.set(name, n);
    return join(this.work, n === 1 ? `${name}.log` : `${name}-${n}.log`);
  }

  private track(proc: ChildProcess, stage: Stage, log: string): Launched {
    this.list.push({ proc, stage });
    const exited = new Promise<number | string>((resolve) =>
      proc.once('exit', (code, signal) => resolve(signal ?? code ?? -1)),
    );
    return { proc, log, exited };
  }

  /** Stops the children of `stages`, stage by stage (all of them by default). */
  async stopAll(stages = STAGES): Promise<void> {
    for (const stage of stages) await Promise.all(this.list.filter((c) => c.stage === stage).map((c) => stop(c.proc)));
  }
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
export async function stop(proc: ChildProcess, graceMs = 20_000): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  proc.kill('SIGTERM');
  const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** The last lines of a child's log, for error messages. */
export function tail(log: string, lines = 15): string {
  if (!existsSync(log)) return '(no log)';
  return readFileSync(log, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
}

/** Resolves once the child prints a line matching `re`. */
export function waitForLine(
  c: Pick<Launched, 'proc' | 'log'>,
  re: RegExp,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const { proc, log } = c;
  return new Promise((resolve, reject) => {
    let partial = '';
    const finish = (err?: Error) => {
      clearTimeout(timer);
      proc.stdout!.off('data', onData);
      proc.off('exit', onExit);
      if (err) reject(err);
      else resolve();
    };
    const onData = (chunk: Buffer) => {
      const lines = (partial + chunk.toString('utf8')).split('\n');
      partial = lines.pop()!;
      if (lines.some((l) => re.test(l))) finish();
    };
    const onExit = (code: number | null) =>
      finish(new Error(`${what} exited (${code}) before it was ready:\n${tail(log)}`));
    const timer = setTimeout(
      () => finish(new Error(`${what} not ready within ${timeoutMs / 1000} s:\n${tail(log)}`)),
      timeoutMs,
    );
    proc.stdout!.on('data', onData);
    proc.once('exit', onExit);
  });
}
