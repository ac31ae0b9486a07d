/**
 * `npm test`: starts real Kafka brokers (unless KAFKA_BROKERS is set), runs tap with
 * KAFKA_BROKERS pointing at them, and stops them. Each test file uses its own topic prefix, so one
 * broker serves a lane's files.
 *
 * No silent skips: every skipped test is listed at the end with what installs its need. Under CI
 * (CI set, or SLUICE_NO_SKIPS=1 as .ci/run sets it) a skip fails the run.
 */
import { spawn, spawnSync } from 'node:child_process';
import { freePorts } from '../core/net/free-port.ts';
import { join } from 'node:path';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { loadConfig } from '../core/config.ts';
import { startLocalKafka, writeClassArchive } from '../core/kafka/local-broker.ts';
import { PROJECT_ROOT } from '../core/paths.ts';
import { runCommand } from '../core/run-command.ts';
import { listenerPid, ownAndReapedCpuSec } from '../harness/proc-cpu.ts';
import { startTopicJanitor } from '../harness/topic-janitor.ts';

const root = PROJECT_ROOT;

interface LaneBroker {
  brokers: string;
  stop: () => Promise<void>;
}

/** Deletes the topics of test files whose process has ended (harness/topic-janitor.ts). */
const janitorOf = (brokers: string[]) => startTopicJanitor(brokers, { log: (l) => console.log(`# ${l}`) });

/** A broker for one lane of the run: the given KAFKA_BROKERS, or a local one started for it. */
async function laneBroker(name: string): Promise<LaneBroker> {
  const given = process.env.KAFKA_BROKERS;
  if (given) return { brokers: given, stop: async () => {} };
  const config = loadConfig({ ...process.env, KAFKA_BROKERS: undefined });
  const port = await freePorts(2);
  const started = Date.now();
  const kafkaDir = join(config.cacheDir, `kafka-test-${port}`);
  const kafka = await startLocalKafka({
    cacheDir: config.cacheDir,
    port,
    dataDir: kafkaDir,
    fresh: true,
    log: (l) => console.log(`# ${name}: ${l}`),
  });
  console.log(`# ${name}: test Kafka broker ready at ${kafka.brokers.join(',')} in ${Date.now() - started} ms`);
  const janitor = janitorOf(kafka.brokers);
  // The broker's log directory (up to a few hundred MB per run) goes with it.
  return {
    brokers: kafka.brokers.join(','),
    stop: async () => {
      console.log(`# ${name}: ${await janitor.stop({ sweep: false })} topics of ended test files deleted`);
      // What the run cost the broker: requests, and the topics it held.
      const pid = listenerPid(kafka.port);
      const cpu = pid === null ? null : ownAndReapedCpuSec(pid);
      if (cpu) console.log(`# ${name}: the test Kafka broker used ${cpu.own.toFixed(1)} CPU-s`);
      // Its data is removed next: nothing to shut down cleanly for.
      await kafka.stop('SIGKILL');
      rmSync(kafkaDir, { recursive: true, force: true });
    },
  };
}

/**
 * Test files at once in the first lane: most of a test's time is spent waiting (for Kafka, a
 * retry rung, a receiver), so three keep a 2-core machine busy without starving one another.
 */
const TEST_JOBS = 3;

/**
 * Test folders (and files) the fault lane runs beside its fault tests, one file at a time. Run after them (two
 * at a time), they made the fault lane the longer by ~70 s (749 against 678 s in a full run at
 * 563198e); the fault tests are mostly waiting, and one ordinary file beside them leaves their
 * recovery its core. These folders' files took ~390 s of file time beside 640 s of fault tests at
 * bbfd83d. Adding test/bench, test/console and test/package (~165 s) made both lanes longer (the
 * fault tests 693 s, the tests lane 762 against 741), and was taken out.
 */
const SPILL = [
  'test/cli/',
  'test/contracts/',
  // Long and mostly waiting (on retry rungs, slow receivers, windows): 233 s of file time for 31
  // CPU-s in a full run at 9cbf699, where the tests lane (three at a time) was CPU-bound at 662 s
  // and this one ended at 600 s.
  'test/receivers/',
  'test/dispatcher/ladder.test.ts',
  'test/webhooks/recovery.test.ts',
  'test/webhooks/event-types.test.ts',
];

