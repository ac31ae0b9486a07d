/**
 * The suite's section of bench/RESULTS.md, between `<!-- suite:begin -->` and `<!-- suite:end -->`
 * (replaced in place, else put after the file's introduction). The dispatch and state benches keep
 * their own marked sections (bench/dispatch/results.ts, bench/state/report.ts); the rest of the
 * file is left alone.
 */
import { writeMarkedSection } from '../results-section.ts';

/** Put before the first "## " heading when the file has no suite section yet. */
export function writeSuiteSection(file: string, body: string): void {
  writeMarkedSection(file, 'suite', body, 'after-intro');
}
