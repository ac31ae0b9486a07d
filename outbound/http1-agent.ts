/**
 * The HTTP/1.1 client of webhook attempts: keep-alive connections per origin (at most
 * `connectionsPerOrigin`, one request at a time on each), a request written with one socket write,
 * and a response read only as far as an attempt needs it: the status, a few header fields, and the
 * body counted, not kept (a handler sees each piece in the read buffer, and may copy it). A
 * general client (undici) spent twice the CPU per request on what an attempt never uses (request
 * objects, header validation, body streams), about a tenth of a delivery's whole cost
 * (docs/decisions.md, issue 21).
 *
 *   const agent = new Http1Agent({ connectionsPerOrigin: 8, lookup });
 *   // the whole request as one string; a tenant's requests never share a connection with another's
 *   const abort = agent.send(new URL('https://example.com/hook'), `POST /hook HTTP/1.1\r\n…\r\n\r\n${body}`,
 *     { onHead, onData, onEnd, onError }, tenantId);
 *
 * Framing of the answer, as strict as llhttp (the parser of node:http and undici; the hostile
 * receivers test runs one corpus through both): a 1xx is skipped (a 101 is an error; interim heads
 * and trailers count toward MAX_HEAD_BYTES, at most MAX_INTERIM of them), a 204/304 has no body,
 * then `transfer-encoding: chunked` (alone: any other coding, two such headers, or one beside
 * `content-length` is an error), else `content-length` (two different values are an error), else
 * the body runs to the close. A status below 100, a header name that is not a token, a folded line
 * or a head over MAX_HEAD_BYTES (per head, however it arrived) is an error.
 *
 * A connection is reused only after a complete answer that did not ask for `connection: close`,
 * whose request was written whole, with nothing after it in the same read, and never longer than
 * the receiver's `keep-alive: timeout` hint less a second (or 30 s). Connections are pooled per
 * origin *and partition* (the tenant): a receiver's stray bytes can only ever meet its own
 * tenant's next request, and one tenant's requests never wait for another's connections.
 */
import { connect as netConnect, isIP, type LookupFunction, type Socket } from 'node:net';
import { type SecureContext, connect as tlsConnect } from 'node:tls';
import type { DeliveryProxy } from '../core/config/webhooks.ts';

/** The answer's head as an attempt reads it. */
export interface ResponseHead {
  status: number;
  retryAfter?: string;
  location?: string;
}

export interface ExchangeHandler {
  /** The request was handed to a connection (the time before it is waiting for a pooled one). */
  onWritten?(): void;
  /** The final (non-1xx) status line and head. */
  onHead(head: ResponseHead): void;
  /**
   * `bytes` more of the body arrived: `chunk[start, start + bytes)`, valid only during the call
   * (the agent keeps nothing; a handler that wants the bytes copies them).
   */
  onData(bytes: number, chunk: Buffer, start: number): void;
  /** The whole answer arrived. */
  onEnd(): void;
  /** No (complete) answer: a connection error, bad framing, or the connection closed too early. */
  onError(err: Error & { code?: string }): void;
}

export interface Http1AgentOptions {
  connectionsPerOrigin: number;
  /** Resolves every new connection's host (target-guard.ts guardedLookup: checked addresses only). */
  lookup?: LookupFunction;
  /** How long an idle connection is kept (the receiver's keep-alive hint, less 1 s, if shorter). */
  keepAliveMs?: number;
  /**
   * The TLS context of every https connection, made once (attempt.ts: the client certificate of
   * SLUICE_DELIVERY_CLIENT_CERT beside the default trusted CAs); absent: node's default per connection.
   */
  secureContext?: SecureContext;
  /** Every connection goes through this HTTP CONNECT proxy (SLUICE_DELIVERY_PROXY); absent: direct. */
  proxy?: DeliveryProxy;
}

/** The most bytes of heads (interim ones and trailers included) one answer may have. */
export const MAX_HEAD_BYTES = 64 * 1024;
/** The most interim (1xx) answers before the final one. */
export const MAX_INTERIM = 16;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const STATUS_START = 'HTTP/1.';
/** Control characters other than HTAB, which no header value may hold (llhttp refuses them too). */
const CONTROL = /[\x00-\x08\x0a-\x1f\x7f]/;

