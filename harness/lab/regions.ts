/**
 * Three simulated regions on one machine (see docs/operations.md, "Regions"): per region a network
 * namespace with one Kafka broker (`broker.rack` = the region, KRaft voter), one toxiproxy, one
 * `sluice ingress` and one `sluice dispatcher` (`SLUICE_KAFKA_RACK` = the region). Every path that
 * crosses regions goes through the toxiproxy of the region it starts in, with a latency toxic on
 * each direction; paths within a region are direct.
 *
 * Kafka has one client listener per region (L_A, L_B, L_C). Broker X's listener L_Y is advertised
 * as X's own address when Y = X, else as the toxiproxy in Y that forwards to it; a broker uses its
 * own region's listener between brokers (`inter.broker.listener.name`), and the KRaft voters are
 * reached the same way, so replication and the quorum cross the proxies too.
 *
 *   const lab = await startLab({ oneWayMs: 40, log: console.log });
 *   lab.region('b').base        // http://10.231.x.12:8080, b's ingress
 *   await lab.cut('c');         // every proxy into and out of c disabled
 *   await lab.stop();           // also on exit, signals and errors
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../../core/config.ts';
import { brokerFiles, classArchive, ensureKafkaJars, formatStorage } from '../../core/kafka/local-broker.ts';
import { createLabNet, sweepStaleLabs, whyNoNamespaces, type LabNet } from './net.ts';
import { toxiproxyApi, toxiproxyServer, type ToxiproxyApi } from './toxiproxy.ts';
import { PROJECT_ROOT } from '../../core/paths.ts';

const ROOT = PROJECT_ROOT;
const SLUICE = join(ROOT, 'bin', 'sluice.js');
export const REGIONS = ['a', 'b', 'c'] as const;
export type Region = (typeof REGIONS)[number];

const CONTROLLER_PORT = 9090;
/** Broker X's listener for clients (and brokers) of region Y: 9091 + index of Y. */
const listenerPort = (y: Region) => 9091 + REGIONS.indexOf(y);
/** In region Y, the toxiproxy port that reaches broker X's listener L_Y, and X's controller. */
const kafkaProxyPort = (x: Region) => 19101 + REGIONS.indexOf(x);
const controllerProxyPort = (x: Region) => 19201 + REGIONS.indexOf(x);
/** In region Y, the toxiproxy port that reaches region X's ingress peer port (revocation pushes). */
const peerProxyPort = (x: Region) => 19301 + REGIONS.indexOf(x);
const PEER_PORT = 8090;
const TOXI_API = 8474;
const INGRESS_PORT = 8080;
const INGRESS_ADMIN = 9464;
const DISPATCHER_ADMIN = 9465;
const CLUSTER_ID = 'c2x1aWNlLXJlZ2lvbnMtbGFiMQ';

export interface LabOptions {
  /** Delay on each direction of every cross-region path (RTT is twice this). */
  oneWayMs: number;
  workDir: string;
  topicPrefix: string;
  /** Extra environment for every Sluice process. */
  env?: Record<string, string>;
  log?: (line: string) => void;
  heapMb?: number;
  /** Extra broker settings (server.properties lines `key=value`), e.g. replica.fetch.wait.max.ms=50. */
  brokerProps?: string[];
  /** Ingress nodes push revocations to the other regions' (SLUICE_PEERS); default true. */
  push?: boolean;
  /** SLUICE_LOG_LEVEL of every Sluice process (default warn; info names each group join and its partitions). */
  logLevel?: string;
}

export interface LabRegion {
  name: Region;
  ip: string;
  /** This region's ingress. */
  base: string;
  ingressAdmin: string;
  dispatcherAdmin: string;
  /** KAFKA_BROKERS for a client in this region. */
  brokers: string[];
  toxi: ToxiproxyApi;
}

export interface Lab {
  net: LabNet;
  regions: LabRegion[];
  region(r: Region): LabRegion;
  /** The issuer every node shares (region a's ingress). */
  issuer: string;
  /** Sets every cross-region proxy's one-way delay. */
  setLatency(oneWayMs: number): Promise<void>;
  /** Disables (or re-enables) every proxy into and out of a region. */
  cut(r: Region, cut?: boolean): Promise<void>;
  killBroker(r: Region): Promise<void>;
  startBroker(r: Region): Promise<void>;
  /** Environment of a Sluice process in a region (for the lab's own clients run in the root namespace). */
  sluiceEnv(r: Region): Record<string, string>;
  stop(): Promise<void>;
}

