/**
 * A real Apache Kafka broker (KRaft, combined broker+controller) run by Sluice itself: the jars
 * come from Maven Central through `mvn dependency:copy-dependencies` into a cache directory, and
 * Java 17 runs `kafka.Kafka`. Used by `sluice kafka`, by `sluice start` when KAFKA_BROKERS is not
 * set, and by the tests.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { join } from 'node:path';
import { SluiceBaseError } from '../errors.ts';
import { freePorts } from '../net/free-port.ts';
import { projectPath } from '../paths.ts';
import { runCommand } from '../run-command.ts';

const POM = projectPath('scripts/kafka/pom.xml');
export const KAFKA_VERSION = '4.1.1';

export type LocalKafkaErrorCode = 'JAVA_MISSING' | 'MAVEN_MISSING' | 'JARS_FAILED' | 'FORMAT_FAILED' | 'START_FAILED';

export class LocalKafkaError extends SluiceBaseError<LocalKafkaErrorCode> {
  constructor(code: LocalKafkaErrorCode, message: string) {
    super(code, message);
  }
}

function has(cmd: string, args: string[]): boolean {
  const r = spawnSync(cmd, args, { stdio: 'ignore' });
  return r.status === 0;
}

let jdk: string | null = null;
/** The digest of `java -version`'s output: which JVM build an archive was written by. */
function jdkDigest(): string {
  if (jdk !== null) return jdk;
  const version = spawnSync('java', ['-version'], { encoding: 'utf8' });
  jdk = createHash('sha256').update(`${version.stdout}${version.stderr}`).digest('hex').slice(0, 12);
  return jdk;
}

/**
 * Class data sharing for the broker JVM: the classes a broker loads, written once into the cache
 * by `writeClassArchive` (`-XX:ArchiveClassesAtExit`, JDK 13+) and mapped by every later start
 * (`-XX:SharedArchiveFile`). Measured on this project's 2-core machine kind, a broker without it is
 * ready in 5.0 s using 4.6 CPU-s and formats its storage with 1.8; with it, 2.4 s using 2.3, and
 * 0.9. The archive is valid for one JVM build only, so its name carries the digest of `java
 * -version`.
 */
export function classArchive(libs: string): { path: string; flags: string[] } {
  const path = join(libs, '..', `classes-${jdkDigest()}.jsa`);
  return { path, flags: existsSync(path) ? [`-XX:SharedArchiveFile=${path}`] : [] };
}

/**
 * Writes the broker's class archive unless this JVM has one: a broker on free ports in a scratch
 * directory, started and stopped once (about 10 s). Written at the broker's exit, which under load
 * can take longer than a test's broker is given to stop, so it is made here, before any test (by
 * `npm test` and `sluice kafka --fetch-only`), never by a broker that serves. An archive the JVM
 * will not map (a partial write) is removed, and a failure is logged, not thrown: brokers then
 * start without one.
 */
export async function writeClassArchive(
  cacheDir: string,
  log: (line: string) => void = () => {},
): Promise<string | null> {
  try {
    return await writeArchive(cacheDir, log);
  } catch (err) {
    // Only a start-up cost rides on the archive: without one, brokers start as they did.
    log(`no Kafka class archive (${(err as Error).message}); brokers start without one`);
    return null;
  }
}

