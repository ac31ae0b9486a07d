import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, freePorts } from '../../core/net/free-port.ts';
import { runCli, SLUICE_BIN } from '../../harness/sluice-cli.ts';

const hold = (port: number) =>
  new Promise<Server>((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(port, '127.0.0.1', () => resolve(s));
  });
const dataDir = mkdtempSync(join(tmpdir(), 'sluice-kafka-ports-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const env = { ...process.env, KAFKA_BROKERS: undefined, SLUICE_LOG_LEVEL: 'error' };

t.test(
  'a busy controller port (--port + 1) is named in the error, with --controller-port as the way out',
  async (t) => {
    const port = await freePorts(2);
    const busy = await hold(port + 1);
    t.teardown(() => busy.close());
    const res = await runCli(['kafka', '--port', String(port), '--data-dir', join(dataDir, 'a')], env);
    t.not(res.code, 0, 'sluice kafka exits non-zero');
    t.match(
      res.stderr + res.stdout,
      new RegExp(`port ${port + 1}\\b.*controller 1's port \\(--controller-port, default --port \\+ 1\\)`),
      'the message names the busy port and what it was for',
    );
  },
);

t.test('a busy --controller-port is named too', async (t) => {
  const [port, controller] = [await freePort(), await freePort()];
  const busy = await hold(controller);
  t.teardown(() => busy.close());
  const res = await runCli(
    ['kafka', '--port', String(port), '--controller-port', String(controller), '--data-dir', join(dataDir, 'b')],
    env,
  );
  t.not(res.code, 0);
  t.match(res.stderr + res.stdout, new RegExp(`port ${controller}\\b.*controller 1's port \\(--controller-port\\)`));
});

t.test('with --controller-port the broker starts although --port + 1 is busy', async (t) => {
  const port = await freePorts(2);
  const controller = await freePort();
  const busy = await hold(port + 1);
  t.teardown(() => busy.close());
  const child = spawn(
    process.execPath,
    [
      SLUICE_BIN,
      'kafka',
      '--port',
      String(port),
      '--controller-port',
      String(controller),
      '--data-dir',
      join(dataDir, 'c'),
      '--fresh',
    ],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  const ready = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), 120_000);
    const onData = (d: Buffer) => {
      out += d;
      if (/ready at 127\.0\.0\.1:/.test(out)) {
        clearTimeout(timer);
        resolve(true);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(false);
    });
  });
  t.ok(ready, `the broker is ready on ${port}, its controller on ${controller}\n${ready ? '' : out}`);
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
});
