/**
 * The settings schema of core/config.ts is the one source of the configuration: the table of
 * docs/configuration.md is its rendering, every variable the code reads is one of its settings,
 * and loadConfig returns exactly its fields.
 */
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { ALL_SETTINGS, DERIVED_SETTINGS, loadConfig, SETTINGS, settingsTable } from '../../core/config.ts';
import { PROJECT_ROOT } from '../../core/paths.ts';
import { pathToFileURL } from 'node:url';

const root = pathToFileURL(`${PROJECT_ROOT}/`);
const docs = readFileSync(new URL('docs/configuration.md', root), 'utf8');

t.test('the table in docs/configuration.md is the schema rendered', async (t) => {
  const block = /<!-- settings:begin -->\n([\s\S]*?)\n<!-- settings:end -->/.exec(docs);
  t.ok(block, 'docs/configuration.md has the settings markers');
  t.equal(block?.[1], settingsTable(), 'the table matches core/config.ts: run `npm run docs:config`');
});

// Variables the code reads that are not settings, each with why.
const NOT_SETTINGS = new Map([
  ['SLUICE_CONFIG_FILE', 'names the file the settings may come from (the prose of docs/configuration.md)'],
  ['SLUICE_WORKER_INDEX', 'set by a primary for the workers it forks (cli/workers.ts), never by an operator'],
  // Inputs of `sluice contract verify` and `sluice admin`, beside their flags (their usage text).
  ['SLUICE_BASE_URL', 'sluice contract verify --base-url'],
  ['SLUICE_CLIENT_ID', 'sluice contract verify --client-id'],
  ['SLUICE_CLIENT_SECRET', 'sluice contract verify --client-secret'],
  ['SLUICE_OPERATOR', "sluice admin's operator name in the audit log"],
]);

/** The SLUICE_* and KAFKA_BROKERS names read from `env` or `process.env` in a source file. */
function namesRead(source: string): string[] {
  const direct = [...source.matchAll(/\benv(?:\.|\[\s*['"`])((?:SLUICE|KAFKA)_[A-Z0-9_]+)/g)].map((m) => m[1]);
  // env[NAME] with `const NAME = '...'` in the same file.
  const viaConstant = [...source.matchAll(/\benv\[\s*([A-Za-z_$][\w$]*)\s*\]/g)].flatMap((m) => {
    const constant = new RegExp(`\\bconst ${m[1]} = ['"]((?:SLUICE|KAFKA)_[A-Z0-9_]+)['"]`).exec(source);
    return constant ? [constant[1]] : [];
  });
  return [...direct, ...viaConstant];
}

t.test('every variable read in the source is a setting, or a named exception', async (t) => {
  const files = ['core', 'cli', 'ingress', 'dispatcher'].flatMap((dir) =>
    readdirSync(new URL(dir, root), { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts'))
      .map((f) => `${dir}/${f}`),
  );
  const read = new Map<string, string>();
  for (const file of files)
    for (const name of namesRead(readFileSync(new URL(file, root), 'utf8'))) read.set(name, file);
  const settings = new Set(ALL_SETTINGS.flatMap((s) => s.vars ?? []).map((v) => v.env));
  t.ok(read.has('KAFKA_BROKERS') && read.has('SLUICE_WORKER_INDEX'), 'the scan finds direct and named reads');
  t.same(
    [...read]
      .filter(([name]) => !settings.has(name) && !NOT_SETTINGS.has(name))
      .map(([name, file]) => `${name} (${file})`),
    [],
    'every variable read is in the schema of core/config.ts (or in NOT_SETTINGS, with a reason)',
  );
  t.same(
    [...NOT_SETTINGS.keys()].filter((name) => !read.has(name) || settings.has(name)),
    [],
    'every exception is read somewhere and is not a setting',
  );
});

t.test("loadConfig returns exactly the schema's fields", async (t) => {
  t.same(
    Object.keys(loadConfig({})).sort(),
    [...Object.keys(SETTINGS), ...Object.keys(DERIVED_SETTINGS)].sort(),
    'the keys of the config are those of SETTINGS and DERIVED_SETTINGS',
  );
});