async function writeArchive(cacheDir: string, log: (line: string) => void): Promise<string | null> {
  const libs = ensureKafkaJars(cacheDir, log);
  const { path } = classArchive(libs);
  if (existsSync(path)) return path;
  const pending = `${path}.${process.pid}-${randomBytes(4).toString('hex')}`;
  const dataDir = join(cacheDir, `kafka-class-archive-${process.pid}`);
  try {
    const port = await freePorts(2);
    const k = await startLocalKafka({
      cacheDir,
      port,
      dataDir,
      fresh: true,
      jvmFlags: [`-XX:ArchiveClassesAtExit=${pending}`],
      stopGraceMs: 120_000,
    });
    await k.stop();
    // The archive holds for the class path it was written with: checked with the brokers' own.
    const check = spawnSync(
      'java',
      [`-XX:SharedArchiveFile=${pending}`, '-Xshare:on', '-cp', `${libs}/*`, '-version'],
      {
        stdio: 'ignore',
      },
    );
    if (check.status !== 0 || !existsSync(pending)) return null;
    renameSync(pending, path);
    return path;
  } finally {
    rmSync(pending, { force: true });
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Resolves the broker jars into `<cacheDir>/kafka-<version>/libs` once; later calls use the cache. */
export function ensureKafkaJars(cacheDir: string, log: (line: string) => void = () => {}): string {
  const libs = join(cacheDir, `kafka-${KAFKA_VERSION}`, 'libs');
  const marker = join(libs, '.complete');
  if (existsSync(marker)) return libs;
  if (!has('mvn', ['-v'])) {
    throw new LocalKafkaError(
      'MAVEN_MISSING',
      'Maven (mvn) is not installed: install it (apt-get install maven) or set KAFKA_BROKERS to an existing cluster',
    );
  }
  log(`resolving Apache Kafka ${KAFKA_VERSION} jars from Maven Central into ${libs} (once)`);
  mkdirSync(libs, { recursive: true });
  const r = spawnSync(
    'mvn',
    [
      '-q',
      '-B',
      '-f',
      POM,
      'dependency:copy-dependencies',
      `-DoutputDirectory=${libs}`,
      '-DincludeScope=runtime',
      `-Dkafka.version=${KAFKA_VERSION}`,
    ],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      encoding: 'utf8',
    },
  );
  if (r.status !== 0) {
    throw new LocalKafkaError(
      'JARS_FAILED',
      `mvn could not resolve the Kafka jars: ${(r.stdout + r.stderr).trim().split('\n').slice(-5).join(' | ')}`,
    );
  }
  writeFileSync(marker, new Date().toISOString());
  return libs;
}

export interface LocalKafkaOptions {
  cacheDir: string;
  /** The first broker's port; broker i listens on port + 2i and its controller on port + 2i + 1. */
  port?: number;
  /** The first controller's port instead of port + 1: controller i listens on controllerPort + i. */
  controllerPort?: number;
  /** Brokers in the cluster (each also a KRaft controller); 3 gives replication factor 3, min.insync.replicas 2. */
  nodes?: number;
  /** Where the log segments live (one sub-directory per broker when nodes > 1); wiped first when `fresh` is true. */
  dataDir?: string;
  fresh?: boolean;
  heapMb?: number;
  log?: (line: string) => void;
  startTimeoutMs?: number;
  /** More JVM flags for every broker (writeClassArchive's). */
  jvmFlags?: string[];
  /** How long a stopped broker has to exit before it is killed (default 10 s). */
  stopGraceMs?: number;
}

/** One broker of the local cluster, for fault tests: stop it (gracefully or not) and start it again. */
export interface LocalKafkaNode {
  id: number;
  port: number;
  readonly running: boolean;
  stop(signal?: 'SIGTERM' | 'SIGKILL'): Promise<void>;
  start(): Promise<void>;
}

export interface LocalKafka {
  brokers: string[];
  port: number;
  dataDir: string;
  nodes: LocalKafkaNode[];
  /** Stops every broker; SIGKILL for one whose data goes with it (no controlled shutdown to wait for). */
  stop(signal?: 'SIGTERM' | 'SIGKILL'): Promise<void>;
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** Whether something holds the port on 127.0.0.1 (a listener anywhere on it, or a bound socket). */
function portBusy(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(true));
    s.listen({ port, host: '127.0.0.1', exclusive: true }, () => s.close(() => resolve(false)));
  });
}

const CLUSTER_ID = 'c2x1aWNlLWxvY2FsLWthZmthMQ'; // fixed: a local data dir can be reused across runs