interface TapRun {
  args: string[];
  /** The fault tests' dispatchers log at info into files a failing test can quote (harness/sluice-cli.ts). */
  childLogs?: boolean;
}

/**
 * Two lanes run side by side, each with its own broker: the tests (TEST_JOBS files at a time), and
 * the fault tests one at a time with the SPILL folders beside them. The fault tests kill brokers and
 * dispatchers under load and wait out what that costs (session timeouts, leader elections), so
 * they are mostly waiting; two of them side by side starve each other's recovery, and on the
 * other lane's broker they would slow every test that shares it. Arguments given: those files,
 * TEST_JOBS at a time (or --jobs N).
 */
async function main(): Promise<number> {
  const args = process.argv.slice(2);
  // Read here, before any broker starts, so a wrong option fails at once (runTap reads the same).
  parseRunArgs(args);
  const files = args.length > 0 ? [] : testFiles();
  const spilled = (f: string) => SPILL.some((dir) => f.startsWith(dir));
  const lanes: { name: string; runs: TapRun[] }[] =
    args.length > 0
      ? [{ name: 'tests', runs: [{ args: args.map(compiled) }] }]
      : [
          {
            name: 'tests',
            runs: [
              { args: ['--jobs', String(TEST_JOBS), ...files.filter((f) => !isFault(f) && !spilled(f)).map(compiled)] },
            ],
          },
          {
            name: 'faults',
            runs: [
              { args: ['--jobs', '1', ...files.filter(isFault).map(compiled)], childLogs: true },
              { args: ['--jobs', '1', ...files.filter(spilled).map(compiled)] },
            ],
          },
        ];
  // Before any test: the tools some tests run (k6, Toxiproxy: built from their Go modules on a
  // machine's first run, minutes, shown as it goes; later runs find them in .cache/bin), the
  // compiled tree, tap's plugin set and the brokers' class archive, all outside every test's time
  // limit. A whole run (npm test) also lints and builds dist/, side by side with the compile and the
  // lanes' brokers starting; a run of chosen files compiles what changed (seconds), so its tests,
  // and the Sluice processes they start, run the sources of this checkout.
  let brokers: Promise<LaneBroker>[];
  if (args.length === 0) {
    const archive = prepareClassArchive();
    brokers = lanes.map((lane) => archive.then(() => laneBroker(lane.name)));
    for (const b of brokers) b.catch(() => {}); // awaited below, or stopped when the prelude fails
    if (!(await prelude())) {
      await Promise.allSettled(brokers.map((b) => b.then((broker) => broker.stop())));
      return 1;
    }
  } else {
    buildAll();
    await prepareClassArchive();
    const tap = await prepareTap();
    if (tap && !tap.ok) return 1;
    brokers = lanes.map((lane) => laneBroker(lane.name));
  }
  const started = Date.now();
  // The lanes share a given KAFKA_BROKERS, which outlives the run: one janitor, a last sweep at the end.
  const shared = process.env.KAFKA_BROKERS ? janitorOf(process.env.KAFKA_BROKERS.split(',')) : null;
  const results = await Promise.all(
    lanes.map(async (lane, i) => {
      const broker = await brokers[i];
      // The views' on-disk stores of every test node go to one directory removed after the run.
      const dataDir = mkdtempSync(join(tmpdir(), `sluice-test-state-${lane.name}-`));
      const env: NodeJS.ProcessEnv = { ...process.env, KAFKA_BROKERS: broker.brokers, SLUICE_DATA_DIR: dataDir };
      try {
        // A lane's runs go side by side. The first lane's output goes straight out; the others' is
        // held until it is complete.
        const done = await Promise.all(
          lane.runs.map((run, r) => {
            const runEnv = { ...env };
            if (run.childLogs && runEnv.TEST_CHILD_LOG_DIR === undefined) {
              runEnv.TEST_CHILD_LOG_DIR = join(dataDir, 'child-logs');
              runEnv.TEST_CHILD_LOG_LEVEL ??= 'info';
              mkdirSync(runEnv.TEST_CHILD_LOG_DIR);
            }
            return runTap(run.args, runEnv, i === 0 && r === 0 ? null : lane.name);
          }),
        );
        return merged(done);
      } finally {
        await broker.stop();
        rmSync(dataDir, { recursive: true, force: true });
      }
    }),
  );
  if (shared) console.log(`# ${await shared.stop({ sweep: true })} topics of ended test files deleted`);
  let code = 0;
  const totals = { pass: 0, fail: 0, skip: 0 };
  const skipped: Skipped[] = [];
  const empty: Skipped[] = [];
  const failures: string[] = [];
  for (const [i, r] of results.entries()) {
    if (r.held) process.stdout.write(r.held);
    console.log(`# lane ${lanes[i].name}: ${r.pass} passed, ${r.fail} failed, in ${Math.round(r.ms / 1000)} s`);
    code ||= r.code;
    totals.pass += r.pass;
    totals.fail += r.fail;
    totals.skip += r.skip;
    skipped.push(...r.skipped);
    empty.push(...r.empty);
    failures.push(...r.failures);
  }
  reportCpu(results.flatMap((r) => r.cpu));
  console.log(
    `${totals.pass} passed, ${totals.fail} failed${totals.skip ? `, ${totals.skip} skipped` : ''} ` +
      `in ${Math.round((Date.now() - started) / 1000)} s`,
  );
  // A log cut to its tail (as CI's is) still names what failed, and why.
  if (failures.length > 0) {
    console.log(`!!! ${failures.length} failing assertion(s):`);
    for (const f of failures) console.log(f.replace(/^/gm, '!!! '));
  }
  if (empty.length > 0) {
    console.log(`!!! ${empty.length} test(s) ended with no assertion (a test that asserts nothing cannot fail):`);
    for (const e of empty) console.log(`!!!   ${e.file}: ${e.name}`);
    code ||= 1;
  }
  if (totals.skip > 0 || skipped.length > 0) {
    reportSkips(skipped, totals.skip);
    if (strict()) {
      console.log('!!! skips fail the run under CI (CI or SLUICE_NO_SKIPS=1): install what they need');
      code ||= 1;
    }
  }
  return code;
}

