#!/usr/bin/env -S node --no-memory-reducer
// The `sluice` command. It runs the compiled CLI in build/ (`npm run build:server`; npm start and
// npm test build first), so no Sluice process carries a TypeScript loader. When a source file is
// newer than the last build (build/.built, written when tsc succeeds), or build/ is missing, it
// says so and runs the sources through tsx instead: a stale build is never run.
import { readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
/** The folders tsconfig.server.json compiles. */
const SOURCES = ['core', 'outbound', 'receiver-sdk', 'ingress', 'dispatcher', 'contracts', 'cli'];

/** The first source file newer than the last build, or null when build/ is current. */
function staleSource() {
  const built = statSync(join(root, 'build/.built'), { throwIfNoEntry: false })?.mtimeMs ?? 0;
  const walk = (dir) => {
    let entries;
    try {
      entries = readdirSync(join(root, dir), { withFileTypes: true });
    } catch {
      return null; // an installed build without its sources
    }
    for (const e of entries) {
      const rel = `${dir}/${e.name}`;
      if (e.isDirectory()) {
        const found = walk(rel);
        if (found) return found;
      } else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) {
        if (statSync(join(root, rel)).mtimeMs > built) return rel;
      }
    }
    return null;
  };
  for (const dir of SOURCES) {
    const found = walk(dir);
    if (found) return found;
  }
  return null;
}

const stale = staleSource();
if (stale === null) {
  await import('../build/cli/main.js');
} else {
  process.stderr.write(
    `sluice: build/ is missing or older than ${stale}; running the sources through tsx ` +
      '(npm run build:server compiles them)\n',
  );
  const { register } = await import('tsx/esm/api');
  register();
  await import('../cli/main.ts');
}
