import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePorts } from '../../core/net/free-port.ts';
import { loadConfig } from '../../core/config.ts';
import { classArchive, ensureKafkaJars, startLocalKafka, writeClassArchive } from '../../core/kafka/local-broker.ts';

const scratch = mkdtempSync(join(tmpdir(), 'sluice-class-archive-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
const { cacheDir } = loadConfig({ ...process.env, KAFKA_BROKERS: undefined });
const libs = ensureKafkaJars(cacheDir);

t.test('the class archive is written once, for this JVM, and the JVM maps it', async (t) => {
  const { path } = classArchive(libs);
  t.match(path, /classes-[0-9a-f]{12}\.jsa$/, 'named by the JVM build');
  // Set aside (not deleted) while this test writes its own: brokers of other tests may map it.
  const aside = `${path}.aside-${process.pid}`;
  if (existsSync(path)) renameSync(path, aside);
  t.teardown(() => {
    if (existsSync(aside)) renameSync(aside, path);
  });
  t.same(classArchive(libs).flags, [], 'without one, a broker starts without one');
  t.equal(await writeClassArchive(cacheDir), path);
  t.ok(existsSync(path), 'written');
  // -Xshare:on fails instead of starting without the archive: the JVM maps it.
  const check = spawnSync('java', [`-XX:SharedArchiveFile=${path}`, '-Xshare:on', '-cp', `${libs}/*`, '-version'], {
    encoding: 'utf8',
  });
  t.equal(check.status, 0, `this JVM maps the archive${check.status === 0 ? '' : `\n${check.stderr}`}`);
  t.equal(await writeClassArchive(cacheDir), path, 'a second call finds it');
  t.same(classArchive(libs).flags, [`-XX:SharedArchiveFile=${path}`]);

  const broker = await startLocalKafka({
    cacheDir,
    port: await freePorts(2),
    dataDir: join(scratch, 'broker'),
    fresh: true,
  });
  t.teardown(() => broker.stop());
  const pid = spawnSync('pgrep', ['-f', `${join(scratch, 'broker')}/server.properties`], {
    encoding: 'utf8',
  }).stdout.trim();
  const cmdline = readFileSync(`/proc/${pid.split('\n')[0]}/cmdline`, 'utf8');
  t.match(cmdline, `-XX:SharedArchiveFile=${path}`, 'a broker starts with it');
});
