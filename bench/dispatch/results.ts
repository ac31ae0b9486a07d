/**
 * Writes one labelled run into bench/RESULTS.md without touching the rest of the file:
 *   <!-- dispatch:begin --> heading, then one block per label
 *   <!-- dispatch:<label>:begin --> … <!-- dispatch:<label>:end -->   (replaced in place, else appended)
 *   <!-- dispatch:end -->
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

const BEGIN = '<!-- dispatch:begin -->';
const END = '<!-- dispatch:end -->';
const HEADING = '## Webhook dispatch, every piece its own OS process (`npm run bench:dispatch`)';

export function writeSection(file: string, label: string, body: string): void {
  let text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmark results\n';
  if (!text.includes(BEGIN) || !text.includes(END)) text = `${text.trimEnd()}\n\n${BEGIN}\n${HEADING}\n\n${END}\n`;
  const open = `<!-- dispatch:${label}:begin -->`;
  const close = `<!-- dispatch:${label}:end -->`;
  const block = `${open}\n${body.trim()}\n${close}`;
  const start = text.indexOf(open);
  const stop = text.indexOf(close);
  if (start >= 0 && stop > start) text = text.slice(0, start) + block + text.slice(stop + close.length);
  else {
    const at = text.indexOf(END);
    text = `${text.slice(0, at)}${block}\n\n${text.slice(at)}`;
  }
  writeFileSync(file, text);
}
