/**
 * `npm test`: starts a real Kafka broker (unless KAFKA_BROKERS is set), runs tap with
 * KAFKA_BROKERS pointing at it, and stops the broker. Each test file uses its own topic prefix,
 * so one broker serves them all.
 */
import { spawn } from 'node:child_process';
import { freePorts } from './free-port.ts';
import { join } from 'node:path';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../core/config.ts';
import { startLocalKafka } from '../core/kafka/local-broker.ts';

const root = fileURLToPath(new URL('..', import.meta.url));

async function main(): Promise<number> {
  let brokers = process.env.KAFKA_BROKERS;
  let stop = async () => {};
  if (!brokers) {
    const config = loadConfig({ ...process.env, KAFKA_BROKERS: undefined });
    const port = await freePorts(2);
    const started = Date.now();
    const kafkaDir = join(config.cacheDir, `kafka-test-${port}`);
    const kafka = await startLocalKafka({
      cacheDir: config.cacheDir,
      port,
      dataDir: kafkaDir,
      fresh: true,
      log: (l) => console.log(`# ${l}`),
    });
    console.log(`# test Kafka broker ready at ${kafka.brokers.join(',')} in ${Date.now() - started} ms`);
    brokers = kafka.brokers.join(',');
    // The broker's log directory (up to a few hundred MB per run) goes with it.
    stop = async () => {
      await kafka.stop();
      rmSync(kafkaDir, { recursive: true, force: true });
    };
  }
  // The views' on-disk stores of every test node go to one directory removed after the run.
  const dataDir = mkdtempSync(join(tmpdir(), 'sluice-test-state-'));
  const tap = spawn(join(root, 'node_modules/.bin/tap'), process.argv.slice(2), {
    stdio: ['inherit', 'pipe', 'inherit'],
    env: { ...process.env, KAFKA_BROKERS: brokers, SLUICE_DATA_DIR: dataDir },
    cwd: root,
  });
  // Echo tap's output and keep its summary line ("# { total: 9, pass: 8, fail: 1 }").
  let tail = '';
  tap.stdout!.on('data', (chunk: Buffer) => {
    process.stdout.write(chunk);
    tail = (tail + chunk.toString()).slice(-4096);
  });
  const code = await new Promise<number>((resolve) => tap.once('close', (c, sig) => resolve(c ?? (sig ? 1 : 0))));
  await stop();
  rmSync(dataDir, { recursive: true, force: true });
  const summary = /# \{ total: (\d+)(?:, pass: (\d+))?(?:, fail: (\d+))?(?:, skip: (\d+))?/.exec(tail);
  if (summary) {
    const [, , pass = '0', fail = '0', skip] = summary;
    console.log(`${pass} passed, ${fail} failed${skip ? `, ${skip} skipped` : ''}`);
  }
  return code;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`npm test: ${(err as Error).message}`);
    process.exit(1);
  },
);
