/** Runs the real CLI (`node bin/sluice.js ...`) as a child process against a test node's Kafka and prefix. */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Config } from '../../core/config.ts';

export const SLUICE_BIN = fileURLToPath(new URL('../../bin/sluice.js', import.meta.url));

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

export function runCli(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SLUICE_BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

export interface IngressProcess {
  base: string;
  admin: string;
  stop(): Promise<void>;
}

/** A separate `sluice ingress` OS process on the given env; resolves once its /readyz says ready. */
export async function spawnIngress(env: NodeJS.ProcessEnv, port: number, adminPort: number): Promise<IngressProcess> {
  const child = spawn(process.execPath, [SLUICE_BIN, 'ingress', '--port', String(port), '--admin-port', String(adminPort)], { env, stdio: ['ignore', 'pipe', 'pipe'] });
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
    const ok = await fetch(`${admin}/readyz`).then((r) => r.status === 200, () => false);
    if (ok) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    base: `http://127.0.0.1:${port}`,
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
