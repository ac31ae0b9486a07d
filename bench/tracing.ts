/**
 * Tracing overhead: the edge and dispatch benchmarks, each with tracing off, on at 1 % sampling and
 * on at 100 %, exporting over OTLP/HTTP to a sink in this process that reads and discards every
 * export (so serialising and sending spans is part of the cost). Prints each run's table rows under
 * its mode: compare the `sluice start` CPU per 1,000 deliveries, and the edge's rows, across modes.
 *
 *   npm run bench:tracing -- [--quick] [--only edge|dispatch]
 */
import { createServer } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { runCommand } from '../core/run-command.ts';
import { ROOT, say } from '../harness/cli.ts';

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
const otlp = {
  SLUICE_TRACE_EXPORTER: 'otlp',
  SLUICE_OTLP_ENDPOINT: `http://127.0.0.1:${(sink.address() as any).port}/v1/traces`,
};
const MODES: [string, Record<string, string>][] = [
  ['off', { SLUICE_TRACE_EXPORTER: 'none' }],
  ['on, 1 % sampled', { ...otlp, SLUICE_TRACE_SAMPLE_RATIO: '0.01' }],
  ['on, 100 % sampled', { ...otlp, SLUICE_TRACE_SAMPLE_RATIO: '1' }],
];
// Each bench's own report goes to a scratch file, not bench/RESULTS.md. The edge: the suite's edge
// scenario; the dispatch: f10-single, whose CPU per delivery bench:dispatch --check guards.
const scratchMd = (name: string) => ['--results', join(tmpdir(), `sluice-tracing-${name}-${process.pid}.md`)];
const quick = opt.quick ? ['--quick'] : [];
const BENCHES: [string, string[]][] = [
  ['edge', ['bench/suite.ts', '--only', 'edge', ...scratchMd('edge'), ...quick]],
  [
    'dispatch',
    ['bench/dispatch.ts', '--skip-hops', '--only', 'f10-single', '--repeat', '1', ...scratchMd('dispatch'), ...quick],
  ],
];

for (const [bench, args] of BENCHES) {
  if (opt.only && opt.only !== bench) continue;
  for (const [mode, traceEnv] of MODES) {
    const before = { exports, bytes };
    const load = loadavg()
      .map((l) => l.toFixed(2))
      .join(' ');
    const env = { ...process.env, ...traceEnv };
    const run = await runCommand(process.execPath, [join(ROOT, 'bin/run-ts.js'), ...args], {
      cwd: ROOT,
      env,
      stderr: 'inherit',
    });
    say(
      `\n## ${bench}, tracing ${mode} (load average before: ${load}; OTLP exports: ` +
        `${exports - before.exports}, ${Math.round((bytes - before.bytes) / 1024)} KiB)\n`,
    );
    // A bench that exits non-zero (a k6 threshold, a lost delivery) still reports its rows.
    const rows = run.stdout.split('\n').filter((l) => l.startsWith('|') || l.startsWith('# '));
    say([...rows, ...(run.code === 0 ? [] : [`# (exited ${run.code})`])].join('\n'));
  }
}
sink.close();
