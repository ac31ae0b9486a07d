/**
 * A node whose start fails (here: its admin port is taken) rejects with the reason and closes what
 * it had opened, so the process that tried can end on its own: before, its Kafka consumers and
 * timers held it up to the test runner's 5-minute limit.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../core/paths.ts';
import { brokers } from '../helpers/sluice.ts';

t.test('a node that cannot take its admin port rejects, and its process ends by itself', async (t) => {
  const helpers = join(PROJECT_ROOT, 'build/test/helpers/sluice.js');
  const script = `
    import { createServer } from 'node:net';
    const { startTestNode } = await import(${JSON.stringify(helpers)});
    const taken = createServer();
    await new Promise((r) => taken.listen(0, '127.0.0.1', r));
    const port = String(taken.address().port);
    try {
      await startTestNode({ SLUICE_ADMIN_PORT: port });
      console.log('started');
    } catch (err) {
      console.log('refused', err.code);
    }
    taken.close();`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    env: { ...process.env, KAFKA_BROKERS: brokers().join(','), NODE_OPTIONS: '' },
    encoding: 'utf8',
    timeout: 90_000,
  });
  t.equal(run.signal, null, `the process ended by itself, not at the 90 s limit\n${run.stderr.slice(-1500)}`);
  t.equal(run.status, 0);
  t.match(run.stdout, /refused LISTEN_FAILED/, 'the start rejected with the reason');
});
