/** What every bench script does around its measurements: --help, --label, the results file, the exit. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeMarkedSection } from './results-section.ts';
import type { Scratch } from './scratch.ts';
import { PROJECT_ROOT } from '../core/paths.ts';

/** The Sluice checkout the benches live in. */
export const ROOT = PROJECT_ROOT;
export const say = (line = '') => process.stdout.write(`${line}\n`);
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** --help: prints the script's leading comment (`scriptUrl`: its import.meta.url) and exits. */
export function printHelp(scriptUrl: string): never {
  say(readFileSync(fileURLToPath(scriptUrl), 'utf8').split('*/')[0]);
  process.exit(0);
}

/** A --label names a marked section of bench/RESULTS.md. */
export function checkLabel(label: string | undefined): void {
  if (!/^[a-z0-9-]{1,32}$/.test(label ?? '')) throw new Error('--label must be letters, digits and dashes');
}

/** --results FILE, else bench/RESULTS.md, except with --quick (null: nothing written). */
export function resultsFile(results: string | undefined, quick: boolean): string | null {
  return results ?? (quick ? null : join(ROOT, 'bench/RESULTS.md'));
}

/** Writes `section` between the markers `name` of `file`, and says so. */
export function writeResults(file: string | null, name: string, section: string): void {
  if (!file) return;
  writeMarkedSection(file, name, section);
  say(`\nwritten to ${file}`);
}

/**
 * Runs `main` and exits with its code after `shutdown`; an error exits 2 and keeps the logs. With
 * scratch.onSignal(shutdown), for benches without signal handlers of their own.
 */
export function runBench(main: () => Promise<number>, shutdown: () => Promise<void>, scratch: Scratch): void {
  main().then(
    async (code) => {
      await shutdown();
      process.exit(code);
    },
    async (err) => {
      process.stderr.write(`${(err as Error).stack ?? err}\n`);
      scratch.keepLogs = true;
      await shutdown();
      process.exit(2);
    },
  );
}
