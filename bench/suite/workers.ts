/**
 * The baselines run on as many processes as Sluice (`--workers N`), so a ratio compares like with
 * like: node:cluster workers sharing one port. bin/run-ts.js drops the script from argv, so the
 * workers are told again which file to run.
 */
import cluster from 'node:cluster';
import { projectPath } from '../../core/paths.ts';

const RUN_TS = projectPath('bin/run-ts.js');

/** In the primary: forks `n` workers of `script` and prints `ready` once all listen. In a worker: runs `serve`. */
export async function onWorkers(n: number, script: string, serve: () => Promise<void>): Promise<void> {
  if (cluster.isWorker) {
    await serve();
    process.send?.('listening');
    return;
  }
  cluster.setupPrimary({ exec: RUN_TS, args: [script, ...process.argv.slice(2)] });
  let listening = 0;
  for (let i = 0; i < n; i++) {
    cluster.fork().on('message', (m) => {
      if (m === 'listening' && ++listening === n) process.stdout.write('ready\n');
    });
  }
  cluster.on('exit', (w, code) => {
    process.stderr.write(`worker ${w.process.pid} exited (${code})\n`);
    process.exit(1);
  });
  const stop = () => {
    cluster.removeAllListeners('exit');
    for (const w of Object.values(cluster.workers ?? {})) w?.kill();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