/** Bytes after a complete answer that do not make it suspect: line ends, or another answer's start. */
function harmlessAfterAnswer(chunk: Buffer, at: number): boolean {
  let i = at;
  while (i < chunk.length && (chunk[i] === 0x0d || chunk[i] === 0x0a)) i++;
  if (i === chunk.length) return true;
  const start = chunk.toString('latin1', i, Math.min(chunk.length, i + 5));
  return 'HTTP/'.startsWith(start);
}
const IDLE_SWEEP_MS = 1000;

class ProtocolError extends Error {
  code = 'HTTP_PARSE_ERROR';
}

interface Exchange {
  data: string;
  handler: ExchangeHandler;
  done: boolean;
  /** The connection it was written to, once it was. */
  conn: Connection | null;
}

type BodyMode = 'none' | 'length' | 'chunked' | 'close';

/** One keep-alive connection and the parser of the answer to its current request. */
class Connection {
  exchange: Exchange | null = null;
  idleSince = 0;
  idleLimitMs: number;
  private phase: 'head' | 'body' = 'head';
  /** The head's bytes so far, while it spans several reads. */
  private partial: Buffer | null = null;
  private mode: BodyMode = 'none';
  private left = 0;
  private keepAlive = true;
  /** The answer ended and the connection may take another request, once the read that ended it is done. */
  private reusable = false;
  /** The current request went out whole (its write completed). */
  private written = false;
  /** Head bytes of the current answer so far (interim heads and trailers included), and interim heads. */
  private headBytes = 0;
  private interim = 0;
  /** Inside read(): an answer that completes is told after the rest of the read is looked at. */
  private reading = false;
  /** Chunked: the size line, the data, the CRLF after the data, or the trailer after the last chunk. */
  private chunkState: 'size' | 'data' | 'data-crlf' | 'trailer' = 'size';
  private line = '';

  constructor(
    readonly socket: Socket,
    private readonly pool: Pool,
    keepAliveMs: number,
  ) {
    this.idleLimitMs = keepAliveMs;
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    socket.on('end', () => this.closed(null));
    socket.on('error', (err) => this.closed(err));
    socket.on('close', () => this.closed(null));
  }

  send(x: Exchange): void {
    this.exchange = x;
    x.conn = this;
    this.phase = 'head';
    this.partial = null;
    this.written = false;
    this.headBytes = 0;
    this.interim = 0;
    x.handler.onWritten?.();
    this.socket.write(x.data, () => {
      if (this.exchange === x) this.written = true;
    });
  }

  private read(chunk: Buffer): void {
    const x = this.exchange;
    if (x === null || x.done) {
      // Bytes no request asked for: the connection is in no state to be reused.
      this.socket.destroy();
      return;
    }
    try {
      let at = 0;
      this.reading = true;
      while (at < chunk.length && this.exchange === x && !x.done)
        at = this.phase === 'head' ? this.readHead(chunk, at) : this.readBody(chunk, at);
      this.reading = false;
      if (this.exchange !== null) return;
      const reusable = this.reusable && at === chunk.length;
      this.reusable = false;
      // Bytes after the answer belong to no request: the connection cannot be trusted again, and
      // the answer itself only when it kept the connection open and they are line ends or the
      // start of another answer (as llhttp).
      if (at < chunk.length && !x.done && (!this.keepAlive || !harmlessAfterAnswer(chunk, at))) {
        this.socket.destroy();
        x.done = true;
        x.handler.onError(new ProtocolError('bytes after the answer'));
        return;
      }
      this.endExchange(x);
      if (reusable) this.pool.release(this);
      else this.socket.destroy();
    } catch (err) {
      this.reading = false;
      this.fail(err as Error);
    }
  }

  /** Tells the handler the answer is whole (once: a handler may have ended it already). */
  private endExchange(x: Exchange): void {
    if (x.done) return;
    x.done = true;
    x.handler.onEnd();
  }

