/**
 * The suite's section of bench/RESULTS.md, between `<!-- suite:begin -->` and `<!-- suite:end -->`
 * (replaced in place, else put after the file's introduction). The dispatch and state benches keep
 * their own marked sections (bench/dispatch/results.ts, bench/state/report.ts); the rest of the
 * file is left alone.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

const BEGIN = '<!-- suite:begin -->';
const END = '<!-- suite:end -->';

export function writeSuiteSection(file: string, body: string): void {
  let text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmark results\n';
  const block = `${BEGIN}\n${body.trim()}\n${END}`;
  const start = text.indexOf(BEGIN);
  const stop = text.indexOf(END);
  if (start >= 0 && stop > start) text = text.slice(0, start) + block + text.slice(stop + END.length);
  else {
    // After the introduction: before the first "## " heading.
    const at = text.indexOf('\n## ');
    text = at < 0 ? `${text.trimEnd()}\n\n${block}\n` : `${text.slice(0, at + 1)}${block}\n\n${text.slice(at + 1)}`;
  }
  writeFileSync(file, text);
}
