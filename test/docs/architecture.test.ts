import t from 'tap';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { PROJECT_ROOT } from '../../core/paths.ts';

const root = PROJECT_ROOT;

/** Relative link targets of a Markdown file (`[text](target)`), without their #fragment. */
function relativeLinks(file: string): string[] {
  const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  return [...text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)]
    .map((m) => m[1])
    .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target) && !target.startsWith('#'))
    .map((target) => decodeURIComponent(target.split('#')[0]));
}

/** The links of `file` whose target does not exist, as "file → target". */
function brokenLinks(file: string): string[] {
  return relativeLinks(file)
    .filter((target) => !existsSync(join(dirname(file), target)))
    .map((target) => `${relative(root, file)} → ${target}`);
}

const architecture = join(root, 'docs/architecture.md');

t.test('docs/architecture.md exists and every file it links to exists', async (t) => {
  t.ok(existsSync(architecture), 'docs/architecture.md exists');
  const links = relativeLinks(architecture);
  t.ok(links.length > 50, `it links the files it names (${links.length} links)`);
  t.same(brokenLinks(architecture), []);
});

t.test('every repository path docs/architecture.md names in code spans exists', async (t) => {
  const text = readFileSync(architecture, 'utf8');
  const named = [
    ...text.matchAll(/`((?:core|ingress|dispatcher|cli|contracts|bench|test|scripts|docs)\/[\w./-]*)`/g),
  ].map((m) => m[1]);
  t.same(
    named.filter((p) => !existsSync(join(root, p))),
    [],
  );
});

t.test('the map names every topic core/topics.ts defines', async (t) => {
  const text = readFileSync(architecture, 'utf8');
  const topics = readFileSync(join(root, 'core/topics.ts'), 'utf8');
  const names = [...topics.matchAll(/`\$\{prefix\}\.([\w.-]+)`/g)].map((m) => `sluice.${m[1]}`);
  t.ok(names.length >= 10, `core/topics.ts defines the topics (${names.length} found)`);
  t.same(
    names.filter((n) => !text.includes(`\`${n}`)),
    [],
  );
});

t.test('every relative link in README.md and docs/*.md exists', async (t) => {
  const docs = readdirSync(join(root, 'docs'))
    .filter((n) => n.endsWith('.md'))
    .map((n) => join(root, 'docs', n));
  t.same([join(root, 'README.md'), ...docs].flatMap(brokenLinks), []);
});
