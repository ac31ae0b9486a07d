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
 * Only a caller that asks (`keepBody`, the test send) gets the first bytes of the body back;
 * deliveries keep none.
 */
import type { LookupFunction } from 'node:net';
import { createSecureContext, type SecureContext } from 'node:tls';
import type { DeliveryClientCertificate } from '../core/config/readers.ts';
import type { DeliveryProxy } from '../core/config/webhooks.ts';
import { LruMap } from '../core/lru.ts';
import { Http1Agent, type ExchangeHandler, type ResponseHead } from './http1-agent.ts';

export interface AttemptOutcome {
  ok: boolean;
  status: number | null;
  error: string | null;
  durationMs: number;
  /** A 429 or 503 with Retry-After: how long the receiver asked us to wait (ms), else null. */
  retryAfterMs?: number | null;
  /**
   * With `keepBody`: the first bytes of the body (at most that many; empty when it had none),
   * or null when no answer's head arrived. Absent otherwise.
   */
  body?: Buffer | null;
}

export interface AttemptOptions {
  timeoutMs: number;
  /**
   * Runs before the request is sent (SSRF check of the URL); rejects to refuse the target, or
   * returns undefined when it is known to pass (no promise, no wait).
   */
  checkTarget?: (url: URL) => Promise<void> | undefined;
  dispatcher?: Http1Agent;
  /** Keep up to this many bytes of the response body in the outcome's `body` (default 0: none). */
  keepBody?: number;
  /** Whose request (the tenant): requests of different partitions never share a connection. */
  partition?: string;
}

/** The TLS context of a client certificate, made once per certificate (a one-off ping reuses it). */
const clientContexts = new WeakMap<DeliveryClientCertificate, SecureContext>();

/**
 * The TLS context that presents `cert` (SLUICE_DELIVERY_CLIENT_CERT/_KEY) to receivers that ask
 * for a client certificate, and trusts the default CAs (with NODE_EXTRA_CA_CERTS) as before.
 */
export function clientCertificateContext(cert: DeliveryClientCertificate): SecureContext {
  let context = clientContexts.get(cert);
  if (!context) {
    context = createSecureContext({ cert: cert.chainPem, key: cert.key.export({ type: 'pkcs8', format: 'pem' }) });
    clientContexts.set(cert, context);
  }
  return context;
}

/**
 * A shared keep-alive agent; connections per origin are bounded so one host cannot take them all.
 * `lookup` (target-guard.ts guardedLookup) makes every new connection go to a checked address;
 * `clientCertificate` is presented on every https connection whose receiver asks for one.
 */
export function createDeliveryAgent(
  connectionsPerOrigin = 16,
  lookup?: LookupFunction,
  clientCertificate?: DeliveryClientCertificate | null,
  proxy?: DeliveryProxy | null,
): Http1Agent {
  return new Http1Agent({
    connectionsPerOrigin,
    keepAliveMs: 30_000,
    ...(lookup ? { lookup } : {}),
    ...(proxy ? { proxy } : {}),
    ...(clientCertificate ? { secureContext: clientCertificateContext(clientCertificate) } : {}),
  });
}

/** The agent of attempts that name none (no target guard on its connections: tests and tools). */
let defaultAgent: Http1Agent | null = null;
function sharedAgent(): Http1Agent {
  defaultAgent ??= createDeliveryAgent();
  return defaultAgent;
}

/** The request as one string: line, head (host and content-length first) and body. */
function requestText(target: URL, headers: Record<string, string>, rawBody: string): string | null {
  const length = Buffer.byteLength(rawBody);
  const line = `POST ${target.pathname}${target.search} HTTP/1.1\r\n`;
  let text = `${line}host: ${target.host}\r\ncontent-length: ${length}\r\n`;
  for (const name in headers) {
    const value = headers[name];
    // Values are Sluice's own (signatures, validated ids and types); a line break would split the head.
    if (value.includes('\n') || value.includes('\r')) return null;
    text += `${name}: ${value}\r\n`;
  }
  return `${text}\r\n${rawBody}`;
}

/** How much of a response body is read at most; the rest is never read (the connection is closed). */
export const MAX_RESPONSE_BYTES = 64 * 1024;

