// The bench suite's k6 scripts against a started Sluice, once: every edge case answers only its
// expected status and the report is written. No timing is asserted (timing belongs to `npm run bench`).
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brokers } from '../helpers/sluice.ts';
import { PROJECT_ROOT } from '../../core/paths.ts';

const root = PROJECT_ROOT;
const dir = mkdtempSync(join(tmpdir(), 'sluice-suite-smoke-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const results = join(dir, 'RESULTS.md');

t.test('npm run bench -- --quick --only edge: every k6 case runs against a started Sluice', async (t) => {
  const child = spawn(
    process.execPath,
    [
      'bin/run-ts.js',
      'bench/suite.ts',
      '--quick',
      '--only',
      'edge',
      '--duration',
      '1',
      '--vus',
      '4',
      '--workers',
      '1',
      '--results',
      results,
    ],
    {
      cwd: root,
      env: { ...process.env, KAFKA_BROKERS: brokers().join(',') },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  t.equal(code, 0, `the suite exits 0 (no case got an unexpected status)\n${code === 0 ? '' : out.slice(-3000)}`);
  const report = readFileSync(results, 'utf8');
  for (const label of [
    'bare uWS',
    'Sluice: hot token',
    'Sluice: scope violation',
    'jose.jwtVerify per request',
    'verified-token cache',
    'Sluice: issue a token',
    'half of its saturation',
  ]) {
    const row = report.split('\n').find((l) => l.startsWith(`| ${label}`) || (l.includes(label) && l.startsWith('|')));
    t.ok(row, `the report has the row "${label}"`);
    t.match(row ?? '', /\| none( \([^)]*\))? \|/, `"${label}": no status other than the expected one`);
    // | case | expected | req/s | server CPU-ms per request | ...: the server's CPU over the case, per request.
    const cpuMs = Number((row ?? '').split('|')[4]?.trim().replaceAll(',', ''));
    t.ok(cpuMs > 0 && cpuMs < 1000, `"${label}": the server's CPU per request (${cpuMs} ms)`);
  }
  t.match(report, /hot token ≤ 1\.5× the CPU per request of bare uWS/, 'the CPU target against bare uWS is judged');
  t.match(
    report,
    /<!-- suite:begin -->[\s\S]*### Targets[\s\S]*<!-- suite:end -->/,
    'the report is the marked suite section with its targets',
  );
});

t.test('a case counts only the expected status and lists every other one by status', async (t) => {
  const { execFileSync } = await import('node:child_process');
  const { createServer } = await import('node:http');
  const { runCase } = await import('../../bench/suite/k6.ts');
  const k6 = execFileSync('bash', [join(root, 'scripts/install-k6.sh')], { encoding: 'utf8' }).trim();
  let n = 0;
  const server = createServer((_req, res) => {
    res.writeHead(++n % 2 === 0 ? 429 : 200).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => server.close());
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/`;
  const r = await runCase(
    k6,
    join(dir, 'mixed.json'),
    { id: 'mixed', label: 'half 429', server: 'bare', method: 'GET', url, expect: 200, duration: 1, vus: 2 },
    () => {},
  );
  // Counts, not rates: the server answered n requests, every other one a 429.
  const limited = r.unexpected.find(([s]) => s === '429')?.[1] ?? 0;
  t.ok(n > 0, `the server answered ${n} requests`);
  t.equal(limited, Math.floor(n / 2), 'every 429 is listed');
  t.equal(r.rps * 1, Math.ceil(n / 2), 'req/s (over the 1 s case) counts the 200s and only them');
});
