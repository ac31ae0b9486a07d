/** Tiny helpers for the CLI: parse flags with --help, fail with one clear line. */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { SluiceBaseError } from '../core/errors.ts';

/** A command line Sluice cannot run: exit status 2. */
export class UsageError extends SluiceBaseError<'USAGE'> {
  constructor(message: string) {
    super('USAGE', message);
  }
}

export function parse<T extends NonNullable<ParseArgsConfig['options']>>(argv: string[], options: T, usage: string) {
  const parseOrThrow = () => {
    try {
      return parseArgs({
        args: argv,
        options: { ...options, help: { type: 'boolean', short: 'h' } },
        allowPositionals: true,
        strict: true,
      });
    } catch (err) {
      throw new UsageError(`${(err as Error).message}\n\n${usage}`);
    }
  };
  const parsed = parseOrThrow();
  if ((parsed.values as Record<string, unknown>).help) {
    process.stdout.write(`${usage.trimEnd()}\n`);
    process.exit(0);
  }
  return parsed;
}

export function required(values: Record<string, unknown>, name: string, usage: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v === '') throw new UsageError(`--${name} is required\n\n${usage}`);
  return v;
}
