import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePorts } from '../../scripts/free-port.ts';
import { loadConfig } from '../../core/config.ts';
import { classArchive, ensureKafkaJars, startLocalKafka } from '../../core/kafka/local-broker.ts';

const scratch = mkdtempSync(join(tmpdir(), 'sluice-class-archive-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

t.test('no archive: the broker is asked to write one at exit, and it is moved into place whole', async (t) => {
  const libs = join(scratch, 'kafka-x', 'libs');
  mkdirSync(libs, { recursive: true });
  const first = classArchive(libs);
  t.equal(first.flags.length, 1);
  t.match(first.flags[0], /^-XX:ArchiveClassesAtExit=.*classes-[0-9a-f]{12}\.jsa\.\d+-[0-9a-f]{8}$/);
  const pending = first.flags[0].split('=')[1];
  const archive = pending.replace(/\.\d+-[0-9a-f]{8}$/, '');
  first.settle(true); // the broker wrote nothing: nothing is moved
  t.notOk(existsSync(archive));
  writeFileSync(pending, 'part of');
  first.settle(false); // killed while writing: the partial file goes
  t.notOk(existsSync(archive), 'a killed broker leaves no archive');
  t.notOk(existsSync(pending), 'nor its partial file');
  writeFileSync(pending, 'classes');
  first.settle(true);
  t.ok(existsSync(archive), 'a written archive takes its final name');
  t.notOk(existsSync(pending));
  t.same(classArchive(libs).flags, [`-XX:SharedArchiveFile=${archive}`], 'the next broker maps it');
});

t.test('a real broker writes the archive as it stops, and the next one starts with it mapped', async (t) => {
  const { cacheDir } = loadConfig({ ...process.env, KAFKA_BROKERS: undefined });
  const libs = ensureKafkaJars(cacheDir);
  const kafkaDir = join(libs, '..');
  for (const f of readdirSync(kafkaDir)) if (/^classes-.*\.jsa$/.test(f)) rmSync(join(kafkaDir, f), { force: true });
  const start = async () =>
    startLocalKafka({ cacheDir, port: await freePorts(2), dataDir: join(scratch, 'broker'), fresh: true });
  const first = await start();
  await first.stop();
  const written = readdirSync(kafkaDir).filter((f) => /^classes-[0-9a-f]{12}\.jsa$/.test(f));
  t.equal(written.length, 1, `the stopped broker wrote its class archive (${written.join(', ')})`);
  const archive = join(kafkaDir, written[0]);
  // -Xshare:on fails instead of starting without the archive: the JVM maps it.
  const check = spawnSync(
    'java',
    [`-XX:SharedArchiveFile=${archive}`, '-Xshare:on', '-cp', `${libs}/*`, 'kafka.tools.StorageTool', 'random-uuid'],
    {
      encoding: 'utf8',
    },
  );
  t.equal(check.status, 0, `this JVM maps the archive${check.status === 0 ? '' : `\n${check.stderr}${check.stdout}`}`);
  const second = await start();
  t.teardown(() => second.stop());
  const pid = spawnSync('pgrep', ['-f', `${join(scratch, 'broker')}/server.properties`], {
    encoding: 'utf8',
  }).stdout.trim();
  const cmdline = readFileSync(`/proc/${pid.split('\n')[0]}/cmdline`, 'utf8');
  t.match(cmdline, `-XX:SharedArchiveFile=${archive}`, 'the next broker starts with the archive');
  const stdout = readFileSync(join(scratch, 'broker', 'logs', 'stdout.log'), 'utf8');
  t.notMatch(stdout, /\[cds\].*(error|disabled|mismatch)/i, 'and the JVM did not refuse it');
});
