import t from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { judgeCpu, recordedCpu } from '../../bench/dispatch/cpu-check.ts';

const results = (cell: string) => `# Benchmark results

<!-- dispatch:current:begin -->
### Run "current"

#### Per-process resources

| scenario | deliveries | kafka (java) | sluice start (primary + 2 workers) | receiver | load |
|---|---:|---:|---:|---:|---:|
| f1-single | 40,000 | 552 MB · 0.03 s | 600 MB · 0.40 s | 94 MB · 0.03 s | 105 MB · 0.01 s |
| f10-single | 200,000 | 552 MB · 0.03 s | ${cell} | 94 MB · 0.03 s | 105 MB · 0.01 s |
<!-- dispatch:current:end -->
`;

t.test('the recorded figure is the sluice start cell of the scenario in the labelled section', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'cpu-check-'));
  const file = join(dir, 'RESULTS.md');
  writeFileSync(file, results('686 MB · 0.14 s'));
  t.equal(recordedCpu(file, 'current', 'f10-single'), 0.14);
  t.equal(recordedCpu(file, 'current', 'f1-single'), 0.4);
  t.equal(recordedCpu(file, 'after', 'f10-single'), null, 'no such section');
  t.equal(recordedCpu(join(dir, 'missing.md'), 'current', 'f10-single'), null, 'no file');
  writeFileSync(file, results('—'));
  t.equal(recordedCpu(file, 'current', 'f10-single'), null, 'no figure in the cell');
});

t.test('with a column of all Sluice processes, that column is the recorded figure', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'cpu-check-'));
  const file = join(dir, 'RESULTS.md');
  const text = results('686 MB · 0.14 s')
    .replace('| receiver | load |', '| receiver | load | all Sluice processes |')
    .replace('|---:|---:|---:|---:|---:|---:|', '|---:|---:|---:|---:|---:|---:|---:|')
    .replace('105 MB · 0.01 s |\n| f10', '105 MB · 0.01 s | 0.47 s |\n| f10')
    .replace(/(\| f10-single .* 105 MB · 0\.01 s \|)/, '$1 0.19 s |');
  writeFileSync(file, text);
  t.equal(recordedCpu(file, 'current', 'f10-single'), 0.19, 'sluice start and the dispatchers beside it');
  t.equal(recordedCpu(file, 'current', 'f1-single'), 0.47);
});

t.test('a run passes up to 125 % of the recorded figure and fails above it', async (t) => {
  t.ok(judgeCpu(0.14, 0.14).ok);
  t.ok(judgeCpu(0.14, 0.175).ok, 'exactly +25 %');
  t.notOk(judgeCpu(0.14, 0.176).ok, 'over +25 %');
  t.match(judgeCpu(0.14, 0.2).line, /FAILED/);
  t.notOk(judgeCpu(null, 0.1).ok, 'nothing recorded: no pass');
});
