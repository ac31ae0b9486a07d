/**
 * A bench run's work directory: logs at its top, bulky data in sub-directories, removed on exit.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A bench run's work directory in the system's temp directory: logs at its top, and the bulky data
 * (a Kafka log directory is up to a few hundred MB a run, the view stores as much again) in
 * sub-directories named by kafkaDir() and dataDir(). When the process exits, however it exits
 * (done, failed, a SIGINT or SIGTERM handler that calls process.exit, an uncaught error), the
 * directory is removed; with `keepLogs` set (a failed run), only the data goes and the logs stay.
 * A process that installs no signal handler of its own gets one from onSignal().
 */
export class Scratch {
  readonly path: string;
  /** Set it to keep the logs of a run (a failure, --keep-logs); the data is removed anyway. */
  keepLogs = false;
  private readonly kafkaDirs = new Set<string>();
  private readonly dataDirs = new Set<string>();

  constructor(name: string) {
    this.path = mkdtempSync(join(tmpdir(), `sluice-${name}-`));
    process.once('exit', () => this.remove());
  }

  /** For `sluice kafka --data-dir` or startLocalKafka's dataDir: its log segments are data, its logs/ are logs. */
  kafkaDir(name = 'kafka'): string {
    const dir = join(this.path, name);
    this.kafkaDirs.add(dir);
    return dir;
  }

  /** For SLUICE_DATA_DIR (the view stores): all data. */
  dataDir(name = 'state'): string {
    const dir = join(this.path, name);
    this.dataDirs.add(dir);
    return dir;
  }

  /** Removes the data now (and the logs, unless keepLogs); called on exit, safe to call twice. */
  remove(): void {
    if (!this.keepLogs) {
      rmSync(this.path, { recursive: true, force: true });
      return;
    }
    for (const dir of this.dataDirs) rmSync(dir, { recursive: true, force: true });
    // One broker keeps its segments in <dir>/kraft; a cluster, in <dir>/node-<i>/kraft.
    for (const dir of this.kafkaDirs) {
      const nodes = existsSync(dir) ? readdirSync(dir).filter((n) => /^node-\d+$/.test(n)) : [];
      for (const sub of ['.', ...nodes]) rmSync(join(dir, sub, 'kraft'), { recursive: true, force: true });
    }
    if (existsSync(this.path)) process.stderr.write(`logs kept in ${this.path}\n`);
  }

  /**
   * For a run without signal handlers of its own: on SIGINT or SIGTERM, `stop` (its children,
   * its broker), then exit 130 or 143, which removes the directory.
   */
  onSignal(stop: () => Promise<unknown>): void {
    for (const [signal, code] of [
      ['SIGINT', 130],
      ['SIGTERM', 143],
    ] as const) {
      process.once(signal, () => {
        process.stderr.write(`${signal}: stopping\n`);
        const exit = () => process.exit(code);
        stop().then(exit, exit);
      });
    }
  }
}
