/**
 * A dependency loaded by its first use instead of at start: for modules only some processes need
 * (undici for the data plane's proxy, yaml when the compiled contract is missing), whose loading is
 * paid by every process that imports them otherwise.
 *
 *   const undici = lazyModule<typeof import('undici')>('undici');
 *   await undici().request(url);
 */
import { createRequire } from 'node:module';

const requireModule = createRequire(import.meta.url);

export function lazyModule<T>(id: string): () => T {
  let loaded: T | undefined;
  return () => {
    loaded ??= requireModule(id) as T;
    return loaded;
  };
}
