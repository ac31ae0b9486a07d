/**
 * The one retry loop: calls `fn` until it succeeds, a failure is not retriable, the attempts or
 * the time run out, or the caller stops; then the last failure is thrown as it was. Which failures
 * are worth another try is the error's `retriable` flag (core/errors.ts) unless the caller says
 * otherwise. Sleep and clock are injectable, so the loop is tested without waiting.
 */
import { isRetriable as retriableFlag } from './errors.ts';

export interface RetryOptions {
  /** Most calls of `fn` (default: no limit). */
  attempts?: number;
  /** Gives up when the next wait would end more than this many ms after the first call (default: no limit). */
  timeoutMs?: number;
  /** The wait after failed call `n` (0 for the first) before the next one. */
  backoff: (n: number) => number;
  /** Whether a failure is worth another call (default: its `retriable` flag). */
  isRetriable?: (err: unknown) => boolean;
  /** Called before each wait, with the failure, the failed call's number and the wait. */
  onRetry?: (err: unknown, n: number, delayMs: number) => void;
  /** Checked after a failure, before and after its wait: true gives up with that failure. */
  stopped?: () => boolean;
  sleep?: (ms: number) => Promise<void>;
  now?: () => number;
}

const realSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export async function retry<T>(fn: (n: number) => Promise<T>, opts: RetryOptions): Promise<T> {
  const {
    attempts = Infinity,
    timeoutMs = Infinity,
    backoff,
    isRetriable = retriableFlag,
    onRetry,
    stopped = () => false,
  } = opts;
  const sleep = opts.sleep ?? realSleep;
  const now = opts.now ?? Date.now;
  const deadline = now() + timeoutMs;
  for (let n = 0; ; n++) {
    try {
      return await fn(n);
    } catch (err) {
      const delay = backoff(n);
      if (!isRetriable(err) || n + 1 >= attempts || now() + delay > deadline || stopped()) throw err;
      onRetry?.(err, n, delay);
      await sleep(delay);
      if (stopped()) throw err;
    }
  }
}

/** Doubling waits: `first`, 2×`first`, … up to `max`. */
export function doubling(first: number, max: number): (n: number) => number {
  return (n) => Math.min(first * 2 ** Math.min(n, 30), max);
}