function buildAll(): void {
  const at = Date.now();
  const run = spawnSync('npm', ['run', '--silent', 'build:all'], { cwd: root, stdio: 'inherit' });
  if (run.status !== 0) throw new Error('npm run build:all failed: the tests would run a stale build');
  console.log(`# build: the server and the tests compiled into build/ in ${Math.round((Date.now() - at) / 1000)} s`);
}

/**
 * tap runs each test file with the plugins compiled into node_modules/@tapjs/test/test-built, and
 * a fresh `npm ci` ships tap's default set, @tapjs/typescript (ts-node) among them, where .taprc
 * loads tsx instead and leaves out the plugins no test uses. tap rebuilds that set when a run
 * starts with another, but two lanes starting at once rebuild it over each other and every test
 * file then fails to load. So it is rebuilt here, once, before any lane starts.
 */
async function prepareTap(): Promise<StepResult | null> {
  const built = join(root, 'node_modules/@tapjs/test/test-built/dist/esm/index.js');
  const signature = existsSync(built) ? /export const signature = `([^`]*)`/.exec(readFileSync(built, 'utf8')) : null;
  // .taprc's `- "!@tapjs/<name>"` lines: the plugins the built set must leave out.
  const left = [...readFileSync(join(root, '.taprc'), 'utf8').matchAll(/^\s*-\s*"!(@tapjs\/[\w-]+)"/gm)].map(
    (m) => m[1],
  );
  if (signature && !signature[1].split('\n').some((p) => left.includes(p))) return null;
  const step = await runStep("tap's plugins rebuilt without @tapjs/typescript (as .taprc says)", [
    join(root, 'node_modules/.bin/tap'),
    'build',
  ]);
  report(step);
  return step;
}

interface StepResult {
  what: string;
  ok: boolean;
  ms: number;
  /** Its stdout and stderr, interleaved. */
  output: string;
}

/** Runs a command of the prelude with its output held, to be shown when it fails. */
async function runStep(what: string, [command, ...args]: string[]): Promise<StepResult> {
  const at = Date.now();
  const run = await runCommand(command, args, { cwd: root });
  return { what, ok: run.code === 0, ms: Date.now() - at, output: run.output };
}

function report(step: StepResult): void {
  console.log(`# prelude: ${step.what}: ${step.ok ? 'done' : 'FAILED'} in ${(step.ms / 1000).toFixed(1)} s`);
  if (!step.ok) process.stdout.write(step.output.replace(/^/gm, '# | '));
}

