/** Shared by the CLI commands: config, Kafka (configured or embedded) and a Context. */
import { loadConfig, type Config } from '../core/config.ts';
import { ConfigError } from '../core/errors.ts';
import type { Context, ContextOptions } from '../core/context.ts';
import { stopStepsUnderWay } from '../core/stop-steps.ts';
import { startLocalKafka, type LocalKafka } from '../core/kafka/local-broker.ts';

export function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

export async function kafkaFor(
  config: Readonly<Config>,
  opts: { embedded: boolean },
): Promise<{ brokers: string[]; local: LocalKafka | null }> {
  if (config.kafkaBrokers) return { brokers: config.kafkaBrokers, local: null };
  if (!opts.embedded) {
    const hint = 'point it at a running Kafka (e.g. KAFKA_BROKERS=127.0.0.1:9092, as printed by `sluice kafka`)';
    throw new ConfigError('KAFKA_BROKERS', `is not set: ${hint}`);
  }
  say(`KAFKA_BROKERS is not set: starting the embedded local Kafka on 127.0.0.1:${config.kafkaPort}`);
  const local = await startLocalKafka({ cacheDir: config.cacheDir, port: config.kafkaPort, log: say });
  return { brokers: local.brokers, local };
}

export async function withContext<T>(
  component: string,
  fn: (ctx: Context) => Promise<T>,
  extra: Partial<ContextOptions> = {},
): Promise<T> {
  const config = loadConfig();
  const { brokers } = await kafkaFor(config, { embedded: false });
  // Loaded here, not at the top: `sluice kafka` and the primary of `sluice start` use this module too.
  const { openContext } = await import('../core/context.ts');
  const ctx = await openContext(config, { brokers, component, ...extra });
  try {
    return await fn(ctx);
  } finally {
    await ctx.close();
  }
}

/**
 * Resolves on the first SIGINT/SIGTERM. From then on a shutdown has `graceMs` to finish (a node
 * that lost Kafka can wait forever on kafkajs retries) and a second signal exits at once.
 */
export function untilSignal(graceMs = 15_000): Promise<string> {
  return new Promise((resolve) => {
    const first = (signal: string) => {
      const force = () => {
        process.stderr.write(`sluice: shutdown did not finish; exiting. Still under way: ${stopStepsUnderWay()}\n`);
        process.exit(1);
      };
      setTimeout(force, graceMs).unref();
      process.once('SIGINT', force);
      process.once('SIGTERM', force);
      resolve(signal);
    };
    process.once('SIGINT', () => first('SIGINT'));
    process.once('SIGTERM', () => first('SIGTERM'));
  });
}
