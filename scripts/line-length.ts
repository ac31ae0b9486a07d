/**
 * Lines of 120 characters at most in the code we write (the formatter breaks code, never a long
 * string or comment, so this catches those). Prints each offending line and exits 1.
 * Usage: node bin/run-ts.js scripts/line-length.ts
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const MAX = 120;
// Files not yet added count too (without what .gitignore leaves out): a new file is checked before its commit.
const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '*.ts', '*.js'], {
  encoding: 'utf8',
})
  .split('\n')
  .filter((f) => f && !f.startsWith('contracts/generated/'));
let long = 0;
for (const file of files) {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    continue; // deleted in the work tree, not yet in the index
  }
  text.split('\n').forEach((line, i) => {
    if ([...line].length <= MAX) return;
    long++;
    process.stdout.write(`${file}:${i + 1}: ${[...line].length} characters\n`);
  });
}
if (long > 0) {
  process.stdout.write(`${long} lines over ${MAX} characters\n`);
  process.exit(1);
}