/**
 * What a whole run does before its first test, side by side (the compile, about 20 s, is the
 * longest; in a row they took ~40 s): lint, dist/, the compile of everything into build/, tap's
 * plugins and the tools. False when any failed (its output is shown): no test runs then.
 */
async function prelude(): Promise<boolean> {
  const at = Date.now();
  const steps = [
    runStep('lint (npm run lint)', ['npm', 'run', '--silent', 'lint']),
    runStep('dist/ built (npm run build)', ['npm', 'run', '--silent', 'build']),
    runStep('everything compiled into build/ (npm run build:all)', ['npm', 'run', '--silent', 'build:all']),
  ].map((p) =>
    p.then((step) => {
      report(step);
      return step;
    }),
  );
  const tap = prepareTap();
  await prepareTools();
  const results = [...(await Promise.all(steps)), await tap];
  console.log(`# prelude: ${Math.round((Date.now() - at) / 1000)} s`);
  return results.every((r) => r === null || r.ok);
}

/** Builds the tools the suite runs (once per machine) and puts the Go they need on PATH. */
async function prepareTools(): Promise<void> {
  for (const script of ['scripts/install-k6.sh', 'scripts/install-toxiproxy.sh']) {
    const at = Date.now();
    console.log(`# tools: ${script} (built once into .cache/bin; its progress follows)`);
    const run = await runCommand('bash', [join(root, script)], { cwd: root, stderr: 'inherit' });
    const took = Math.round((Date.now() - at) / 1000);
    if (run.code === 0) console.log(`# tools: ${run.stdout.trim()} ready in ${took} s`);
    else console.log(`# tools: ${script} failed after ${took} s; the tests that need it will say so`);
  }
  // The Go snippet test runs docs/webhooks.md's Go: the toolchain fetched for k6 serves when none is installed.
  const go = join(root, '.cache/go/bin');
  if (existsSync(join(go, 'go')) && spawnSync('go', ['version']).status !== 0)
    process.env.PATH = `${go}:${process.env.PATH ?? ''}`;
}

/**
 * The broker's class archive (core/kafka/local-broker.ts), made once before any broker of the run
 * starts: every broker a test starts maps it (half the CPU of a broker's start).
 */
async function prepareClassArchive(): Promise<void> {
  const at = Date.now();
  const cacheDir = loadConfig({ ...process.env, KAFKA_BROKERS: undefined }).cacheDir;
  const archive = await writeClassArchive(cacheDir, (line) => console.log(`# tools: ${line}`));
  if (archive)
    console.log(`# tools: Kafka class archive ${archive} ready in ${Math.round((Date.now() - at) / 1000)} s`);
}

interface Skipped {
  file: string;
  name: string;
  reason: string;
}

/** Under CI a skip is a failure: CI set (not "false" or "0"), or SLUICE_NO_SKIPS=1. */
function strict(): boolean {
  const ci = process.env.CI;
  return process.env.SLUICE_NO_SKIPS === '1' || (ci !== undefined && ci !== '' && ci !== 'false' && ci !== '0');
}

/** What a skip reason asks for, and the command that installs it (.ci/run does the same on CI). */
const REMEDIES: [RegExp, string][] = [
  [/chromium/i, 'apt-get install chromium   (or set CHROMIUM_PATH)'],
  [/cryptography/i, 'apt-get install python3-cryptography'],
  [/python/i, 'apt-get install python3'],
  [/\bgo\b/i, 'bash scripts/install-k6.sh && export PATH="$PWD/.cache/go/bin:$PATH"   (or install Go)'],
  [/haproxy/i, 'apt-get install haproxy'],
  [/toxiproxy/i, 'bash scripts/install-toxiproxy.sh'],
  [/namespace|root/i, 'run the tests as root (network namespaces), with iproute2 installed'],
];