function serverProperties(id: number, port: number, n: number, controllerPorts: number[], dataDir: string): string {
  const replication = Math.min(3, n);
  const minIsr = n >= 3 ? 2 : 1;
  const voters = controllerPorts.map((p, i) => `${i + 1}@127.0.0.1:${p}`).join(',');
  return [
    'process.roles=broker,controller',
    `node.id=${id}`,
    `controller.quorum.voters=${voters}`,
    `listeners=PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${controllerPorts[id - 1]}`,
    `advertised.listeners=PLAINTEXT://127.0.0.1:${port}`,
    'controller.listener.names=CONTROLLER',
    'inter.broker.listener.name=PLAINTEXT',
    'listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT',
    `log.dirs=${join(dataDir, 'kraft')}`,
    'num.partitions=6',
    `default.replication.factor=${replication}`,
    `min.insync.replicas=${minIsr}`,
    `offsets.topic.replication.factor=${replication}`,
    'offsets.topic.num.partitions=6',
    `transaction.state.log.replication.factor=${replication}`,
    `transaction.state.log.min.isr=${minIsr}`,
    `share.coordinator.state.topic.replication.factor=${replication}`,
    `share.coordinator.state.topic.min.isr=${minIsr}`,
    'group.initial.rebalance.delay.ms=0',
    'auto.create.topics.enable=false',
    'log.retention.check.interval.ms=10000',
    'log.segment.delete.delay.ms=1000',
    // A restarted broker rejoins the ISR quickly on this small, local cluster, and a dead one is
    // noticed (and its partitions led elsewhere) in ~3 s instead of the default 9. A single broker
    // has nobody to lead in its place: on a starved machine (a busy test suite) its own controller
    // fenced it after 3 s of late heartbeats and every client stalled until it came back, so alone
    // it gets 30 s.
    'replica.lag.time.max.ms=10000',
    `broker.session.timeout.ms=${n === 1 ? 30_000 : 3000}`,
    // Alone, it has no failover to hurry: a heartbeat every 2 s (Kafka's default; 500 ms in a
    // cluster here) and a no-op metadata record every 5 s (default 500 ms) halve an idle broker's
    // CPU (3.5 % of a core to 1.8 %, 20 s samples after start).
    `broker.heartbeat.interval.ms=${n === 1 ? 2000 : 500}`,
    ...(n === 1 ? ['metadata.max.idle.interval.ms=5000'] : []),
    '',
  ].join('\n');
}

