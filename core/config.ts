/**
 * Configuration from environment variables (and an optional JSON file named by SLUICE_CONFIG_FILE,
 * whose keys are the same variable names). Parsed and validated once at start-up into a frozen
 * object; a bad value throws a ConfigError naming the variable.
 *
 * One schema (SETTINGS, DERIVED_SETTINGS and CLI_SETTINGS below, composed of the section files of
 * core/config/) is the source of every setting: it reads and checks each, Config is derived from it,
 * and it renders the table of docs/configuration.md.
 */
import { checkIdleFetchWait, DISPATCH_DERIVED_SETTINGS, DISPATCH_SETTINGS } from './config/dispatch.ts';
import { checkStateFetchWait, KAFKA_DERIVED_SETTINGS, KAFKA_SETTINGS } from './config/kafka.ts';
import { LIMIT_SETTINGS } from './config/limits.ts';
import { LISTENER_SETTINGS } from './config/listeners.ts';
import { OBSERVABILITY_SETTINGS } from './config/observability.ts';
import { CLI_SETTINGS, PROCESS_SETTINGS } from './config/process.ts';
import { type Env, readFileEnv } from './config/readers.ts';
import { REGION_SETTINGS } from './config/regions.ts';
import { ROTATION_SETTINGS } from './config/rotation.ts';
import { SECTIONS, type Setting, type Values } from './config/schema.ts';
import { STORAGE_DERIVED_SETTINGS, STORAGE_SETTINGS } from './config/storage.ts';
import { refuseDevelopmentKeyBeyondLoopback, TOKEN_DERIVED_SETTINGS, TOKEN_SETTINGS } from './config/tokens.ts';
import { UPSTREAM_SETTINGS } from './config/upstreams.ts';
import { WEBHOOK_DERIVED_SETTINGS, WEBHOOK_SETTINGS } from './config/webhooks.ts';

export type { DeliveryClientCertificate, ListenerTls } from './config/readers.ts';
export type { DeliveryProxy } from './config/webhooks.ts';
export type { Upstreams } from './config/upstreams.ts';
export { DEFAULT_STATE_FETCH_WAIT_MS } from './config/kafka.ts';
export { SECTIONS, type Section, type Setting, type Variable } from './config/schema.ts';
export { CLI_SETTINGS };

const { host, ...listeners } = LISTENER_SETTINGS;
const { devAllowDevelopmentKey, ...tokens } = TOKEN_SETTINGS;

/** Settings read from the environment alone (in the docs' order within a section). */
export const SETTINGS = {
  ...KAFKA_SETTINGS,
  ...STORAGE_SETTINGS,
  host,
  // A tokens setting (its row sits there), read right after SLUICE_HOST as it always was: the first
  // bad value throws, so the order settings are read in decides which error a start-up reports.
  devAllowDevelopmentKey,
  ...listeners,
  ...REGION_SETTINGS,
  ...tokens,
  ...LIMIT_SETTINGS,
  ...UPSTREAM_SETTINGS,
  ...ROTATION_SETTINGS,
  ...DISPATCH_SETTINGS,
  ...WEBHOOK_SETTINGS,
  ...OBSERVABILITY_SETTINGS,
  ...PROCESS_SETTINGS,
} satisfies Record<string, Setting>;

type BaseConfig = Values<typeof SETTINGS>;

/** Settings whose default or check depends on others (`base`, the values of SETTINGS). */
export const DERIVED_SETTINGS = {
  ...KAFKA_DERIVED_SETTINGS,
  ...DISPATCH_DERIVED_SETTINGS,
  ...STORAGE_DERIVED_SETTINGS,
  ...TOKEN_DERIVED_SETTINGS,
  ...WEBHOOK_DERIVED_SETTINGS,
} satisfies Record<string, Setting<BaseConfig>>;

export interface Config extends BaseConfig, Values<typeof DERIVED_SETTINGS> {}

/** Every setting, the CLI's too. */
export const ALL_SETTINGS: readonly Setting<never>[] = [
  ...Object.values(SETTINGS),
  ...Object.values(DERIVED_SETTINGS),
  ...Object.values(CLI_SETTINGS),
];

/** The variables table of docs/configuration.md (`npm run docs:config` writes it there). */
export function settingsTable(): string {
  const rows = SECTIONS.flatMap((section) => ALL_SETTINGS.filter((s) => s.section === section))
    .flatMap((s) => s.vars ?? [])
    .map((v) => `| \`${v.env}\` | ${v.default} | ${v.doc} |`);
  return ['| variable | default | meaning |', '|---|---|---|', ...rows].join('\n');
}

/** Reads a group of settings, in order (the first bad value throws). */
function readAll<S extends Record<string, Setting<P>>, P>(settings: S, env: Env, prior: P): Values<S> {
  return Object.fromEntries(Object.entries(settings).map(([key, s]) => [key, s.read(env, prior)])) as Values<S>;
}

export function loadConfig(rawEnv: Env = process.env): Readonly<Config> {
  const env = readFileEnv(rawEnv);
  const base = readAll(SETTINGS, env, undefined);
  const config: Config = { ...base, ...readAll(DERIVED_SETTINGS, env, base) };
  if (!env.SLUICE_MASTER_KEY) refuseDevelopmentKeyBeyondLoopback(config);
  checkIdleFetchWait(config);
  checkStateFetchWait(config);
  return Object.freeze(config);
}