function reportSkips(skipped: Skipped[], counted: number): void {
  const bar = '!'.repeat(100);
  console.log(bar);
  console.log(`!!! ${Math.max(counted, skipped.length)} test(s) SKIPPED: they did not run on this machine`);
  for (const s of skipped) {
    console.log(`!!!   ${s.file}: ${s.name}`);
    console.log(`!!!     why: ${s.reason || '(no reason given)'}`);
    const remedy = REMEDIES.find(([re]) => re.test(`${s.name} ${s.reason}`));
    console.log(`!!!     fix: ${remedy ? remedy[1] : 'see .ci/run for what CI installs'}`);
  }
  console.log(bar);
}

const isFault = (file: string) => file.startsWith('test/faults/');

/**
 * A test file's compiled form, which tap runs with plain node: `npm run build:all` compiles the
 * tests with everything else into build/ (tsx in each test process cost ~1 CPU-s of loader hooks
 * per file, ~150 CPU-s a run). Other arguments pass through.
 */
const compiled = (arg: string) => (/^test\/.*\.test\.ts$/.test(arg) ? `build/${arg.replace(/\.ts$/, '.js')}` : arg);
/** The source a compiled test file's name (tap's `build/test/x.test.js`) comes from. */
const source = (name: string) => name.replace(/^build\/(test\/\S*?)\.js\b/, '$1.ts');

/** Every test file, as tap's `include` would find them. */
function testFiles(): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(`${dir}/${e.name}`) : e.name.endsWith('.test.ts') ? [`${dir}/${e.name}`] : [],
    );
  return walk('test').sort();
}

/**
 * One tap run: its exit code, the counts from its closing summary line, and every skipped test
 * (`ok N - name # SKIP reason` at any depth, under the file's `# Subtest: test/...`).
 */
interface TapResult {
  code: number;
  pass: number;
  fail: number;
  skip: number;
  skipped: Skipped[];
  empty: Skipped[];
  failures: string[];
  held: string;
  ms: number;
  /** CPU-s of each file, its own and its exited children's (test/helpers/plain-children.ts). */
  cpu: { file: string; seconds: number }[];
}

/** The runs of one lane, side by side, as one result. */
function merged(runs: TapResult[]): TapResult {
  return runs.reduce((a, r) => ({
    code: a.code || r.code,
    pass: a.pass + r.pass,
    fail: a.fail + r.fail,
    skip: a.skip + r.skip,
    skipped: [...a.skipped, ...r.skipped],
    empty: [...a.empty, ...r.empty],
    failures: [...a.failures, ...r.failures],
    held: a.held + r.held,
    ms: Math.max(a.ms, r.ms),
    cpu: [...a.cpu, ...r.cpu],
  }));
}

/** How long a test file may run: tap's own default for a file, as .taprc sets it. */
const FILE_TIMEOUT_S = Number(/^timeout:\s*(\d+)/m.exec(readFileSync(join(root, '.taprc'), 'utf8'))?.[1] ?? 300);

/** Test files and `--jobs N` (files at once); any other option is refused. */
function parseRunArgs(args: string[]): { jobs: number; files: string[] } {
  let jobs = TEST_JOBS;
  const files: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--jobs') jobs = Number(args[++i]);
    else if (args[i].startsWith('--jobs=')) jobs = Number(args[i].slice(7));
    else if (args[i].startsWith('-'))
      throw new Error(`unknown option ${args[i]}: npm test takes test files, and --jobs N (files at once)`);
    else files.push(args[i]);
  }
  return { jobs, files };
}

const indent = (text: string) => text.replace(/^(?=.)/gm, '    ');

/**
 * SQLite (node-sqlite3-wasm) is WebAssembly: V8 compiles each function with its baseline compiler
 * (Liftoff), then again with its optimizing one (TurboFan) once it has run enough. In a test
 * process, which lives seconds, that second compile is most of what the store costs: eight
 * Kafka-and-store test files took 33.6 and 29.1 CPU-s with Liftoff only against 40.9 and 34.8
 * (alternating runs), and starting and stopping one node 1.1 against 1.9 CPU-s. For test processes
 * only: the Sluice processes they start run as an operator's would, where optimized SQLite keeps
 * DLQ and endpoint lists fast (kept unoptimized longer, their p50 rose 1.2-1.8x in bench:state).
 */
const WASM_BASELINE_ONLY = '--liftoff-only';

