/**
 * docs/configuration.md and core/config.ts name the same settings: every variable the loader reads
 * has a row, and every row is a variable the loader reads.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';

const root = new URL('../../', import.meta.url);
// The loader, and the one setting read before it (the number of workers a primary forks).
const source = ['core/config.ts', 'cli/workers.ts'].map((f) => readFileSync(new URL(f, root), 'utf8')).join('\n');
const docs = readFileSync(new URL('docs/configuration.md', root), 'utf8');

const read = new Set(
  [...source.matchAll(/\b(SLUICE_[A-Z0-9_]+|KAFKA_BROKERS)\b/g)]
    .map((m) => m[1])
    // Names built from a prefix, and the worker index a primary hands its workers (not a setting).
    .filter((n) => !n.endsWith('_') && n !== 'SLUICE_WORKER_INDEX'),
);
const rows = new Set([...docs.matchAll(/^\| `((?:SLUICE_|KAFKA_)[A-Z0-9_]+)` \|/gm)].map((m) => m[1]));
// A setting about the settings (SLUICE_CONFIG_FILE) is described in the prose above the table.
const mentioned = new Set([...docs.matchAll(/`((?:SLUICE_|KAFKA_)[A-Z0-9_]+)`/g)].map((m) => m[1]));

t.ok(read.size > 30, `the loader reads ${read.size} variables`);
t.same(
  [...read].filter((n) => !mentioned.has(n)).sort(),
  [],
  'every variable core/config.ts reads is in docs/configuration.md',
);
t.same(
  [...rows].filter((n) => !read.has(n)).sort(),
  [],
  'every row of docs/configuration.md is a variable core/config.ts reads',
);