/** What a deadline holds: when it falls, and what to do then unless done by then. */
interface Deadline {
  /** When it falls; 0 until the entry is added. */
  at: number;
  done: boolean;
  /** The list it waits in while live, and its neighbours there. */
  list: DeadlineList | null;
  prev: Deadline | null;
  next: Deadline | null;
  expire(): void;
}

/** The live entries of one timeout, in the order they started: the head falls first. */
interface DeadlineList {
  timeoutMs: number;
  head: Deadline | null;
  tail: Deadline | null;
}

/**
 * Attempts past their deadline. Every attempt of a deliverer has the same timeout, so deadlines come
 * in start order: one list per timeout, an entry unlinked when answered, and one timer at the
 * earliest deadline (no timer and no AbortSignal per attempt: at thousands of attempts a second,
 * those were a measurable share).
 *
 * The timer waits for a deadline, seconds away, not a short tick: Node re-arms its one native timer
 * for the earliest JavaScript timer and does not disarm it when that timer is cleared. A 50 ms ticker
 * started for each burst of attempts and cleared when the burst was answered still woke the process
 * 50 ms later, for nothing, about once for every three events at 500 deliveries/s (issue 33). A
 * cleared timer seconds away is never the earliest while the process's 1 s timers run.
 */
class Deadlines {
  private readonly lists = new Map<number, DeadlineList>();
  private timer: NodeJS.Timeout | null = null;
  /** When the timer fires (ms). */
  private timerAt = 0;
  private live = 0;

  add(timeoutMs: number, entry: Deadline): void {
    let list = this.lists.get(timeoutMs);
    if (!list) {
      list = { timeoutMs, head: null, tail: null };
      this.lists.set(timeoutMs, list);
    }
    entry.at = Date.now() + timeoutMs;
    entry.list = list;
    entry.prev = list.tail;
    entry.next = null;
    if (list.tail) list.tail.next = entry;
    else list.head = entry;
    list.tail = entry;
    this.live++;
    if (this.timer === null || entry.at < this.timerAt) this.arm(entry.at);
  }

  /** An entry is done (answered, failed or expired), once: the timer stops with the last live one. */
  settle(entry: Deadline): void {
    const list = entry.list;
    if (list === null) return; // never added (an unusable URL), or unlinked already
    if (entry.prev) entry.prev.next = entry.next;
    else list.head = entry.next;
    if (entry.next) entry.next.prev = entry.prev;
    else list.tail = entry.prev;
    entry.list = entry.prev = entry.next = null;
    if (list.head === null) this.lists.delete(list.timeoutMs);
    if (--this.live > 0 || this.timer === null) return;
    clearTimeout(this.timer);
    this.timer = null;
  }

  private arm(at: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => this.fire(), Math.max(0, at - Date.now()));
  }

  /** Expires what is due, then waits for the next deadline (at least TICK_MS on: expiries come in batches). */
  private fire(): void {
    this.timer = null;
    const now = Date.now();
    let next = Number.POSITIVE_INFINITY;
    for (const list of [...this.lists.values()]) {
      for (let e = list.head; e !== null && e.at <= now; e = list.head) {
        this.settle(e);
        e.expire();
      }
      if (list.head) next = Math.min(next, list.head.at);
    }
    if (this.live > 0 && this.timer === null) this.arm(Math.max(next, now + TICK_MS));
  }
}

/** How late past its timeout an attempt may be cut. */
const TICK_MS = 50;
const deadlines = new Deadlines();

/** Parsed target URLs (an endpoint's URL is parsed once, not once per attempt). */
const parsedUrls = new LruMap<string, URL | null>(4096);
function parseUrl(url: string): URL | null {
  const held = parsedUrls.get(url);
  if (held !== undefined) return held;
  try {
    return parsedUrls.set(url, new URL(url));
  } catch {
    return parsedUrls.set(url, null);
  }
}

/**
 * One attempt under way: its deadline, the handler of its answer, and its outcome. A class, not
 * closures: an attempt allocates one object, not a dozen functions.
 */
