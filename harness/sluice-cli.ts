/** Runs the real CLI (`node bin/sluice.js ...`) as a child process against a test node's Kafka and prefix. */
import { createWriteStream } from 'node:fs';
import { join } from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import type { Config } from '../core/config.ts';
import { shebangNodeFlags } from '../cli/heap.ts';
import { projectPath } from '../core/paths.ts';
import { runCommand } from '../core/run-command.ts';

export const SLUICE_BIN = projectPath('bin/sluice.js');
/** The Node flags the `sluice` executable runs with: server processes here run as an operator's would. */
const SERVER_FLAGS = shebangNodeFlags(SLUICE_BIN);

export function cliEnv(config: Readonly<Config>, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    KAFKA_BROKERS: config.kafkaBrokers!.join(','),
    SLUICE_TOPIC_PREFIX: config.topicPrefix,
    SLUICE_ISSUER: config.issuer,
    SLUICE_REGION: config.region,
    SLUICE_LOG_LEVEL: 'error',
    ...extra,
  };
}

export function runCli(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runCommand(process.execPath, [SLUICE_BIN, ...args], { env });
}

export interface IngressProcess {
  base: string;
  pid: number;
  admin: string;
  stop(): Promise<void>;
}

/** A separate `sluice ingress` OS process on the given env; resolves once its /readyz says ready. */
export async function spawnIngress(env: NodeJS.ProcessEnv, port: number, adminPort: number): Promise<IngressProcess> {
  const child = spawn(
    process.execPath,
    [...SERVER_FLAGS, SLUICE_BIN, 'ingress', '--port', String(port), '--admin-port', String(adminPort)],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  let exited = false;
  child.once('exit', () => (exited = true));
  const admin = `http://127.0.0.1:${adminPort}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (exited) throw new Error(`sluice ingress exited during start-up:\n${output}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`sluice ingress did not become ready:\n${output}`);
    }
    const ok = await fetch(`${admin}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    base: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    admin,
    stop: () =>
      new Promise<void>((resolve) => {
        if (exited) return resolve();
        const kill = setTimeout(() => child.kill('SIGKILL'), 10_000);
        child.once('exit', () => {
          clearTimeout(kill);
          resolve();
        });
        child.kill('SIGTERM');
      }),
  };
}

export interface DispatcherProcess {
  child: ChildProcess;
  /** Its admin /metrics URL (SLUICE_ADMIN_PORT 0: a free port it picked). */
  metrics: string;
  /** Everything it printed so far. */
  output(): string;
}

/**
 * A separate `sluice dispatcher` OS process on the test's Kafka and prefix; resolves once it runs.
 * `track` sees the child at once, so a test can kill it in its teardown even if start-up fails.
 */
export function spawnDispatcher(
  prefix: string,
  env: Record<string, string>,
  track: (child: ChildProcess) => void = () => {},
): Promise<DispatcherProcess> {
  const logDir = process.env.TEST_CHILD_LOG_DIR;
  const child = spawn(process.execPath, [...SERVER_FLAGS, SLUICE_BIN, 'dispatcher'], {
    env: {
      ...process.env,
      ...env,
      KAFKA_BROKERS: process.env.KAFKA_BROKERS,
      SLUICE_TOPIC_PREFIX: prefix,
      // TEST_CHILD_LOG_LEVEL=info (with TEST_CHILD_LOG_DIR) keeps a dispatcher's log for a failure's diagnosis.
      SLUICE_LOG_LEVEL: process.env.TEST_CHILD_LOG_LEVEL ?? 'error',
      SLUICE_HOST: '127.0.0.1',
      SLUICE_PORT: '0',
      SLUICE_ADMIN_PORT: '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  track(child);
  child.stderr?.pipe(
    logDir ? createWriteStream(join(logDir, `dispatcher-${prefix}-${child.pid}.log`)) : process.stderr,
  );
  // Its stderr is kept as well: a member that exits 1 says why there (cli/runtime.ts).
  let out = '';
  let err = '';
  child.stderr?.on('data', (d: Buffer) => {
    err = (err + d.toString()).slice(-8000);
  });
  return new Promise((resolve, reject) => {
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /dispatcher running \(admin: (\S+)\)/.exec(out);
      if (m) resolve({ child, metrics: m[1], output: () => (err ? `${out}\n[stderr]\n${err}` : out) });
    });
    child.once('exit', (code) => reject(new Error(`sluice dispatcher exited during start-up (${code}):\n${out}`)));
  });
}
