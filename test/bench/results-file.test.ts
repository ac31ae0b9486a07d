import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../core/paths.ts';

/**
 * bench/RESULTS.md holds only what bench commands wrote: their marked sections (harness/results-section.ts,
 * the dispatch bench's labelled blocks too), after the file's title and the paragraph saying so. Notes
 * written by hand go to bench/HISTORY.md, where no command overwrites them and none passes for a command's output.
 */
const root = PROJECT_ROOT;
const file = join(root, 'bench/RESULTS.md');

/** The sources of bench/ and scripts/, where every writer of a section lives. */
function writerSources(): string {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(join(root, dir), { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(dir, e.name));
      else if (e.name.endsWith('.ts')) out.push(readFileSync(join(root, dir, e.name), 'utf8'));
    }
  };
  walk('bench');
  walk('scripts');
  return out.join('\n');
}

interface Section {
  name: string;
  lines: string[];
}

/**
 * The file's marked sections (top-level ones, and the labelled blocks of the dispatch container),
 * and the faults of its structure.
 */
function readSections(text: string): { intro: string[]; sections: Section[]; faults: string[] } {
  const intro: string[] = [];
  const sections: Section[] = [];
  const faults: string[] = [];
  const open: Section[] = [];
  const seen = new Set<string>();
  text.split('\n').forEach((line, i) => {
    const marker = /^<!-- (\S+):(begin|end) -->$/.exec(line.trim());
    if (marker) {
      const [, name, edge] = marker;
      if (edge === 'begin') {
        if (seen.has(name)) faults.push(`line ${i + 1}: a second "${name}" section`);
        seen.add(name);
        const section = { name, lines: [] };
        open.push(section);
        sections.push(section);
      } else if (open.at(-1)?.name !== name) faults.push(`line ${i + 1}: "${name}" ends where it did not begin`);
      else open.pop();
      return;
    }
    if (open.length === 0) {
      if (sections.length > 0 && line.trim() !== '')
        faults.push(`line ${i + 1}: outside every section: ${line.slice(0, 60)}`);
      else if (sections.length === 0) intro.push(line);
      return;
    }
    open.at(-1)!.lines.push(line);
  });
  for (const s of open) faults.push(`"${s.name}" never ends`);
  return { intro, sections, faults };
}

t.test('RESULTS.md: a title and one paragraph, then only sections that commands wrote', async (t) => {
  const { intro, sections, faults } = readSections(readFileSync(file, 'utf8'));
  t.same(faults, [], 'every line is inside a section, every section ends once, no name twice');
  t.equal(intro[0], '# Benchmark results');
  t.ok(intro.join('\n').includes('bench/HISTORY.md'), 'the intro says where hand-written notes are');
  t.ok(sections.length > 10, `${sections.length} sections`);
  const dispatch = sections.find((s) => s.name === 'dispatch');
  t.ok(dispatch, 'the dispatch bench has its container');
  // The container holds its heading (the writer's) and labelled blocks, nothing else.
  const loose = dispatch!.lines.filter((l) => l.trim() !== '' && !l.startsWith('## Webhook dispatch'));
  t.same(loose, [], 'nothing written by hand between the dispatch blocks');
  // Each top-level section names the command that wrote it (its heading or a Command: line).
  const topLevel = sections.filter((s) => !s.name.includes(':'));
  const unnamed = topLevel.filter((s) => !s.lines.some((l) => /npm run [\w:]+/.test(l))).map((s) => s.name);
  t.same(unnamed, [], 'every section names its npm command');
  // And some bench or script names it in its source (as 'name' or `name:...`): a section no code
  // writes was written by hand.
  const sources = writerSources();
  const names = [...new Set(sections.map((s) => s.name.split(':')[0]))];
  const unwritten = names.filter(
    (n) => !["'", '`', '"'].some((q) => sources.includes(`${q}${n}${q}`) || sources.includes(`${q}${n}:`)),
  );
  t.same(unwritten, [], 'every section has a writer in bench/ or scripts/');
  // A writer's section opens with its heading and has one top heading: text pasted in (another
  // report, notes) brings its own.
  const pasted = sections
    .filter(
      (s) =>
        !s.lines.find((l) => l.trim() !== '')?.startsWith('#') || s.lines.filter((l) => l.startsWith('## ')).length > 1,
    )
    .map((s) => s.name);
  t.same(pasted, [], 'every section opens with its one heading');
  // Each section (each labelled block of the dispatch container on its own) says when, what and where.
  const unstamped = sections
    .filter((s) => s.name !== 'dispatch')
    .map((s) => ({ name: s.name, missing: missingStamps(s.lines.join('\n')) }))
    .filter((s) => s.missing.length > 0)
    .map((s) => `${s.name}: no ${s.missing.join(', no ')}`);
  t.same(unstamped, [], 'every section states its date, the commit it measured and the machine');
});

/** What a section's text does not state of: its date, the commit measured, the machine. */
function missingStamps(text: string): string[] {
  const missing: string[] = [];
  if (!/\b20\d\d-\d\d-\d\d(?!\d)/.test(text)) missing.push('date');
  if (!/\b(Sluice|commit|at) [0-9a-f]{7,40}\b/.test(text)) missing.push('commit');
  if (!/\b\d+ × [A-Za-z]/.test(text)) missing.push('machine'); // cores × CPU model
  return missing;
}

t.test('a section without its date, commit or machine is found', async (t) => {
  const machine = '2 × AMD EPYC 7B13, 23.5 GiB, Linux 6.18, Node v20.20.2';
  t.same(missingStamps(`2026-11-29, Sluice at 913be6f; ${machine}`), []);
  t.same(missingStamps(`Sluice measured: commit 2d277b0.\nMachine: ${machine}; 2026-11-29T19:15:36Z`), []);
  t.same(missingStamps(`2026-11-29 on ${machine}`), ['commit']);
  t.same(missingStamps(`Sluice at 913be6f on ${machine}`), ['date']);
  t.same(missingStamps('2026-11-29, Sluice at 913be6f, AMD EPYC (2 cores)'), ['machine']);
  t.same(missingStamps('2026-11-29, Sluice at 913be6f, 20 × 1,000 deliveries'), ['machine']);
});

t.test('the reader finds what a hand edit would break', async (t) => {
  const ok = '# Benchmark results\n\nintro\n\n<!-- a:begin -->\n`npm run x`\n<!-- a:end -->\n';
  t.same(readSections(ok).faults, []);
  t.match(readSections(`${ok}a note\n`).faults, [/outside every section: a note/]);
  t.match(readSections(`${ok}<!-- a:begin -->\n<!-- a:end -->\n`).faults, [/a second "a" section/]);
  t.match(readSections(`${ok}<!-- b:begin -->\n`).faults, [/"b" never ends/]);
  t.match(readSections(`${ok}<!-- c:end -->\n`).faults, [/"c" ends where it did not begin/]);
});
