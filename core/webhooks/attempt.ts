/**
 * One HTTP attempt at a webhook target. Success is a 2xx within the timeout; any other status,
 * a redirect (never followed), a connection error or no full response in time is a failure. The
 * outcome is a value, never an exception, so the caller decides on it.
 *
 * The timeout bounds the whole attempt, from the target check to the last byte read: a receiver
 * that drip-feeds its answer is cut at `timeoutMs` in total, never "timeoutMs between bytes", and
 * the connection is closed then. A "full response" is the status line and headers plus the body
 * up to MAX_RESPONSE_BYTES: Sluice has no use for a receiver's body, so it reads no more than
 * that, closes the connection, and judges the answer on its status (a 2xx with a 10 MB body is a
 * success; a body that ends before its announced length, or bytes that are not HTTP, a failure).
 */
import type { LookupFunction } from 'node:net';
import { Agent, request } from 'undici';

export interface AttemptOutcome {
  ok: boolean;
  status: number | null;
  error: string | null;
  durationMs: number;
  /** A 429 or 503 with Retry-After: how long the receiver asked us to wait (ms), else null. */
  retryAfterMs?: number | null;
}

export interface AttemptOptions {
  timeoutMs: number;
  /** Runs before connecting (SSRF check on the resolved address); throws to refuse the target. */
  checkTarget?: (url: URL) => Promise<void>;
  dispatcher?: Agent;
}

/**
 * A shared keep-alive agent; connections per origin are bounded so one host cannot take them all.
 * `lookup` (target-guard.ts guardedLookup) makes every new connection go to a checked address.
 */
export function createDeliveryAgent(connectionsPerOrigin = 16, lookup?: LookupFunction): Agent {
  return new Agent({
    keepAliveTimeout: 30_000,
    keepAliveMaxTimeout: 120_000,
    connections: connectionsPerOrigin,
    pipelining: 1,
    connect: { timeout: 10_000, ...(lookup ? { lookup } : {}) },
  });
}

/** How much of a response body is read at most; the rest is never read (the connection is closed). */
export const MAX_RESPONSE_BYTES = 64 * 1024;

/** `work`, or a rejection once `signal` aborts (the target check must not outlast the attempt). */
function beforeAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (err) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

export async function attemptDelivery(
  url: string,
  rawBody: string,
  headers: Record<string, string>,
  opts: AttemptOptions,
): Promise<AttemptOutcome> {
  const started = Date.now();
  const done = (ok: boolean, status: number | null, error: string | null): AttemptOutcome => ({
    ok,
    status,
    error,
    durationMs: Date.now() - started,
  });
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return done(false, null, 'invalid URL');
  }
  const signal = AbortSignal.timeout(opts.timeoutMs);
  try {
    if (opts.checkTarget) await beforeAbort(opts.checkTarget(target), signal);
    const res = await request(target, {
      method: 'POST',
      headers,
      body: rawBody,
      signal,
      dispatcher: opts.dispatcher,
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
    });
    // Read (a bounded amount of) the body: the response is complete when its body is, or once
    // MAX_RESPONSE_BYTES of it arrived; then the rest is dropped with the connection.
    let size = 0;
    for await (const chunk of res.body) {
      size += (chunk as Buffer).length;
      if (size >= MAX_RESPONSE_BYTES) {
        res.body.destroy();
        break;
      }
    }
    const status = res.statusCode;
    if (status >= 200 && status < 300) return done(true, status, null);
    if (status === 429 || status === 503) {
      const wait = retryAfterMs(res.headers['retry-after'], Date.now());
      if (wait !== null)
        return {
          ...done(false, status, `HTTP ${status}, Retry-After ${Math.ceil(wait / 1000)} s`),
          retryAfterMs: wait,
        };
    }
    if (status >= 300 && status < 400)
      return done(false, status, `redirect to ${res.headers.location ?? '(no location)'} not followed`);
    return done(false, status, `HTTP ${status}`);
  } catch (err) {
    if (signal.aborted) return done(false, null, `no full response within ${opts.timeoutMs} ms`);
    const e = err as { code?: string; message?: string; cause?: { code?: string; message?: string } };
    const code = e.cause?.code ?? e.code;
    return done(false, null, code ? `${code}: ${e.cause?.message ?? e.message}` : (e.message ?? String(err)));
  }
}

/** RFC 9110 §10.2.3: delay-seconds or an HTTP-date; null when absent or unreadable. */
export function retryAfterMs(value: string | string[] | undefined, now: number): number | null {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined) return null;
  const t = v.trim();
  if (/^\d{1,10}$/.test(t)) return Number(t) * 1000;
  const at = Date.parse(t);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}