export async function startLocalKafka(opts: LocalKafkaOptions): Promise<LocalKafka> {
  const log = opts.log ?? (() => {});
  if (!has('java', ['-version'])) {
    throw new LocalKafkaError(
      'JAVA_MISSING',
      'Java is not installed: install a Java 17 runtime (apt-get install openjdk-17-jre-headless) ' +
        'or set KAFKA_BROKERS to an existing cluster',
    );
  }
  const libs = ensureKafkaJars(opts.cacheDir, log);
  const base = opts.port ?? 9092;
  const n = opts.nodes ?? 1;
  if (!Number.isInteger(n) || n < 1 || n > 9)
    throw new LocalKafkaError('START_FAILED', `a local cluster has 1 to 9 brokers, not ${n}`);
  const controllerPorts = Array.from({ length: n }, (_, i) =>
    opts.controllerPort !== undefined ? opts.controllerPort + i : base + 2 * i + 1,
  );
  for (let i = 0; i < n; i++) {
    const broker = base + 2 * i;
    if (controllerPorts.includes(broker))
      throw new LocalKafkaError(
        'START_FAILED',
        `port ${broker} would serve both a broker and a controller: pick another --controller-port`,
      );
    for (const [p, what] of [
      [broker, `broker ${i + 1}'s port (--port)`],
      [
        controllerPorts[i],
        `controller ${i + 1}'s port ` +
          `(--controller-port${opts.controllerPort === undefined ? `, default --port + ${2 * i + 1}` : ''})`,
      ],
    ] as const) {
      if ((await portBusy(p)) || (await portOpen(p)))
        throw new LocalKafkaError(
          'START_FAILED',
          `port ${p} on 127.0.0.1, ${what}, is already in use: ` +
            'stop what holds it, pick another port, or point KAFKA_BROKERS at a running cluster',
        );
    }
  }
  const dataDir = opts.dataDir ?? join(opts.cacheDir, `kafka-data-${base}`);
  if (opts.fresh) rmSync(dataDir, { recursive: true, force: true });
  const deadline = () => Date.now() + (opts.startTimeoutMs ?? 90_000);
  const nodes = Array.from({ length: n }, (_, i) =>
    brokerNode(
      i + 1,
      base + 2 * i,
      n === 1 ? dataDir : join(dataDir, `node-${i + 1}`),
      serverPropertiesFor(i),
      libs,
      opts.heapMb ?? 512,
      { jvmFlags: opts.jvmFlags ?? [], stopGraceMs: opts.stopGraceMs ?? 10_000 },
    ),
  );
  function serverPropertiesFor(i: number) {
    return (dir: string) => serverProperties(i + 1, base + 2 * i, n, controllerPorts, dir);
  }
  // A KRaft quorum elects a controller only once a majority runs: start them together.
  await Promise.all(nodes.map((node) => node.launch(deadline())));
  await waitForController(base, deadline(), () => nodes.every((node) => !node.running));
  return {
    brokers: nodes.map((node) => `127.0.0.1:${node.port}`),
    port: base,
    dataDir,
    nodes,
    async stop(signal) {
      await Promise.all(nodes.map((node) => node.stop(signal)));
    },
  };
}

/**
 * A broker's files under `dataDir`: its server.properties, and log4j settings that write warnings to
 * logs/server.log. `java`: the arguments of a java command that runs a Kafka class of `libs` with
 * them (the class and its arguments follow).
 */
export function brokerFiles(
  dataDir: string,
  properties: string,
  libs: string,
  initialHeapMb: number,
  heapMb: number,
): { props: string; logDir: string; java: string[] } {
  const logDir = join(dataDir, 'logs');
  mkdirSync(logDir, { recursive: true });
  const props = join(dataDir, 'server.properties');
  writeFileSync(props, properties);
  const log4j = join(dataDir, 'log4j2.properties');
  writeFileSync(
    log4j,
    [
      'status = warn',
      'appender.file.type = File',
      'appender.file.name = file',
      `appender.file.fileName = ${join(logDir, 'server.log')}`,
      'appender.file.layout.type = PatternLayout',
      'appender.file.layout.pattern = [%d] %p %m (%c)%n',
      'rootLogger.level = warn',
      'rootLogger.appenderRef.file.ref = file',
      '',
    ].join('\n'),
  );
  const java = [
    `-Xms${initialHeapMb}m`,
    `-Xmx${heapMb}m`,
    '-XX:+UseG1GC',
    '-XX:TieredStopAtLevel=1',
    `-Dlog4j2.configurationFile=${log4j}`,
    '-cp',
    `${libs}/*`,
  ];
  return { props, logDir, java };
}

/**
 * Formats a broker's KRaft storage under `dataDir` for `clusterId`, unless it already is. A JVM of
 * its own, run without blocking: a cluster's brokers format side by side (one after another, three
 * took ~20 s of a busy machine's start).
 */
export async function formatStorage(dataDir: string, java: string[], props: string, clusterId: string): Promise<void> {
  if (existsSync(join(dataDir, 'kraft', 'meta.properties'))) return;
  const f = await runCommand('java', [
    ...java,
    'kafka.tools.StorageTool',
    'format',
    '-t',
    clusterId,
    '-c',
    props,
    '--ignore-formatted',
  ]);
  if (f.code !== 0) throw new LocalKafkaError('FORMAT_FAILED', `formatting Kafka storage failed: ${f.output.trim()}`);
}

