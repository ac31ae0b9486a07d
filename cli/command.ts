/** What a CLI subcommand is, and the shape shared by commands made of actions (`sluice admin revoke`). */
import { UsageError } from './args.ts';

export interface Command {
  run(argv: string[]): Promise<number>;
  /**
   * The process exits as soon as run() resolves: what it leaves behind (a view consumer leaving
   * its group once its fetch in flight is answered, core/kafka/state-consumer.ts) is not waited for.
   */
  exitWhenDone?: boolean;
}

export type Action = (argv: string[]) => Promise<number>;

/** `<command> <action> [options]`: usage for none or --help, a usage error for an unknown action. */
export function actionCommand(name: string, usage: string, actions: Record<string, Action>): Command {
  return {
    exitWhenDone: true,
    async run(argv) {
      const [action, ...rest] = argv;
      if (!action || action === '--help' || action === '-h') {
        process.stdout.write(`${usage.trimEnd()}\n`);
        return action ? 0 : 2;
      }
      const handler = Object.hasOwn(actions, action) ? actions[action] : undefined;
      if (!handler) throw new UsageError(`unknown ${name} action "${action}"\n\n${usage}`);
      return handler(rest);
    },
  };
}
