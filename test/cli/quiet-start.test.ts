/**
 * A clean first start says nothing at error level (issue 34 item 5): `sluice start` with no
 * KAFKA_BROKERS starts its own Kafka on an empty log directory, as `npm start` does on a fresh
 * machine, creates its topics and joins its groups while the broker's group coordinators are
 * still loading. Those expected conditions are retried quietly (info); the run must print no
 * error or fatal line from its start until it is stopped.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../core/config.ts';
import { freePort, freePorts } from '../../core/net/free-port.ts';
import { SLUICE_BIN } from '../../harness/sluice-cli.ts';

t.test('a first start on a fresh local Kafka logs nothing at error level', async (t) => {
  const work = mkdtempSync(join(tmpdir(), 'sluice-quiet-start-'));
  // The local broker keeps its log directory under the cache: <cache>/kafka-data-<port>, new for a new port.
  const kafkaPort = await freePorts(2);
  const [port, adminPort] = [await freePort(), await freePort()];
  const cacheData = join(loadConfig({}).cacheDir, `kafka-data-${kafkaPort}`);
  t.teardown(() => {
    rmSync(work, { recursive: true, force: true });
    rmSync(cacheData, { recursive: true, force: true });
  });
  const child = spawn(process.execPath, [SLUICE_BIN, 'start'], {
    env: {
      ...process.env,
      KAFKA_BROKERS: undefined,
      SLUICE_KAFKA_PORT: String(kafkaPort),
      SLUICE_PORT: String(port),
      SLUICE_ADMIN_PORT: String(adminPort),
      SLUICE_DATA_DIR: join(work, 'data'),
      SLUICE_LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  let partial = '';
  const take = (d: Buffer) => {
    const text = partial + d.toString();
    const parts = text.split('\n');
    partial = parts.pop() ?? '';
    lines.push(...parts);
  };
  child.stdout!.on('data', take);
  child.stderr!.on('data', take);
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });

  // Ready: the admin port answers /readyz 200 (every worker caught up and listening).
  const deadline = Date.now() + 180_000;
  let ready = false;
  while (!ready && Date.now() < deadline && child.exitCode === null) {
    ready = await fetch(`http://127.0.0.1:${adminPort}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (!ready) await new Promise((r) => setTimeout(r, 250));
  }
  t.ok(ready, `sluice start became ready on a fresh local Kafka\n${ready ? '' : lines.slice(-20).join('\n')}`);
  // The first fetches, and the joins of a worker added as the start's load asks, come just after.
  await new Promise((r) => setTimeout(r, 8000));
  child.kill('SIGTERM');
  t.equal(await exited, 0, 'it stops cleanly on SIGTERM');
  if (partial) lines.push(partial);

  const levels = new Map<string, number>();
  const loud: string[] = [];
  const warned: string[] = [];
  for (const line of lines) {
    if (!line.startsWith('{')) continue;
    const level = (JSON.parse(line) as { level?: string }).level ?? '?';
    levels.set(level, (levels.get(level) ?? 0) + 1);
    if (level === 'error' || level === 'fatal') loud.push(line);
    if (level === 'warn') warned.push(line);
  }
  t.ok((levels.get('info') ?? 0) > 0, `the run logged (${JSON.stringify(Object.fromEntries(levels))})`);
  t.same(loud, [], 'no line at error or fatal level');
  const retried = lines.filter((l) => l.includes('transient error') && l.includes('"level":"info"')).length;
  t.comment(`expected start-up conditions retried quietly: ${retried} lines at info level`);
  for (const w of warned) t.comment(`warn: ${w}`);
});
