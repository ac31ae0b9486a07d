/**
 * The child processes of the benches (bench/state.ts, bench/dispatch.ts): `sluice kafka`, `sluice start`, the
 * `sluice admin` CLI and the webhook receiver of the dispatch bench. Each one's stdout and stderr
 * go to <work>/<name>.log; stopAll() stops them in stages (helpers, then Sluice, then Kafka).
 * The work directory itself is a Scratch: whatever way a run ends, the data it wrote goes with it.
 */
import { createKafka } from '../core/kafka/client.ts';
import { execFile, fork, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { createWriteStream, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { freePorts } from '../scripts/free-port.ts';
import { join } from 'node:path';

/**
 * A bench run's work directory in the system's temp directory: logs at its top, and the bulky data
 * (a Kafka log directory is up to a few hundred MB a run, the view stores as much again) in
 * sub-directories named by kafkaDir() and dataDir(). When the process exits, however it exits
 * (done, failed, a SIGINT or SIGTERM handler that calls process.exit, an uncaught error), the
 * directory is removed; with `keepLogs` set (a failed run), only the data goes and the logs stay.
 * A process that installs no signal handler of its own gets one from onSignal().
 */
export class Scratch {
  readonly path: string;
  /** Set it to keep the logs of a run (a failure, --keep-logs); the data is removed anyway. */
  keepLogs = false;
  private readonly kafkaDirs = new Set<string>();
  private readonly dataDirs = new Set<string>();

  constructor(name: string) {
    this.path = mkdtempSync(join(tmpdir(), `sluice-${name}-`));
    process.once('exit', () => this.remove());
  }

  /** For `sluice kafka --data-dir` or startLocalKafka's dataDir: its log segments are data, its logs/ are logs. */
  kafkaDir(name = 'kafka'): string {
    const dir = join(this.path, name);
    this.kafkaDirs.add(dir);
    return dir;
  }

  /** For SLUICE_DATA_DIR (the view stores): all data. */
  dataDir(name = 'state'): string {
    const dir = join(this.path, name);
    this.dataDirs.add(dir);
    return dir;
  }

  /** Removes the data now (and the logs, unless keepLogs); called on exit, safe to call twice. */
  remove(): void {
    if (!this.keepLogs) {
      rmSync(this.path, { recursive: true, force: true });
      return;
    }
    for (const dir of this.dataDirs) rmSync(dir, { recursive: true, force: true });
    // One broker keeps its segments in <dir>/kraft; a cluster, in <dir>/node-<i>/kraft.
    for (const dir of this.kafkaDirs) {
      const nodes = existsSync(dir) ? readdirSync(dir).filter((n) => /^node-\d+$/.test(n)) : [];
      for (const sub of ['.', ...nodes]) rmSync(join(dir, sub, 'kraft'), { recursive: true, force: true });
    }
    if (existsSync(this.path)) process.stderr.write(`logs kept in ${this.path}\n`);
  }

  /**
   * For a run without signal handlers of its own: on SIGINT or SIGTERM, `stop` (its children,
   * its broker), then exit 130 or 143, which removes the directory.
   */
  onSignal(stop: () => Promise<unknown>): void {
    for (const [signal, code] of [
      ['SIGINT', 130],
      ['SIGTERM', 143],
    ] as const) {
      process.once(signal, () => {
        process.stderr.write(`${signal}: stopping\n`);
        const exit = () => process.exit(code);
        stop().then(exit, exit);
      });
    }
  }
}

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
    /** The Sluice checkout: cwd of every child. */
    private readonly root: string,
  ) {}

  /** `node [nodeArgs] <script> …args` (a JavaScript entry point such as bin/sluice.js). */
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
    const proc = spawn(process.execPath, [...nodeArgs, script, ...args], {
      cwd: this.root,
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

  async stopAll(): Promise<void> {
    for (const stage of STAGES) await Promise.all(this.list.filter((c) => c.stage === stage).map((c) => stop(c.proc)));
  }
}

/** The broker a bench runs against: KAFKA_BROKERS when set, else a `sluice kafka` it starts. */
export interface BenchKafka {
  brokers: string[];
  /** True for KAFKA_BROKERS (the bench drops its topics at the end). */
  external: boolean;
  /** The started `sluice kafka`, or null for an external broker. */
  launched: Launched | null;
}

/** KAFKA_BROKERS, or a fresh single broker in the scratch directory (`sluice kafka`, stage 'kafka'). */
export async function benchKafka(
  children: Children,
  scratch: Scratch,
  sluice: string,
  say: (line: string) => void,
): Promise<BenchKafka> {
  if (process.env.KAFKA_BROKERS)
    return { brokers: process.env.KAFKA_BROKERS.split(','), external: true, launched: null };
  const port = await freePorts(2); // the broker's port and its controller's, port + 1
  say(`starting Kafka on 127.0.0.1:${port} (sluice kafka)...`);
  const launched = children.spawn(
    'kafka',
    sluice,
    ['kafka', '--port', String(port), '--data-dir', scratch.kafkaDir(), '--fresh'],
    process.env,
    'kafka',
  );
  await waitForLine(launched, /Kafka broker ready/, 240_000, 'sluice kafka');
  return { brokers: [`127.0.0.1:${port}`], external: false, launched };
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

/** A bench's topics and groups on a broker it did not start (a local one goes with its data dir). */
export async function dropBenchTopics(brokers: string[], prefix: string): Promise<void> {
  const admin = createKafka(brokers, 'sluice-bench-cleanup').admin();
  try {
    await admin.connect();
    const topics = (await admin.listTopics()).filter((t) => t.startsWith(`${prefix}.`));
    if (topics.length > 0) await admin.deleteTopics({ topics });
    const groups = (await admin.listGroups()).groups
      .map((g) => g.groupId)
      .filter((g) => g.startsWith(`${prefix}.`) || g.startsWith(`${prefix}-`));
    if (groups.length > 0) await admin.deleteGroups(groups);
  } catch (err) {
    process.stderr.write(`note: could not delete the bench topics ${prefix}.*: ${(err as Error).message}\n`);
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

/**
 * Waits until the dispatcher's consumer groups of `prefix` (`names`, after the prefix; by default
 * the fan-out's and the delivery consumers') are Stable with at least `members` members (3 polls
 * in a row, 90 s at most): a process joining later would rebalance them mid-run.
 */
export async function settleGroups(
  brokers: string[],
  prefix: string,
  members: number,
  names: string[] = ['fan-out', 'dispatch', 'dispatch-rungs'],
): Promise<boolean> {
  const admin = createKafka(brokers, 'sluice-bench-groups').admin();
  await admin.connect();
  try {
    const ids = names.map((g) => `${prefix}.${g}`);
    for (let stablePolls = 0, deadline = Date.now() + 90_000; Date.now() < deadline; await sleep(500)) {
      const { groups } = await admin.describeGroups(ids);
      stablePolls = groups.every((g) => g.state === 'Stable' && g.members.length >= members) ? stablePolls + 1 : 0;
      if (stablePolls >= 3) return true;
    }
    return false;
  } finally {
    await admin.disconnect();
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface BenchClient {
  client_id: string;
  client_secret: string;
}

/** An admin client of `tenant`, made with `sluice admin create-client --json` (`sluice`: bin/sluice.js). */
export async function adminClient(
  sluice: string,
  cwd: string,
  env: NodeJS.ProcessEnv,
  tenant: string,
): Promise<BenchClient> {
  const out = await promisify(execFile)(
    process.execPath,
    [sluice, 'admin', 'create-client', '--tenant', tenant, '--role', 'admin', '--json'],
    { cwd, env },
  );
  return JSON.parse(out.stdout.split('\n').find((l) => l.startsWith('{'))!);
}

/** An access token of `c` from `base`, retried for 10 s (the ingress may not have read the client yet). */
export async function bearerToken(base: string, c: BenchClient): Promise<string> {
  for (let i = 0; ; i++) {
    const res = await fetch(`${base}/v1/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials', ...c }),
    });
    if (res.status === 200) return ((await res.json()) as { access_token: string }).access_token;
    if (i >= 40) throw new Error(`POST /v1/auth/token answered ${res.status}: ${await res.text()}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