  /** Gathers a head and, once complete, acts on it. Returns how far `chunk` was consumed. */
  private readHead(chunk: Buffer, from: number): number {
    const rest = from === 0 ? chunk : chunk.subarray(from);
    const buf = this.partial === null ? rest : Buffer.concat([this.partial, rest]);
    const end = buf.indexOf('\r\n\r\n');
    // What cannot start a status line fails at once, not at the timeout.
    const start = buf.toString('latin1', 0, Math.min(buf.length, STATUS_START.length));
    if (!STATUS_START.startsWith(start)) throw new ProtocolError('not an HTTP/1.x response');
    if (end < 0) {
      if (this.headBytes + buf.length > MAX_HEAD_BYTES) throw new ProtocolError('response head too large');
      this.partial = Buffer.from(buf);
      return chunk.length;
    }
    // Per head, however many reads brought it; interim heads count toward the same bound.
    this.headBytes += end + 4;
    if (this.headBytes > MAX_HEAD_BYTES) throw new ProtocolError('response head too large');
    const heldBefore = buf.length - rest.length;
    this.partial = null;
    this.onHead(buf.toString('latin1', 0, end));
    return from + (end + 4 - heldBefore);
  }

  private onHead(text: string): void {
    const x = this.exchange!;
    // A CR or LF alone would make lines that another parser splits differently.
    if (/[\r\n]/.test(text.replaceAll('\r\n', ''))) throw new ProtocolError('a bare CR or LF in the head');
    const lines = text.split('\r\n');
    const m = /^HTTP\/1\.([01]) (\d{3})(?: |$)/.exec(lines[0]);
    if (!m) throw new ProtocolError('not an HTTP/1.x response');
    const status = Number(m[2]);
    if (status < 100) throw new ProtocolError('invalid status code');
    let length: number | null = null;
    let encodings = 0;
    let chunked = false;
    let close = m[1] === '0';
    const head: ResponseHead = { status };
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i];
      const colon = line.indexOf(':');
      if (colon <= 0) throw new ProtocolError('malformed header line');
      const rawName = line.slice(0, colon);
      // No space before the colon, no folded line: another parser could read either differently.
      if (!TOKEN.test(rawName)) throw new ProtocolError('malformed header name');
      const name = rawName.toLowerCase();
      const value = line.slice(colon + 1).trim();
      if (CONTROL.test(value)) throw new ProtocolError('a control character in a header value');
      if (name === 'content-length') {
        if (!/^\d{1,15}$/.test(value) || length !== null) throw new ProtocolError('invalid content-length');
        length = Number(value);
      } else if (name === 'transfer-encoding') {
        encodings++;
        chunked = value.toLowerCase() === 'chunked';
        if (!chunked) throw new ProtocolError('unsupported transfer-encoding');
      } else if (name === 'connection') close ||= /(?:^|,)\s*close\s*(?:,|$)/i.test(value);
      else if (name === 'keep-alive') {
        const t = /timeout=(\d+)/i.exec(value);
        if (t) this.idleLimitMs = Math.min(this.idleLimitMs, Math.max(0, Number(t[1]) * 1000 - 1000));
      } else if (name === 'retry-after') head.retryAfter ??= value;
      else if (name === 'location') head.location ??= value;
    }
    if (encodings > 1) throw new ProtocolError('more than one transfer-encoding');
    if (chunked && length !== null) throw new ProtocolError('both transfer-encoding and content-length');
    if (status < 200) {
      if (status === 101) throw new ProtocolError('unexpected 101 Switching Protocols');
      if (m[1] === '0') throw new ProtocolError('an interim answer in HTTP/1.0');
      if (++this.interim > MAX_INTERIM) throw new ProtocolError('too many interim answers');
      return; // an interim answer: the final one follows
    }
    this.keepAlive = !close;
    x.handler.onHead(head);
    if (x.done) return;
    if (status === 204 || status === 304 || (!chunked && length === 0)) {
      this.complete();
      return;
    }
    this.phase = 'body';
    if (chunked) {
      this.mode = 'chunked';
      this.chunkState = 'size';
      this.line = '';
    } else if (length !== null) {
      this.mode = 'length';
      this.left = length;
    } else {
      this.mode = 'close';
      this.keepAlive = false;
    }
  }

  private readBody(chunk: Buffer, from: number): number {
    const x = this.exchange!;
    if (this.mode === 'close') {
      x.handler.onData(chunk.length - from, chunk, from);
      return chunk.length;
    }
    if (this.mode === 'length') {
      const n = Math.min(this.left, chunk.length - from);
      this.left -= n;
      if (n > 0) x.handler.onData(n, chunk, from);
      if (this.left === 0 && !x.done) this.complete();
      return from + n;
    }
    return this.readChunked(chunk, from);
  }

  private readChunked(chunk: Buffer, from: number): number {
    const x = this.exchange!;
    let at = from;
    while (at < chunk.length && !x.done && this.exchange === x) {
      if (this.chunkState === 'data') {
        const n = Math.min(this.left, chunk.length - at);
        this.left -= n;
        if (n > 0) x.handler.onData(n, chunk, at);
        at += n;
        if (this.left === 0) this.chunkState = 'data-crlf';
        continue;
      }
      const nl = chunk.indexOf(0x0a, at);
      const end = nl < 0 ? chunk.length : nl + 1;
      this.line += chunk.toString('latin1', at, end);
      // Trailer lines are head bytes: they count toward the same bound.
      if (this.chunkState === 'trailer') this.headBytes += end - at;
      at = end;
      if (this.line.length > 4096) throw new ProtocolError('chunk line too long');
      if (this.headBytes > MAX_HEAD_BYTES) throw new ProtocolError('response trailers too large');
      if (nl < 0) break;
      const line = this.line.replace(/\r?\n$/, '');
      this.line = '';
      if (this.chunkState === 'data-crlf') {
        if (line !== '') throw new ProtocolError('missing CRLF after a chunk');
        this.chunkState = 'size';
      } else if (this.chunkState === 'size') {
        const size = /^([0-9a-fA-F]{1,8})(?:\s*;.*)?$/.exec(line);
        if (!size) throw new ProtocolError('invalid chunk size');
        this.left = Number.parseInt(size[1], 16);
        this.chunkState = this.left === 0 ? 'trailer' : 'data';
      } else if (line === '') this.complete();
    }
    return at;
  }

  /** The answer is complete: the request ends; read() then reuses or closes the connection. */
  private complete(): void {
    const x = this.exchange!;
    this.exchange = null;
    this.phase = 'head';
    // Never reused when the answer came before the request was written whole: its framing is suspect.
    this.reusable = this.keepAlive && this.written && !this.socket.destroyed;
    // Within a read, the end is told once the rest of the read is seen (read() above).
    if (!this.reading) this.endExchange(x);
  }

  private fail(err: Error): void {
    const x = this.exchange;
    this.exchange = null;
    this.socket.destroy();
    if (x && !x.done) {
      x.done = true;
      x.handler.onError(err);
    }
  }

  /** The socket ended or failed: an answer delimited by the close is complete, any other is not. */
  private closed(err: Error | null): void {
    this.pool.forget(this);
    const x = this.exchange;
    if (x === null || x.done) return;
    if (err === null && this.phase === 'body' && this.mode === 'close') {
      this.complete();
      this.socket.destroy();
      return;
    }
    this.fail(
      err ??
        Object.assign(new Error('the receiver closed the connection before a full answer'), { code: 'UND_ERR_SOCKET' }),
    );
  }
}

