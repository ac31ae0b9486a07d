/**
 * `npm test`: starts a real Kafka broker (unless KAFKA_BROKERS is set), runs tap with
 * KAFKA_BROKERS pointing at it, and stops the broker. Each test file uses its own topic prefix,
 * so one broker serves them all.
 */
import { spawn } from 'node:child_process';
import { freePorts } from './free-port.ts';
import { join } from 'node:path';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
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
  const env = { ...process.env, KAFKA_BROKERS: brokers, SLUICE_DATA_DIR: dataDir };
  const args = process.argv.slice(2);
  // The fault tests start Kafka clusters of their own and kill brokers under load: two of them side
  // by side on a 2-core machine starve each other's recovery, so they run one at a time, after the rest.
  const files = args.length > 0 ? [] : testFiles();
  const runs = args.length > 0 ? [args] : [files.filter((f) => !isFault(f)), ['--jobs', '1', ...files.filter(isFault)]];
  let code = 0;
  const totals = { pass: 0, fail: 0, skip: 0 };
  for (const run of runs) {
    const r = await runTap(run, env);
    code ||= r.code;
    totals.pass += r.pass;
    totals.fail += r.fail;
    totals.skip += r.skip;
  }
  await stop();
  rmSync(dataDir, { recursive: true, force: true });
  console.log(`${totals.pass} passed, ${totals.fail} failed${totals.skip ? `, ${totals.skip} skipped` : ''}`);
  return code;
}

const isFault = (file: string) => file.startsWith('test/faults/');

/** Every test file, as tap's `include` would find them. */
function testFiles(): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(`${dir}/${e.name}`) : e.name.endsWith('.test.ts') ? [`${dir}/${e.name}`] : [],
    );
  return walk('test').sort();
}

/** One tap run: its exit code and the counts from its closing summary line. */
async function runTap(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number; pass: number; fail: number; skip: number }> {
  const tap = spawn(join(root, 'node_modules/.bin/tap'), args, {
    stdio: ['inherit', 'pipe', 'inherit'],
    env,
    cwd: root,
  });
  let tail = '';
  tap.stdout!.on('data', (chunk: Buffer) => {
    process.stdout.write(chunk);
    tail = (tail + chunk.toString()).slice(-4096);
  });
  const code = await new Promise<number>((resolve) => tap.once('close', (c, sig) => resolve(c ?? (sig ? 1 : 0))));
  const summary = /# \{ total: (\d+)(?:, pass: (\d+))?(?:, fail: (\d+))?(?:, skip: (\d+))?/.exec(tail);
  const n = (i: number) => Number(summary?.[i] ?? 0);
  return { code, pass: n(2), fail: summary ? n(3) : 1, skip: n(4) };
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`npm test: ${(err as Error).message}`);
    process.exit(1);
  },
);
