/** What the benches against Kafka and Sluice share: work directory, children, broker, topic prefix, shutdown. */
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../core/net/free-port.ts';
import { benchCommand } from './results-section.ts';
import { Children, type Launched } from './children.ts';
import { ROOT, runBench, say } from './cli.ts';
import { rpc } from './ipc.ts';
import { benchKafka, dropBenchTopics, type BenchKafka } from './kafka.ts';
import type { LoadReply, LoadRequest } from './load.ts';
import type { ReceiverReply, ReceiverRequest } from './receiver.ts';
import { Scratch } from './scratch.ts';
import { waitReady } from './sluice.ts';

export class BenchRun {
  readonly scratch: Scratch;
  readonly children: Children;
  readonly startedAt = new Date();
  readonly load1 = loadavg()[0];
  /** The topic prefix: `<stem>-<random>`. */
  readonly prefix: string;
  /** bin/sluice.js of the checkout measured. */
  readonly sluice: string;
  kafka: BenchKafka = { brokers: [], external: false, launched: null };
  private readonly closers: (() => Promise<unknown>)[] = [];

  constructor(
    name: string,
    readonly sluiceDir = ROOT,
    stem = 'bench',
  ) {
    this.prefix = `${stem}-${randomBytes(4).toString('hex')}`;
    this.scratch = new Scratch(name);
    this.children = new Children(this.scratch.path, ROOT, sluiceDir);
    this.sluice = join(sluiceDir, 'bin/sluice.js');
    this.scratch.onSignal(() => this.shutdown());
  }

  get brokers(): string[] {
    return this.kafka.brokers;
  }

  /** Run at shutdown, before the children stop (last added, first run). */
  onShutdown(close: () => Promise<unknown>): void {
    this.closers.push(close);
  }

  async shutdown(): Promise<void> {
    for (const c of this.closers.splice(0).reverse()) await c().catch(() => {});
    await this.children.stopAll();
    if (this.kafka.external) await dropBenchTopics(this.kafka.brokers, this.prefix);
  }

  /** Runs `main`, then shuts down and exits with its code (2 and the logs kept on an error). */
  run(main: () => Promise<number>): void {
    runBench(main, () => this.shutdown(), this.scratch);
  }

  /** KAFKA_BROKERS, or a `sluice kafka` of the bench's own. */
  async startKafka(): Promise<BenchKafka> {
    this.kafka = await benchKafka(this.children, this.scratch, this.sluice, say);
    return this.kafka;
  }

  /** The shared receiver (harness/receiver.ts), its own process. */
  receiver() {
    const { proc } = this.children.forkTs('receiver', join(ROOT, 'harness/receiver.ts'));
    return { call: rpc<ReceiverRequest, ReceiverReply>(proc), proc };
  }

  /** The shared load generator (harness/load.ts), its own process. */
  load() {
    const { proc } = this.children.forkTs('load', join(ROOT, 'harness/load.ts'));
    return { call: rpc<LoadRequest, LoadReply>(proc), proc };
  }

  /** `sluice start` on `port` with `env`, once its /readyz answers. */
  async sluiceStart(port: number, env: NodeJS.ProcessEnv): Promise<{ launched: Launched; adminPort: number }> {
    const adminPort = await freePort();
    const launched = this.children.spawn(
      'sluice',
      this.sluice,
      ['start'],
      { ...env, SLUICE_PORT: String(port), SLUICE_ADMIN_PORT: String(adminPort) },
      'sluice',
    );
    await waitReady(launched, 'sluice start', adminPort);
    return { launched, adminPort };
  }

  /** The command that ran the bench, for its section. */
  command(script: string): string {
    return benchCommand(script, ROOT, this.kafka.external ? this.kafka.brokers : null);
  }
}
