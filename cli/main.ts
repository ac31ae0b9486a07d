/** The `sluice` CLI: one binary, subcommands, each with --help. */
import { SluiceBaseError } from '../core/errors.ts';
import { COMMANDS } from './commands/index.ts';

const USAGE = `sluice: token-and-webhook edge

usage: sluice <command> [options]   (sluice <command> --help for each)

commands:
${Object.entries(COMMANDS)
  .map(([name, c]) => `  ${name.padEnd(12)} ${c.summary}`)
  .join('\n')}

configuration comes from environment variables (see docs/configuration.md);
KAFKA_BROKERS unset means the embedded local Kafka (sluice start only).`;

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return name ? 0 : 2;
  }
  const entry = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!entry) {
    process.stderr.write(`sluice: unknown command "${name}"\n\n${USAGE}\n`);
    return 2;
  }
  const command = await entry.load();
  const code = await command.run(rest);
  if (command.exitWhenDone) await exitWhenWritten(code);
  return code;
}

/**
 * Exits once what was written to stdout and stderr is out: a child's stdio is a socket (async), so
 * an exit at once cut a long `sluice dlq list` short. Writes are ordered: an empty write's callback
 * comes after every earlier one.
 */
async function exitWhenWritten(code: number): Promise<never> {
  const flushed = (s: NodeJS.WriteStream) => new Promise<void>((res) => s.write('', () => res()));
  await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
  process.exit(code);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    const code = err instanceof SluiceBaseError ? err.code : null;
    const what = code === 'CONFIG_INVALID' ? 'configuration error: ' : '';
    process.stderr.write(`sluice: ${what}${(err as Error)?.message ?? String(err)}\n`);
    process.exit(code === 'USAGE' ? 2 : 1);
  },
);