/**
 * Runs test files `jobs` at a time, each with plain node (its `t` from tap writes TAP), and reports
 * them as tap's runner did: `# Subtest: <file>`, its output indented, `ok N - <file> # time=`, then
 * the run's `# { total, pass, fail, skip }`. tap's runner put its @tapjs/processinfo module hooks into
 * every test file's process (a loader thread and a message per module loaded: ~1.5 CPU-s a file,
 * ~200 CPU-s a run) to map coverage, which this suite does not collect.
 */
async function runTap(args: string[], env: NodeJS.ProcessEnv, holdAs: string | null): Promise<TapResult> {
  const started = Date.now();
  let held = '';
  const { jobs, files } = parseRunArgs(args);
  let file = '';
  const skipped: Skipped[] = [];
  /** Tests that ended with no assertion (a plan of `1..0` without a skip): each one fails the run. */
  const empty: Skipped[] = [];
  /** The names of the subtests open at each indentation, to name a test that asserted nothing. */
  const open = new Map<number, string>();
  /** Each failing assertion: its file, the tests it sits in, and the first lines of its diagnostic. */
  const failures: string[] = [];
  let diagnostic = 0;
  const line = (raw: string) => {
    // Named by their sources: `build/test/x.test.js` reads as `test/x.test.ts`.
    const l = raw.replace(
      /^(\s*(?:# Subtest: |(?:not )?ok \d+ - ))(build\/test\/\S+)/,
      (_, head, name) => head + source(name),
    );
    const named = /^(\s*)# Subtest: (.*)$/.exec(l);
    if (named) {
      for (const at of open.keys()) if (at >= named[1].length) open.delete(at);
      open.set(named[1].length, named[2]);
    }
    if (diagnostic > 0) {
      failures[failures.length - 1] += `\n${l}`;
      diagnostic = /^\s*\.\.\.\s*$/.test(l) ? 0 : diagnostic - 1;
    }
    const failed = /^(\s+)not ok \d+ - (.*)$/.exec(l);
    if (failed && !/# (TODO|SKIP)\b/i.test(l)) {
      const depth = failed[1].length;
      const path = [...open].filter(([at]) => at > 0 && at < depth).map(([, name]) => name);
      const label = `${file} > ${[...path, failed[2].replace(/ # time=[\d.]+m?s$/, '')].join(' > ')}`;
      // A failing subtest repeats as `not ok` at each level above it: keep only the innermost.
      if (!failures.some((f) => f.startsWith(`${label} > `))) {
        failures.push(label);
        diagnostic = 24;
      }
    }
    const none = /^(\s*)1\.\.0\s*$/.exec(l);
    if (none && none[1].length > 0)
      empty.push({ file, name: open.get(none[1].length - 4) ?? '(unnamed)', reason: 'no assertion' });
    // A held lane still shows its progress, a line per file.
    if (holdAs !== null && /^(not )?ok \d+ - test\//.test(l)) console.log(`# ${holdAs}: ${l}`);
    const subtest = /^# Subtest: (test\/\S+)/.exec(l);
    if (subtest) file = subtest[1];
    const skip = /^\s*ok \d+ - (.*?) # SKIP\b:?\s*(.*)$/i.exec(l);
    if (skip && !skip[1].startsWith('test/')) skipped.push({ file, name: skip[1], reason: skip[2] });
    else if (skip) skipped.push({ file: skip[1].split(' ')[0], name: '(the whole file)', reason: skip[2] });
  };
  const totals = { total: 0, pass: 0, fail: 0, skip: 0 };
  const cpuByFile: TapResult['cpu'] = [];
  let index = 0;
  const emit = (text: string) => {
    if (holdAs === null) process.stdout.write(text);
    else held += text;
    for (const l of text.split('\n')) line(l);
  };
  const runOne = (file: string, n: number) =>
    new Promise<void>((resolve) => {
      const at = Date.now();
      const child = spawn(
        process.execPath,
        [
          '--enable-source-maps',
          WASM_BASELINE_ONLY,
          `--import=${join(root, 'build/test/helpers/plain-children.js')}`,
          file,
        ],
        {
          cwd: root,
          env: { ...env, TAP: '1', TAP_TIMEOUT: String(FILE_TIMEOUT_S) },
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      );
      let out = '';
      // One file at a time, unheld (a run of chosen files, say): its output shows as it comes.
      const live = holdAs === null && Math.min(jobs, files.length) === 1;
      let shown = 0;
      const show = () => {
        const end = out.lastIndexOf('\n') + 1;
        if (end > shown) emit(indent(out.slice(shown, end)));
        shown = Math.max(shown, end);
      };
      if (live) emit(`# Subtest: ${source(file)}\n`);
      child.stdout!.on('data', (c: Buffer) => {
        out += c.toString();
        if (live) show();
      });
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        child.kill('SIGKILL');
      }, FILE_TIMEOUT_S * 1000);
      child.once('close', (code, signal) => {
        clearTimeout(timer);
        const name = source(file);
        const summary = /^# \{ total: (\d+)(?:, pass: (\d+))?(?:, fail: (\d+))?(?:, skip: (\d+))?/m.exec(out);
        const wholeSkip = /^1\.\.0 # (?:SKIP\b:?\s*)?(.*)$/im.exec(out);
        const ok = code === 0 && !timedOut;
        if (summary) {
          totals.total += Number(summary[1]);
          totals.pass += Number(summary[2] ?? 0);
          totals.fail += Number(summary[3] ?? 0);
          totals.skip += Number(summary[4] ?? 0);
        }
        const why = timedOut ? ` (timed out after ${FILE_TIMEOUT_S} s)` : !ok ? ` (exit ${code ?? signal})` : '';
        // A crash or a timeout is a failure of its own (its stderr is in the log above).
        if (!ok && !Number(summary?.[3] ?? 0)) {
          totals.fail++;
          const last = out.trimEnd().split('\n').slice(-10).join('\n');
          failures.push(`${name}${why}, no failing assertion reported; its last lines:\n${last}`);
        }
        if (live && out !== '' && !out.endsWith('\n')) out += '\n';
        if (live) show();
        const head = live ? '' : `# Subtest: ${name}\n${indent(out.replace(/\n$/, ''))}\n`;
        const cpu = /^# cpu: ([\d.]+) s, its children ([\d.]+) s$/m.exec(out);
        const seconds = cpu ? Number(cpu[1]) + Number(cpu[2]) : null;
        if (seconds !== null) cpuByFile.push({ file: name, seconds });
        const time = ` # time=${Date.now() - at}ms${seconds === null ? '' : ` cpu=${seconds.toFixed(1)}s`}`;
        if (wholeSkip && ok) emit(`${head}ok ${n} - ${name} # SKIP ${wholeSkip[1]}\n\n`);
        else emit(`${head}${ok ? 'ok' : 'not ok'} ${n} - ${name}${why}${time}\n\n`);
        resolve();
      });
    });
  emit('TAP version 14\n');
  const worker = async () => {
    while (index < files.length) {
      const i = index++;
      await runOne(files[i], i + 1);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(jobs, files.length)) }, worker));
  const counts = Object.entries(totals)
    .filter(([k, v]) => k === 'total' || v > 0)
    .map(([k, v]) => `${k}: ${v}`)
    .join(', ');
  emit(`1..${files.length}\n# { ${counts} }\n# time=${Date.now() - started}ms\n`);
  const ms = Date.now() - started;
  if (holdAs !== null) held = `# ---- lane ${holdAs} (run beside the tests above) ----\n${held}`;
  const failed = totals.fail > 0;
  return {
    code: failed || empty.length > 0 ? 1 : 0,
    pass: totals.pass,
    fail: totals.fail,
    skip: totals.skip,
    skipped,
    empty,
    failures,
    held,
    ms,
    cpu: cpuByFile,
  };
}

/** What the test files cost in CPU, with the costliest: where a shorter run has to come from. */
function reportCpu(cpu: TapResult['cpu']): void {
  if (cpu.length === 0) return;
  const total = cpu.reduce((sum, c) => sum + c.seconds, 0);
  const most = [...cpu].sort((a, b) => b.seconds - a.seconds).slice(0, 12);
  console.log(
    `# cpu: ${Math.round(total)} CPU-s in ${cpu.length} test files and the processes they started; the most:`,
  );
  for (const c of most) console.log(`#   ${c.seconds.toFixed(1).padStart(6)} s  ${c.file}`);
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`npm test: ${(err as Error).message}`);
    process.exit(1);
  },
);