type PoolOptions = Required<Omit<Http1AgentOptions, 'lookup' | 'secureContext' | 'proxy'>> &
  Pick<Http1AgentOptions, 'lookup' | 'secureContext' | 'proxy'>;

/** The connections to one origin and the requests waiting for one. */
class Pool {
  readonly conns = new Set<Connection>();
  /** Tunnels being set up through the delivery proxy: connections to be, counted against the limit. */
  private tunnelling = 0;
  private readonly idle: Connection[] = [];
  private readonly waiting: Exchange[] = [];
  private readonly host: string;
  private readonly port: number;
  private readonly tls: boolean;

  constructor(
    target: URL,
    private readonly opts: PoolOptions,
  ) {
    this.tls = target.protocol === 'https:';
    // URL keeps IPv6 literals in brackets; connect wants them bare.
    this.host = target.hostname.replace(/^\[(.*)\]$/, '$1');
    this.port = target.port ? Number(target.port) : this.tls ? 443 : 80;
  }

  send(x: Exchange): void {
    let conn = this.idle.pop();
    // The receiver's keep-alive hint is checked here too, not only by the sweep each second.
    const now = Date.now();
    while (conn && now - conn.idleSince >= conn.idleLimitMs) {
      conn.socket.destroy();
      conn = this.idle.pop();
    }
    if (conn) conn.send(x);
    else if (this.conns.size + this.tunnelling < this.opts.connectionsPerOrigin) this.connect(x);
    else this.waiting.push(x);
  }

