/**
 * Tracing overhead: runs the edge and dispatch benchmarks three times each, with tracing off,
 * on at 1 % sampling and on at 100 %, exporting over OTLP/HTTP to a sink in this process that
 * reads and discards every export (so serialising and sending spans is part of the cost).
 *
 *   npm run bench:tracing -- [--quick] [--only edge|dispatch]
 *
 * The dispatch bench runs f10-single once per mode (--quick: its tiny version); compare the
 * `sluice start` column of its per-process table (CPU-s per 1,000 deliveries) across the modes.
 * Prints each run's table rows under its mode, with the load average before each run.
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { PROJECT_ROOT } from '../core/paths.ts';

const ROOT = PROJECT_ROOT;
const { values: opt } = parseArgs({
  options: { quick: { type: 'boolean', default: false }, only: { type: 'string' } },
});

let exports = 0;
let bytes = 0;
const sink = createServer((req, res) => {
  req.on('data', (c: Buffer) => (bytes += c.length));
  req.on('end', () => {
    exports++;
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});
await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
const endpoint = `http://127.0.0.1:${(sink.address() as { port: number }).port}/v1/traces`;

const MODES: Array<[string, Record<string, string>]> = [
  ['off', { SLUICE_TRACE_EXPORTER: 'none' }],
  [
    'on, 1 % sampled',
    { SLUICE_TRACE_EXPORTER: 'otlp', SLUICE_TRACE_SAMPLE_RATIO: '0.01', SLUICE_OTLP_ENDPOINT: endpoint },
  ],
  [
    'on, 100 % sampled',
    { SLUICE_TRACE_EXPORTER: 'otlp', SLUICE_TRACE_SAMPLE_RATIO: '1', SLUICE_OTLP_ENDPOINT: endpoint },
  ],
];
const BENCHES: Array<[string, string[], Record<string, string>]> = [
  // The suite's edge scenario (its hot-token case uses one client per VU, under the default
  // rate limit); its report goes to a scratch file, not bench/RESULTS.md.
  [
    'edge',
    [
      join(ROOT, 'bench/suite.ts'),
      '--only',
      'edge',
      '--results',
      join(tmpdir(), `sluice-tracing-edge-${process.pid}.md`),
      ...(opt.quick ? ['--quick'] : []),
    ],
    {},
  ],
  [
    'dispatch',
    // f10-single, the scenario whose CPU per delivery bench:dispatch --check guards; its report goes
    // to a scratch file, not bench/RESULTS.md.
    [
      join(ROOT, 'bench/dispatch.ts'),
      '--skip-hops',
      '--only',
      'f10-single',
      '--repeat',
      '1',
      '--results',
      join(tmpdir(), `sluice-tracing-dispatch-${process.pid}.md`),
      ...(opt.quick ? ['--quick'] : []),
    ],
    {},
  ],
];

function run(args: string[], env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(ROOT, 'bin/run-ts.js'), ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    child.once('error', reject);
    // A bench that exits non-zero (a k6 threshold, a lost delivery) still reports its rows.
    child.once('exit', (code) => resolve(code === 0 ? out : `${out}\n# (exited ${code})`));
  });
}

for (const [bench, args, env] of BENCHES) {
  if (opt.only && opt.only !== bench) continue;
  for (const [mode, traceEnv] of MODES) {
    const before = { exports, bytes };
    const load = loadavg()
      .map((l) => l.toFixed(2))
      .join(' ');
    const out = await run(args, { ...env, ...traceEnv });
    console.log(
      `\n## ${bench}, tracing ${mode} (load average before: ${load}; OTLP exports: ` +
        `${exports - before.exports}, ${Math.round((bytes - before.bytes) / 1024)} KiB)\n`,
    );
    console.log(
      out
        .split('\n')
        .filter((l) => l.startsWith('|') || l.startsWith('# '))
        .join('\n'),
    );
  }
}
sink.close();
