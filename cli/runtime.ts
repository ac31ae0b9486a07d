/** Shared by the CLI commands: config, Kafka (configured or embedded) and a Context. */
import { loadConfig, type Config } from '../core/config.ts';
import { openContext, type Context, type ContextOptions } from '../core/context.ts';
import { startLocalKafka, type LocalKafka } from '../core/kafka/local-broker.ts';

export function say(line: string): void {
  process.stdout.write(line + '\n');
}

export async function kafkaFor(config: Readonly<Config>, opts: { embedded: boolean }): Promise<{ brokers: string[]; local: LocalKafka | null }> {
  if (config.kafkaBrokers) return { brokers: config.kafkaBrokers, local: null };
  if (!opts.embedded) {
    throw new Error('KAFKA_BROKERS is not set: point it at a running Kafka (e.g. KAFKA_BROKERS=127.0.0.1:9092, as printed by `sluice kafka`)');
  }
  say(`KAFKA_BROKERS is not set: starting the embedded local Kafka on 127.0.0.1:${config.kafkaPort}`);
  const local = await startLocalKafka({ cacheDir: config.cacheDir, port: config.kafkaPort, log: say });
  return { brokers: local.brokers, local };
}

export async function withContext<T>(component: string, fn: (ctx: Context) => Promise<T>, extra: Partial<ContextOptions> = {}): Promise<T> {
  const config = loadConfig();
  const { brokers } = await kafkaFor(config, { embedded: false });
  const ctx = await openContext(config, { brokers, component, ...extra });
  try {
    return await fn(ctx);
  } finally {
    await ctx.close();
  }
}

/** Resolves on SIGINT/SIGTERM. */
export function untilSignal(): Promise<string> {
  return new Promise((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
}