  /** A waiting request given up: it leaves the queue (one written already is the caller's to cut). */
  unqueue(x: Exchange): void {
    const i = this.waiting.indexOf(x);
    if (i >= 0) this.waiting.splice(i, 1);
  }

  release(conn: Connection): void {
    let next = this.waiting.shift();
    while (next?.done) next = this.waiting.shift();
    if (next) {
      conn.send(next);
      return;
    }
    conn.idleSince = Date.now();
    this.idle.push(conn);
  }

  forget(conn: Connection): void {
    const i = this.idle.indexOf(conn);
    if (i >= 0) this.idle.splice(i, 1);
    if (!this.conns.delete(conn)) return;
    let next = this.waiting.shift();
    while (next?.done) next = this.waiting.shift();
    if (next) this.send(next);
  }

  /** Closes the connections idle past their limit; true when the pool holds nothing any more. */
  sweep(now: number): boolean {
    for (const conn of [...this.idle]) if (now - conn.idleSince >= conn.idleLimitMs) conn.socket.destroy();
    return this.conns.size === 0 && this.tunnelling === 0 && this.waiting.length === 0;
  }

  closeIdle(): void {
    for (const conn of [...this.idle]) conn.socket.destroy();
  }

  destroy(): void {
    for (const conn of [...this.conns]) conn.socket.destroy();
  }

  private connect(x: Exchange): void {
    if (this.opts.proxy) {
      this.connectThroughProxy(x, this.opts.proxy);
      return;
    }
    const { lookup, secureContext } = this.opts;
    const socket = this.tls
      ? tlsConnect({
          host: this.host,
          port: this.port,
          servername: isIP(this.host) ? undefined : this.host,
          ALPNProtocols: ['http/1.1'],
          ...(lookup ? { lookup } : {}),
          ...(secureContext ? { secureContext } : {}),
        })
      : netConnect({ host: this.host, port: this.port, noDelay: true, ...(lookup ? { lookup } : {}) });
    if (this.tls) socket.setNoDelay(true);
    const conn = new Connection(socket, this, this.opts.keepAliveMs);
    this.conns.add(conn);
    // Written before the connection is up: the socket sends it once connected, or fails it.
    conn.send(x);
  }

