/**
 * The shape of a setting (its variables, its docs section, how it is read) and the builders of the
 * common kinds (a number in a range, a boolean, a text). The section files of core/config/ declare
 * their settings with them; core/config.ts composes the sections.
 */
import { bool, type Env, int, num } from './readers.ts';

/** A variable's row in the table of docs/configuration.md: its default and its meaning, in Markdown. */
export interface Variable {
  env: string;
  default: string;
  doc: string;
}

/**
 * The table in docs/configuration.md lists the variables section by section (in this order), so a
 * setting of DERIVED_SETTINGS sits with its kin.
 */
export const SECTIONS = [
  'kafka',
  'storage',
  'listeners',
  'regions',
  'tokens',
  'limits',
  'upstreams',
  'rotation',
  'webhooks',
  'observability',
  'process',
] as const;
export type Section = (typeof SECTIONS)[number];

/** A setting read from variables, each a row of docs/configuration.md; `read` throws a ConfigError naming one. */
export interface Documented<T, Prior = void> {
  section: Section;
  vars: readonly [Variable, ...Variable[]];
  read(env: Env, prior: Prior): T;
}

/** One setting: documented variables, or a value no variable sets. `Prior`: the settings it depends on. */
export type Setting<Prior = void> =
  | Documented<unknown, Prior>
  | { section?: undefined; vars?: undefined; read(env: Env, prior: Prior): unknown };

/** The values a group of settings reads: the type of its part of Config. */
export type Values<S> = { [K in keyof S]: S[K] extends { read(...args: never[]): infer T } ? T : never };

const shown = (def: number | boolean | string) => `\`${def}\``;

/** A number from `min` to `max`, read by `reader`: `int` takes whole numbers only, `num` any. */
const rangeSetting =
  (reader: typeof int) =>
  (section: Section, env: string, def: number, min: number, max: number, doc: string): Documented<number> => ({
    section,
    vars: [{ env, default: shown(def), doc }],
    read: (e) => reader(e, env, def, min, max),
  });
export const intSetting = rangeSetting(int);
export const numSetting = rangeSetting(num);

export function boolSetting(section: Section, env: string, def: boolean, doc: string): Documented<boolean> {
  return {
    section,
    vars: [{ env, default: shown(def), doc }],
    read: (e) => bool(e, env, def),
  };
}

/** Any text; unset or empty: `def`. */
export function textSetting(section: Section, env: string, def: string, doc: string): Documented<string> {
  return {
    section,
    vars: [{ env, default: shown(def), doc }],
    read: (e) => e[env] || def,
  };
}
