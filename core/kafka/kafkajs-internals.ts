/**
 * The kafkajs internals Sluice's fixes replace (request-queue-patch.ts, coordinator-patch.ts, metadata-patch.ts,
 * rejoin-patch.ts, fetch-wait.ts, empty-batch-patch.ts), loaded only after checking that kafkajs
 * is the version they were written for and that what they replace is still there: a renamed
 * method would otherwise leave a fix installed and never called. Either failure stops start-up
 * with a message saying what to look at.
 */
import { createRequire } from 'node:module';

/** The kafkajs release the fixes were written against and tested on. */
export const KAFKAJS_VERSION = '2.2.4';

const load = createRequire(import.meta.url);

export class KafkajsMismatchError extends Error {
  override readonly name = 'KafkajsMismatchError';
}

const installed = (load('kafkajs/package.json') as { version: string }).version;
if (installed !== KAFKAJS_VERSION)
  throw new KafkajsMismatchError(
    `kafkajs ${installed} is installed, but core/kafka/*-patch.ts and fetch-wait.ts were written for ` +
      `${KAFKAJS_VERSION}: check each against the new release (and its tests), then update KAFKAJS_VERSION`,
  );

/**
 * A kafkajs module's class, once its prototype has every method named (and, for `reads`, a method
 * whose source still contains the given text, or each of the given texts).
 */
export function kafkajsClass<T>(
  path: string,
  methods: string[],
  reads: Record<string, string | string[]> = {},
): { prototype: T } {
  const cls = load(`kafkajs/src/${path}`) as { prototype: Record<string, unknown> } | undefined;
  for (const m of methods)
    if (typeof cls?.prototype?.[m] !== 'function')
      throw new KafkajsMismatchError(`kafkajs/src/${path} has no method ${m}: the fix that replaces it needs a look`);
  for (const [m, texts] of Object.entries(reads))
    for (const text of [texts].flat())
      if (!String(cls!.prototype[m]).includes(text))
        throw new KafkajsMismatchError(
          `kafkajs/src/${path}'s ${m} no longer contains "${text}": the fix that depends on it needs a look`,
        );
  return cls as unknown as { prototype: T };
}