interface Proc {
  name: string;
  child: ChildProcess;
  exited: Promise<void>;
  done: boolean;
}

/** Throws a clear error when this process cannot build namespaces (not root, no `ip netns`). */
export function assertCanRunLab(): void {
  const why = whyNoNamespaces();
  if (why) throw new Error(why);
}

export async function startLab(opts: LabOptions): Promise<Lab> {
  const log = opts.log ?? (() => {});
  assertCanRunLab();
  sweepStaleLabs();
  const config = loadConfig({});
  const libs = ensureKafkaJars(config.cacheDir, log);
  const toxiBin = toxiproxyServer(log);
  const net = createLabNet(REGIONS);
  const procs: Proc[] = [];
  const brokerProcs = new Map<Region, Proc>();
  let stopped = false;
  // However the process ends, nothing of the lab stays: children killed, namespaces deleted.
  const onExit = () => {
    for (const p of procs) if (!p.done) p.child.kill('SIGKILL');
    net.destroy();
  };
  process.once('exit', onExit);
  // A signal ends the process without 'exit' handlers: clean up first (a test runner's timeout).
  const onSignal = (signal: NodeJS.Signals) => {
    onExit();
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  function run(name: string, region: Region, argv: string[], env: NodeJS.ProcessEnv = process.env): Proc {
    const logDir = join(opts.workDir, 'logs');
    mkdirSync(logDir, { recursive: true });
    const out = openSync(join(logDir, `${name}.log`), 'a');
    // setpriv: the child gets SIGKILL when this process dies, however it dies (a runner's SIGKILL).
    const wrapped = [...net.exec(region), 'setpriv', '--pdeathsig', 'KILL', '--', ...argv];
    const child = spawn(wrapped[0], wrapped.slice(1), {
      stdio: ['ignore', out, out],
      env,
    });
    const p: Proc = { name, child, done: false, exited: Promise.resolve() };
    p.exited = new Promise((res) =>
      child.once('exit', () => {
        p.done = true;
        res();
      }),
    );
    procs.push(p);
    return p;
  }

  async function stopProc(p: Proc, signal: NodeJS.Signals = 'SIGTERM', graceMs = 10_000) {
    if (p.done) return;
    p.child.kill(signal);
    const t = setTimeout(() => p.child.kill('SIGKILL'), graceMs);
    await p.exited;
    clearTimeout(t);
  }

  const regionOf = (r: Region): LabRegion => ({
    name: r,
    ip: net.ip(r),
    base: `http://${net.ip(r)}:${INGRESS_PORT}`,
    ingressAdmin: `http://${net.ip(r)}:${INGRESS_ADMIN}`,
    dispatcherAdmin: `http://${net.ip(r)}:${DISPATCHER_ADMIN}`,
    brokers: REGIONS.map((x) => (x === r ? `${net.ip(r)}:${listenerPort(r)}` : `${net.ip(r)}:${kafkaProxyPort(x)}`)),
    toxi: toxiproxyApi(net.ip(r), TOXI_API),
  });
  const regions = REGIONS.map(regionOf);
  const region = (r: Region) => regions[REGIONS.indexOf(r)];
  const issuer = `${region('a').base}`;

  const lab: Lab = {
    net,
    regions,
    region,
    issuer,
    async setLatency(ms) {
      for (const reg of regions) for (const name of reg.toxi.names()) await reg.toxi.latency(name, ms);
    },
    async cut(r, cut = true) {
      for (const reg of regions)
        for (const name of reg.toxi.names())
          if (reg.name === r || name.endsWith(`-${r}`)) await reg.toxi.enable(name, !cut);
    },
    async killBroker(r) {
      const p = brokerProcs.get(r);
      if (p) await stopProc(p, 'SIGKILL');
    },
    async startBroker(r) {
      await launchBroker(r);
    },
    sluiceEnv,
    async stop() {
      if (stopped) return;
      stopped = true;
      const sluice = procs.filter((p) => !p.name.startsWith('kafka') && !p.name.startsWith('toxiproxy'));
      await Promise.all(sluice.map((p) => stopProc(p, 'SIGTERM', 8000)));
      await Promise.all(procs.map((p) => stopProc(p, 'SIGKILL')));
      process.removeListener('exit', onExit);
      process.removeListener('SIGINT', onSignal);
      process.removeListener('SIGTERM', onSignal);
      net.destroy();
    },
  };

  function sluiceEnv(r: Region): Record<string, string> {
    return {
      KAFKA_BROKERS: region(r).brokers.join(','),
      SLUICE_KAFKA_RACK: r,
      SLUICE_REGION: r,
      SLUICE_TOPIC_PREFIX: opts.topicPrefix,
      SLUICE_ISSUER: issuer,
      SLUICE_LOG_LEVEL: opts.logLevel ?? 'warn',
      SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
      SLUICE_TOPIC_PARTITIONS: '3',
      // Listeners on the namespaces' addresses and the peer port need a key of the lab's own.
      SLUICE_MASTER_KEY: 'sluice-regions-lab-master-key-not-a-secret',
      ...opts.env,
    };
  }

  function brokerProperties(r: Region, dataDir: string): string {
    const id = REGIONS.indexOf(r) + 1;
    const me = net.ip(r);
    const voters = REGIONS.map(
      (x, i) => `${i + 1}@${x === r ? `${me}:${CONTROLLER_PORT}` : `${me}:${controllerProxyPort(x)}`}`,
    ).join(',');
    const name = (y: Region) => `L_${y.toUpperCase()}`;
    const listeners = REGIONS.map((y) => `${name(y)}://${me}:${listenerPort(y)}`);
    const advertised = REGIONS.map(
      (y) => `${name(y)}://${y === r ? `${me}:${listenerPort(y)}` : `${net.ip(y)}:${kafkaProxyPort(r)}`}`,
    );
    return [
      'process.roles=broker,controller',
      `node.id=${id}`,
      `controller.quorum.voters=${voters}`,
      `listeners=${[...listeners, `CONTROLLER://${me}:${CONTROLLER_PORT}`].join(',')}`,
      `advertised.listeners=${advertised.join(',')}`,
      'controller.listener.names=CONTROLLER',
      `inter.broker.listener.name=${name(r)}`,
      `listener.security.protocol.map=${[...REGIONS.map(name), 'CONTROLLER'].map((l) => `${l}:PLAINTEXT`).join(',')}`,
      `broker.rack=${r}`,
      'replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector',
      `log.dirs=${join(dataDir, 'kraft')}`,
      'num.partitions=3',
      'default.replication.factor=3',
      'min.insync.replicas=2',
      'offsets.topic.replication.factor=3',
      'offsets.topic.num.partitions=6',
      'transaction.state.log.replication.factor=3',
      'transaction.state.log.min.isr=2',
      'transaction.state.log.num.partitions=6',
      'share.coordinator.state.topic.replication.factor=3',
      'share.coordinator.state.topic.min.isr=2',
      'group.initial.rebalance.delay.ms=0',
      'auto.create.topics.enable=false',
      // As the local cluster (core/kafka/local-broker.ts): a lost broker is fenced in ~3 s and
      // leaves the ISRs after replica.lag.time.max.ms, so acks=all writes resume with 2 of 3.
      'replica.lag.time.max.ms=5000',
      'broker.session.timeout.ms=3000',
      'broker.heartbeat.interval.ms=500',
      ...(opts.brokerProps ?? []),
      '',
    ].join('\n');
  }

  async function launchBroker(r: Region) {
    const dataDir = join(opts.workDir, `kafka-${r}`);
    const { props, java: base } = brokerFiles(dataDir, brokerProperties(r, dataDir), libs, 128, opts.heapMb ?? 384);
    // The brokers' class archive when there is one (npm test makes it first): half the CPU of a
    // broker's start and of its storage format (core/kafka/local-broker.ts).
    const java = [...classArchive(libs).flags, ...base];
    await formatStorage(dataDir, java, props, CLUSTER_ID);
    brokerProcs.set(r, run(`kafka-${r}`, r, ['java', ...java, 'kafka.Kafka', props]));
  }

  try {
    for (const r of REGIONS) {
      run(`toxiproxy-${r}`, r, [toxiBin, '-host', net.ip(r), '-port', String(TOXI_API)]);
    }
    for (const reg of regions) await waitHttp(`http://${reg.ip}:${TOXI_API}/version`, 15_000, 'toxiproxy');
    for (const reg of regions)
      for (const x of REGIONS) {
        if (x === reg.name) continue;
        await reg.toxi.create({
          name: `k-${x}`,
          listen: `${reg.ip}:${kafkaProxyPort(x)}`,
          upstream: `${net.ip(x)}:${listenerPort(reg.name)}`,
        });
        await reg.toxi.create({
          name: `p-${x}`,
          listen: `${reg.ip}:${peerProxyPort(x)}`,
          upstream: `${net.ip(x)}:${PEER_PORT}`,
        });
        await reg.toxi.create({
          name: `ctl-${x}`,
          listen: `${reg.ip}:${controllerProxyPort(x)}`,
          upstream: `${net.ip(x)}:${CONTROLLER_PORT}`,
        });
      }
    // The regions start with no delay between them, then get theirs: what the lab measures comes
    // after the start, and a start across 80 ms RTT (every group join, topic check and view
    // catch-up a round trip or more) took ~30 s instead of ~10.
    log('starting 3 Kafka brokers (racks a, b, c)');
    // One after another, a first: started together, any of the three could end up the KRaft
    // controller, and the cut of c's (one run of it alone) held a and b's writes back 19 s.
    for (const r of REGIONS) await launchBroker(r);
    await waitForCluster(region('a').brokers, procs, 120_000);
    log('starting sluice ingress and dispatcher in each region');
    const ingress = (r: Region) =>
      run(`ingress-${r}`, r, [process.execPath, SLUICE, 'ingress', '--port', String(INGRESS_PORT)], {
        ...process.env,
        ...sluiceEnv(r),
        SLUICE_HOST: net.ip(r),
        SLUICE_ADMIN_HOST: net.ip(r),
        SLUICE_ADMIN_PORT: String(INGRESS_ADMIN),
        SLUICE_DATA_DIR: join(opts.workDir, `state-ingress-${r}`),
        SLUICE_PEER_PORT: String(PEER_PORT),
        SLUICE_PEER_HOST: net.ip(r),
        SLUICE_PEERS:
          opts.push === false
            ? ''
            : REGIONS.filter((x) => x !== r)
                .map((x) => `http://${net.ip(r)}:${peerProxyPort(x)}`)
                .join(','),
      });
    const dispatcher = (r: Region) =>
      run(`dispatcher-${r}`, r, [process.execPath, SLUICE, 'dispatcher'], {
        ...process.env,
        ...sluiceEnv(r),
        SLUICE_HOST: net.ip(r),
        SLUICE_PORT: '0',
        SLUICE_ADMIN_HOST: net.ip(r),
        SLUICE_ADMIN_PORT: String(DISPATCHER_ADMIN),
        SLUICE_DATA_DIR: join(opts.workDir, `state-dispatcher-${r}`),
      });
    // Region a's ingress creates the topics and records the issuer; the others join it.
    const first = ingress('a');
    await waitHttp(`${region('a').ingressAdmin}/readyz`, 120_000, 'ingress a', first);
    const rest = [ingress('b'), ingress('c'), dispatcher('a'), dispatcher('b'), dispatcher('c')];
    await Promise.all([
      waitHttp(`${region('b').ingressAdmin}/readyz`, 120_000, 'ingress b', rest[0]),
      waitHttp(`${region('c').ingressAdmin}/readyz`, 120_000, 'ingress c', rest[1]),
      ...REGIONS.map((r, i) =>
        waitHttp(`${region(r).dispatcherAdmin}/readyz`, 120_000, `dispatcher ${r}`, rest[2 + i]),
      ),
    ]);
    await lab.setLatency(opts.oneWayMs);
    log(`all regions ready; ${opts.oneWayMs} ms each way between regions from now on`);
  } catch (err) {
    await lab.stop().catch(() => {});
    throw err;
  }
  return lab;
}

async function waitHttp(url: string, timeoutMs: number, what: string, proc?: Proc): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await fetch(url, { signal: AbortSignal.timeout(2000) }).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) return;
    if (proc?.done) throw new Error(`${what} exited during start-up (see its log in the lab's logs/)`);
    if (Date.now() > deadline) throw new Error(`${what} was not ready within ${timeoutMs} ms (${url})`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function waitForCluster(brokers: string[], procs: Proc[], timeoutMs: number): Promise<void> {
  const { Kafka, logLevel } = await import('kafkajs');
  const admin = new Kafka({ brokers, logLevel: logLevel.NOTHING, retry: { retries: 0 } }).admin();
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      try {
        await admin.connect();
        const cluster = await admin.describeCluster();
        if (cluster.controller !== null && cluster.controller >= 0 && cluster.brokers.length === 3) return;
      } catch {
        /* not yet */
      }
      const dead = procs.find((p) => p.name.startsWith('kafka') && p.done);
      if (dead) throw new Error(`${dead.name} exited during start-up (see its server.log)`);
      if (Date.now() > deadline) throw new Error('the 3 brokers did not form a cluster in time');
      await new Promise((r) => setTimeout(r, 500));
    }
  } finally {
    await admin.disconnect().catch(() => {});
  }
}