  /**
   * A tunnel to the target through the operator's proxy. The target's name is resolved here, by
   * the same guarded lookup as a direct connection (the SSRF rules hold for the target, whatever
   * the proxy may reach), and the proxy is asked for the address it resolved to; TLS then runs
   * inside the tunnel with the target's name. Until the tunnel is up it counts in `tunnelling`.
   */
  private connectThroughProxy(x: Exchange, proxy: DeliveryProxy): void {
    this.tunnelling++;
    let settled = false;
    /** The tunnel is a connection now, or never will be: its place in the count goes. */
    const settle = (): boolean => {
      if (settled) return false;
      settled = true;
      this.tunnelling--;
      return true;
    };
    let proxySocket: Socket | null = null;
    const fail = (err: Error & { code?: string }) => {
      proxySocket?.destroy();
      if (!settle()) return;
      if (!x.done) {
        x.done = true;
        x.handler.onError(err);
      }
      this.forgetPlaceholder();
    };
    const resolved = (address: string) => {
      if (x.done)
        return fail(Object.assign(new Error('the attempt ended before the tunnel was up'), { code: 'ABORTED' }));
      const socket = netConnect({ host: proxy.host, port: proxy.port, noDelay: true });
      proxySocket = socket;
      const target = `${isIP(address) === 6 ? `[${address}]` : address}:${this.port}`;
      const auth = proxy.authorization ? `proxy-authorization: ${proxy.authorization}\r\n` : '';
      socket.write(`CONNECT ${target} HTTP/1.1\r\nhost: ${target}\r\n${auth}\r\n`);
      let head = Buffer.alloc(0);
      const onData = (d: Buffer) => {
        head = Buffer.concat([head, d]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) {
          if (head.length > MAX_HEAD_BYTES) fail(new ProtocolError('the proxy answer head is too large'));
          return;
        }
        socket.off('data', onData);
        socket.off('error', fail);
        const status = /^HTTP\/1\.[01] (\d{3})/.exec(head.toString('latin1', 0, end))?.[1];
        if (status === undefined || status[0] !== '2') {
          const e = new Error(`the delivery proxy refused the tunnel: HTTP ${status ?? '(no status)'}`);
          return fail(Object.assign(e, { code: 'PROXY_REFUSED' }));
        }
        if (head.length > end + 4) return fail(new ProtocolError('bytes from the proxy before the request'));
        const tunnel: Socket = this.tls
          ? tlsConnect({
              socket,
              servername: isIP(this.host) ? undefined : this.host,
              ALPNProtocols: ['http/1.1'],
              ...(this.opts.secureContext ? { secureContext: this.opts.secureContext } : {}),
            })
          : socket;
        if (!settle()) return void socket.destroy();
        const conn = new Connection(tunnel, this, this.opts.keepAliveMs);
        this.conns.add(conn);
        if (x.done) {
          tunnel.destroy();
          return;
        }
        conn.send(x);
      };
      socket.on('data', onData);
      socket.on('error', fail);
      socket.on('close', () =>
        fail(Object.assign(new Error('the delivery proxy closed the tunnel'), { code: 'PROXY_CLOSED' })),
      );
    };
    if (isIP(this.host) || !this.opts.lookup) {
      resolved(this.host);
      return;
    }
    this.opts.lookup(this.host, {}, (err, address) => {
      if (err) fail(err as Error & { code?: string });
      else resolved(Array.isArray(address) ? address[0].address : address);
    });
  }

  /** A tunnel that never became a connection: the next waiting request may open one. */
  private forgetPlaceholder(): void {
    let next = this.waiting.shift();
    while (next?.done) next = this.waiting.shift();
    if (next) this.send(next);
  }
}

export class Http1Agent {
  private readonly pools = new Map<string, Pool>();
  private readonly opts: PoolOptions;
  private sweeper: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(opts: Http1AgentOptions) {
    this.opts = { keepAliveMs: 30_000, ...opts };
  }

  /**
   * Sends `data` (the whole request: line, head and body, as one string) to `target`'s origin and
   * returns an abort function (closes its connection; the handler hears nothing more). Requests of
   * different `partition`s (tenants) never share a connection.
   */
  send(target: URL, data: string, handler: ExchangeHandler, partition = ''): () => void {
    const x: Exchange = { data, handler, done: false, conn: null };
    if (this.closed) {
      x.done = true;
      handler.onError(Object.assign(new Error('the delivery agent is closed'), { code: 'UND_ERR_DESTROYED' }));
      return () => {};
    }
    const key = partition === '' ? target.origin : `${partition}\0${target.origin}`;
    let pool = this.pools.get(key);
    if (!pool) {
      pool = new Pool(target, this.opts);
      this.pools.set(key, pool);
    }
    this.sweeper ??= setInterval(() => this.sweep(), IDLE_SWEEP_MS).unref();
    pool.send(x);
    const owner = pool;
    return () => {
      if (x.done) return;
      x.done = true;
      if (x.conn) x.conn.socket.destroy();
      else owner.unqueue(x);
    };
  }

  private sweep(): void {
    const now = Date.now();
    for (const [key, pool] of this.pools) if (pool.sweep(now)) this.pools.delete(key);
    if (this.pools.size === 0 && this.sweeper) {
      clearInterval(this.sweeper);
      this.sweeper = null;
    }
  }

  /** Takes no new requests and closes the idle connections; requests under way finish. */
  async close(): Promise<void> {
    this.closed = true;
    for (const pool of this.pools.values()) pool.closeIdle();
  }

  /** Closes every connection now. */
  async destroy(): Promise<void> {
    this.closed = true;
    for (const pool of this.pools.values()) pool.destroy();
  }
}
