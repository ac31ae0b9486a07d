/**
 * Where the project's files are, from the sources (core/) or their compiled form (build/core/,
 * `npm run build:server`) alike: the nearest directory above this module holding package.json.
 * Files that are not code (the console, the contract, the Kafka pom, the cache) are found from it.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function findRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json above ${from}`);
  }
}

export const PROJECT_ROOT = findRoot(dirname(fileURLToPath(import.meta.url)));

/** A path inside the project. */
export const projectPath = (...parts: string[]): string => join(PROJECT_ROOT, ...parts);