class Attempt implements Deadline, ExchangeHandler {
  at = 0;
  done = false;
  list: DeadlineList | null = null;
  prev: Deadline | null = null;
  next: Deadline | null = null;
  private readonly started = Date.now();
  /** When the request was handed to a connection: time spent waiting for one is not the receiver's. */
  private writtenAt = 0;
  private status = 0;
  private head: ResponseHead | null = null;
  private size = 0;
  private abort: (() => void) | null = null;
  /** The body's first bytes, only when `keepBody` asks for them (allocated at the first byte). */
  private kept: Buffer | null = null;
  private keptBytes = 0;

  constructor(
    private readonly resolve: (o: AttemptOutcome) => void,
    private readonly timeoutMs: number,
    private readonly keepBody = 0,
  ) {}

  send(agent: Http1Agent, target: URL, request: string, partition?: string): void {
    if (!this.done) this.abort = agent.send(target, request, this, partition);
  }

  onWritten(): void {
    this.writtenAt = Date.now();
  }

  expire(): void {
    this.finish(false, null, `no full response within ${this.timeoutMs} ms`);
    this.abort?.();
  }

  onHead(h: ResponseHead): void {
    this.status = h.status;
    this.head = h;
  }

  onData(bytes: number, chunk: Buffer, start: number): void {
    this.size += bytes;
    if (this.keptBytes < this.keepBody) this.keep(chunk, start, bytes);
    if (this.size >= MAX_RESPONSE_BYTES && !this.done) {
      this.judge();
      this.abort?.();
    }
  }

  onEnd(): void {
    this.judge();
  }

  private keptBody(): Buffer {
    return this.kept === null ? Buffer.alloc(0) : this.kept.subarray(0, this.keptBytes);
  }

  private keep(chunk: Buffer, start: number, bytes: number): void {
    this.kept ??= Buffer.allocUnsafe(this.keepBody);
    const n = Math.min(bytes, this.keepBody - this.keptBytes);
    chunk.copy(this.kept, this.keptBytes, start, start + n);
    this.keptBytes += n;
  }

  onError(err: unknown): void {
    const e = err as { code?: string; message?: string; cause?: { code?: string; message?: string } };
    const code = e.cause?.code ?? e.code;
    this.finish(false, null, code ? `${code}: ${e.cause?.message ?? e.message}` : (e.message ?? String(err)));
  }

  /**
   * The answer is judged on its status once the body is complete, or once MAX_RESPONSE_BYTES of it
   * arrived (then the rest is dropped with the connection).
   */
  private judge(): void {
    const { status } = this;
    const wait = status === 429 || status === 503 ? retryAfterMs(this.head?.retryAfter, Date.now()) : null;
    if (status >= 200 && status < 300) this.finish(true, status, null);
    else if (wait !== null) this.finish(false, status, `HTTP ${status}, Retry-After ${Math.ceil(wait / 1000)} s`, wait);
    else if (status >= 300 && status < 400)
      this.finish(false, status, `redirect to ${this.head?.location ?? '(no location)'} not followed`);
    else this.finish(false, status, `HTTP ${status}`);
  }

  finish(ok: boolean, status: number | null, error: string | null, retryAfter?: number): void {
    if (this.done) return;
    this.done = true;
    deadlines.settle(this);
    const outcome: AttemptOutcome = { ok, status, error, durationMs: Date.now() - (this.writtenAt || this.started) };
    if (retryAfter !== undefined) outcome.retryAfterMs = retryAfter;
    if (this.keepBody > 0) outcome.body = this.head === null ? null : this.keptBody();
    this.resolve(outcome);
  }
}

export function attemptDelivery(
  url: string,
  rawBody: string,
  headers: Record<string, string>,
  opts: AttemptOptions,
): Promise<AttemptOutcome> {
  return new Promise<AttemptOutcome>((resolve) => {
    const a = new Attempt(resolve, opts.timeoutMs, opts.keepBody);
    const target = parseUrl(url);
    const request = target === null ? null : requestText(target, headers, rawBody);
    if (target === null || request === null) {
      a.finish(false, null, target === null ? 'invalid URL' : 'a header value holds a line break');
      return;
    }
    deadlines.add(opts.timeoutMs, a);
    const agent = opts.dispatcher ?? sharedAgent();
    const checking = opts.checkTarget?.(target);
    if (checking === undefined) a.send(agent, target, request, opts.partition);
    else
      checking.then(
        () => a.send(agent, target, request, opts.partition),
        (err) => a.onError(err),
      );
  });
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
