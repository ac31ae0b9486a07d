import t from 'tap';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { PROJECT_ROOT } from '../../core/paths.ts';

const root = PROJECT_ROOT;

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? tsFiles(p) : p.endsWith('.ts') ? [p] : [];
  });
}

function importsOf(file: string): string[] {
  const src = readFileSync(file, 'utf8');
  return [...src.matchAll(/(?:import|export)[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g)].map(
    (m) => m[1] ?? m[2],
  );
}

/** Top-level folder an import of `file` lands in, for relative imports. */
function target(file: string, spec: string): string | null {
  if (!spec.startsWith('.')) return null;
  return relative(root, join(file, '..', spec)).split('/')[0];
}

const rules: Record<string, string[]> = {
  core: ['ingress', 'dispatcher', 'cli', 'contracts', 'bench', 'test', 'harness'],
  ingress: ['dispatcher', 'cli', 'contracts', 'bench', 'test', 'harness'],
  dispatcher: ['ingress', 'cli', 'contracts', 'bench', 'test', 'harness'],
  // What Sluice sends to receivers: used by the dispatcher and by core's endpoint checks (pings).
  outbound: ['ingress', 'dispatcher', 'cli', 'contracts', 'bench', 'test', 'harness'],
  // The one test-and-bench harness sits under the tests, the benches and the scripts; the benches
  // and the scripts import neither the tests nor each other (a test may test a bench's code).
  harness: ['bench', 'test', 'scripts'],
  bench: ['test', 'scripts'],
  scripts: ['bench', 'test'],
};
const LAYERS = ['core', 'outbound', 'ingress', 'dispatcher', 'cli', 'receiver-sdk'];

for (const [layer, forbidden] of Object.entries(rules)) {
  t.test(`${layer}/ imports none of ${forbidden.join(', ')}`, async (t) => {
    const files = tsFiles(join(root, layer));
    t.ok(files.length > 0, `${layer}/ has TypeScript files`);
    const offences = files.flatMap((f) =>
      importsOf(f)
        .filter((s) => forbidden.includes(target(f, s) ?? ''))
        .map((s) => `${relative(root, f)} imports ${s}`),
    );
    t.same(offences, []);
  });
}

t.test(
  'kafkajs is imported in core/kafka/ only (its types too): the seam a replacement client starts at',
  async (t) => {
    const files = LAYERS.flatMap((layer) => tsFiles(join(root, layer)));
    const seam = join(root, 'core', 'kafka');
    const inSeam = files.filter((f) => f.startsWith(seam) && importsOf(f).some((s) => s.startsWith('kafkajs')));
    t.ok(inSeam.length > 0, `core/kafka/ imports kafkajs (${inSeam.length} files)`);
    const offences = files
      .filter((f) => !f.startsWith(seam))
      .flatMap((f) =>
        importsOf(f)
          .filter((s) => s === 'kafkajs' || s.startsWith('kafkajs/'))
          .map((s) => `${relative(root, f)} imports ${s}`),
      );
    t.same(offences, []);
  },
);

t.test(`no import circles in ${LAYERS.join(', ')} (type imports count too)`, async (t) => {
  const files = LAYERS.flatMap((layer) => tsFiles(join(root, layer)));
  const known = new Set(files);
  const edges = new Map(
    files.map((f) => [
      f,
      importsOf(f)
        .filter((s) => s.startsWith('.'))
        .map((s) => join(f, '..', s))
        .filter((d) => known.has(d)),
    ]),
  );
  // Depth-first: a file met again while still on the path closes a circle.
  const circles: string[] = [];
  const done = new Set<string>();
  const path: string[] = [];
  const visit = (f: string): void => {
    if (done.has(f)) return;
    const at = path.indexOf(f);
    if (at >= 0) {
      circles.push([...path.slice(at), f].map((p) => relative(root, p)).join(' → '));
      return;
    }
    path.push(f);
    for (const d of edges.get(f) ?? []) visit(d);
    path.pop();
    done.add(f);
  };
  for (const f of files) visit(f);
  t.ok(files.length > 100, `${files.length} files read`);
  t.same(circles, []);
});

// The receiver SDK is the package receivers install (scripts/build.ts): it may reach into the
// server's code only for these few files, which themselves import node built-ins and each other.
const SDK_REACHES = [
  'core/errors.ts',
  'core/lru.ts',
  'core/webhooks/records.ts',
  'outbound/signing.ts',
  'outbound/target-guard.ts',
];

t.test('receiver-sdk/ imports node built-ins, itself and a short list of core files only', async (t) => {
  const files = tsFiles(join(root, 'receiver-sdk'));
  t.ok(
    files.some((f) => f.endsWith('verify.ts')),
    'receiver-sdk/verify.ts is there',
  );
  const offences = files.flatMap((f) =>
    importsOf(f)
      .filter((s) => {
        // The package's own name appears in the usage examples of doc comments.
        if (s.startsWith('node:') || s === 'sluice' || s.startsWith('sluice/')) return false;
        if (!s.startsWith('.')) return true;
        const to = relative(root, join(f, '..', s));
        return !to.startsWith('receiver-sdk/') && !SDK_REACHES.includes(to);
      })
      .map((s) => `${relative(root, f)} imports ${s}`),
  );
  t.same(offences, []);
});