/** One broker process: written config, launched, stoppable and restartable. */
function brokerNode(
  id: number,
  port: number,
  dataDir: string,
  properties: (dataDir: string) => string,
  libs: string,
  heapMb: number,
  more: { jvmFlags: string[]; stopGraceMs: number },
): LocalKafkaNode & { launch(deadline: number): Promise<void> } {
  const { props, logDir, java: javaBase } = brokerFiles(dataDir, properties(dataDir), libs, 256, heapMb);
  let child: ChildProcess | null = null;
  let exitPromise: Promise<void> = Promise.resolve();
  const onParentExit = () => child?.kill('SIGKILL');
  const node = {
    id,
    port,
    get running() {
      return child !== null;
    },
    async launch(deadline: number): Promise<void> {
      if (child) return;
      const cds = classArchive(libs);
      await formatStorage(dataDir, [...cds.flags, ...javaBase], props, CLUSTER_ID);
      if (child) return; // launched meanwhile
      const out = openSync(join(logDir, 'stdout.log'), 'a');
      const c = spawn('java', [...cds.flags, ...more.jvmFlags, ...javaBase, 'kafka.Kafka', props], {
        stdio: ['ignore', out, out],
        detached: false,
      });
      child = c;
      exitPromise = new Promise<void>((resolve) =>
        c.once('exit', () => {
          if (child === c) child = null;
          resolve();
        }),
      );
      // Stop the broker with us when the parent dies without calling stop().
      process.once('exit', onParentExit);
      while (!(await portOpen(port))) {
        if (child !== c)
          throw new LocalKafkaError(
            'START_FAILED',
            `Kafka broker ${id} exited during start-up${bindFailure(logDir)}; ` +
              `see ${join(logDir, 'stdout.log')} and server.log`,
          );
        if (Date.now() > deadline) {
          c.kill('SIGKILL');
          throw new LocalKafkaError(
            'START_FAILED',
            `Kafka broker ${id} did not listen on 127.0.0.1:${port} in time; see ${logDir}`,
          );
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    },
    start(): Promise<void> {
      return node.launch(Date.now() + 90_000);
    },
    async stop(signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM'): Promise<void> {
      process.removeListener('exit', onParentExit);
      const c = child;
      if (!c) return;
      c.kill(signal);
      const timer = setTimeout(() => c.kill('SIGKILL'), more.stopGraceMs);
      await exitPromise;
      clearTimeout(timer);
    },
  };
  return node;
}

/**
 * ": port P is already in use" when the broker's logs say it could not bind (taken between the check and the start).
 */
function bindFailure(logDir: string): string {
  for (const f of ['stdout.log', 'server.log']) {
    const file = join(logDir, f);
    const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
    const m =
      /Socket server failed to bind to [^:\s]*:(\d+)/.exec(text) ?? /bind.*?:(\d+).*Address already in use/i.exec(text);
    if (m) return `: port ${m[1]} on 127.0.0.1 is already in use`;
  }
  return '';
}

/** The port accepting connections is not enough: wait until the cluster names a controller. */
async function waitForController(port: number, deadline: number, exited: () => boolean): Promise<void> {
  const { Kafka, logLevel } = await import('kafkajs');
  const admin = new Kafka({
    brokers: [`127.0.0.1:${port}`],
    logLevel: logLevel.NOTHING,
    retry: { retries: 0 },
  }).admin();
  try {
    for (;;) {
      try {
        await admin.connect();
        const cluster = await admin.describeCluster();
        if (cluster.controller !== null && cluster.controller >= 0) return;
      } catch {
        /* not ready yet */
      }
      if (exited()) throw new LocalKafkaError('START_FAILED', 'the Kafka broker exited during start-up');
      if (Date.now() > deadline)
        throw new LocalKafkaError('START_FAILED', 'the Kafka broker did not name a controller in time');
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

/** Lists what is in the jar cache (for `sluice kafka --fetch-only`). */
export function jarCount(libs: string): number {
  return readdirSync(libs).filter((f) => f.endsWith('.jar')).length;
}
