/**
 * The one place that touches uWebSockets.js. It applies the rules of uWS once, so handlers are
 * plain functions: read everything from the request before the first await, attach onAborted
 * before going async, copy onData chunks (uWS reuses them), cap the body while reading, write
 * inside cork(), and never let an exception escape a uWS callback.
 */
import uWS from '@trufflesuite/uws-js-unofficial';
import { isPromise, type Pipeline } from './pipeline.ts';
import { tooLarge } from './problem.ts';
import { invalidRequest, SluiceBaseError } from '../core/errors.ts';
import type { IncomingRequest, Reply } from './types.ts';
import { tracing, withContext } from '../core/tracing.ts';
import type { ListenerTls } from '../core/config/readers.ts';
import { privateSocketPath, startClientCertGate } from './client-cert-gate.ts';

const STATUS_TEXT: Record<number, string> = {
  200: 'OK',
  201: 'Created',
  202: 'Accepted',
  204: 'No Content',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  421: 'Misdirected Request',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

export interface HttpServer {
  port: number;
  close(): void;
}

/**
 * Every response carries these; authenticated ones (a request with Authorization) are never cached,
 * unless the reply is `shared` (the same for every caller, so a token does not make it private).
 */
const ALWAYS = { 'x-content-type-options': 'nosniff' };
const NO_BODY: Promise<Buffer> = Promise.resolve(Buffer.alloc(0));
const AUTHENTICATED = { 'cache-control': 'no-store' };

// uWS otherwise announces itself in a `uWebSockets: 20` header on every response.
uWS._cfg('silent');

/**
 * uWS's text form of an address (ASCII: an IPv4 or IPv6 literal), copied out of its buffer (valid
 * only during the callback) without a Buffer per request.
 */
function addressText(text: ArrayBuffer): string {
  return String.fromCharCode.apply(null, new Uint8Array(text) as unknown as number[]);
}

/**
 * Strict framing (RFC 9112 §6): a request whose body length could be read two ways is refused
 * and its connection closed, so nothing after it on the connection (a smuggled request) is read.
 */
export function framingFault(contentLengths: string[], transferEncodings: string[]): string | null {
  if (contentLengths.length > 1) return 'more than one Content-Length header';
  if (contentLengths.length === 1 && !/^\d{1,15}$/.test(contentLengths[0]))
    return 'Content-Length must be a decimal number';
  if (transferEncodings.length > 1) return 'more than one Transfer-Encoding header';
  if (transferEncodings.length === 1) {
    if (transferEncodings[0].trim().toLowerCase() !== 'chunked')
      return 'the only Transfer-Encoding accepted is "chunked"';
    if (contentLengths.length > 0) return 'Content-Length and Transfer-Encoding together';
  }
  return null;
}

/**
 * The public listener: plain HTTP, HTTPS through uWS's TLS app, or (a client certificate required)
 * the plain app on a private Unix socket behind the client-certificate gate (ingress/client-cert-gate.ts).
 */
export function listen(
  pipeline: Pipeline,
  host: string,
  port: number,
  maxBodyBytes: number,
  tls: ListenerTls | null = null,
): Promise<HttpServer> {
  const gated = tls?.clientCaFile ? { ...tls, clientCaFile: tls.clientCaFile } : null;
  const app = tls && !gated ? uWS.SSLApp({ cert_file_name: tls.certFile, key_file_name: tls.keyFile }) : uWS.App();
  app.any('/*', (res, req) => {
    const startedAt = performance.now();
    // Behind the gate, the client is named by the PROXY header the gate leads each connection with; a
    // connection without one (made on this host, to the private socket) is not served.
    const remoteAddress = addressText(gated ? res.getProxiedRemoteAddressAsText() : res.getRemoteAddressAsText());
    if (gated && remoteAddress === '') return void res.close();
    let aborted = false;
    let onAbort: (() => void) | null = null;
    res.onAborted(() => {
      aborted = true;
      onAbort?.();
    });
    // No prototype: a header named `constructor` or `__proto__` is a header like any other.
    const headers: Record<string, string> = Object.create(null);
    const contentLengths: string[] = [];
    const transferEncodings: string[] = [];
    req.forEach((k, v) => {
      if (k === 'content-length') contentLengths.push(v);
      else if (k === 'transfer-encoding') transferEncodings.push(v);
      headers[k] = Object.hasOwn(headers, k) ? `${headers[k]}, ${v}` : v;
    });
    const incoming: IncomingRequest = {
      method: req.getMethod().toUpperCase(),
      path: req.getUrl(),
      query: new URLSearchParams(req.getQuery() ?? ''),
      headers,
      remoteAddress,
      route: undefined,
      tenant: undefined,
    };
    const traced = tracing.on ? pipeline.startSpan(incoming) : undefined;
    const authenticated = incoming.headers.authorization !== undefined;
    const write = (reply: Reply, close = false) => {
      pipeline.finished(incoming, aborted ? 499 : reply.status, startedAt, traced);
      if (aborted) return;
      const send = () => {
        res.writeStatus(`${reply.status} ${STATUS_TEXT[reply.status] ?? 'Status'}`);
        // The reply's headers, then ALWAYS and (for an authenticated request) AUTHENTICATED, which
        // win over a reply header of the same name.
        const extra = authenticated && !reply.shared ? AUTHENTICATED : null;
        if (reply.headers)
          for (const k in reply.headers)
            if (!Object.hasOwn(ALWAYS, k) && !(extra && Object.hasOwn(extra, k))) res.writeHeader(k, reply.headers[k]);
        for (const k in ALWAYS) res.writeHeader(k, ALWAYS[k as keyof typeof ALWAYS]);
        if (extra) for (const k in extra) res.writeHeader(k, extra[k as keyof typeof extra]);
        if (incoming.method === 'HEAD') {
          // Never endWithoutBody(undefined): uWS reads an explicit undefined as a length of 2^63,
          // announces it (Content-Length: 9223372036854775808) and then waits for those bytes, so
          // the connection answers nothing more (keep-alive) or is never closed (Connection: close).
          // Without arguments the response is complete, and uWS honours Connection: close itself.
          if (close) res.endWithoutBody(0, true);
          else res.endWithoutBody();
        } else res.end(reply.body ?? '', close);
      };
      // A close is only ever written outside uWS's request callback (the framing refusal below):
      // there cork() uncorks when it returns and uWS acts on the close of end(…, true).
      res.cork(send);
    };
    try {
      const fault = framingFault(contentLengths, transferEncodings);
      if (fault) {
        const reply = pipeline.errorReply(
          invalidRequest([{ path: 'headers', message: `request framing refused: ${fault}` }]),
          incoming,
          undefined,
        );
        // uWS parses every request already in a connection's buffer before it acts on a close, so
        // bytes pipelined behind a refused request (a smuggled request) would be answered if the
        // refusal were sent now. Left pending until the next turn of the event loop, it makes uWS
        // itself close this connection, and only this one, when it parses another request on it
        // ("not ready for another request": onAborted runs, the smuggled request never reaches
        // us). The refusal is then sent, and the connection closed, only when nothing followed.
        // Nothing is keyed by address: other connections from the same address are not touched.
        setImmediate(() => write(reply, true));
        return;
      }
      const front = pipeline.front(incoming);
      if ('reply' in front) return write(front.reply);
      // Start reading the body now, synchronously, as uWS requires; a request framed with neither
      // header has none (RFC 9112 §6.3), so nothing is set up to read it.
      const body =
        contentLengths.length === 0 && transferEncodings.length === 0
          ? NO_BODY
          : readBody(res, maxBodyBytes, (settle) => (onAbort = settle));
      const back = () => pipeline.back(incoming, front, () => body);
      // The handler runs in the request span's context, so what it writes to Kafka carries it.
      const reply = traced ? withContext(traced.ctx, back) : back();
      if (!isPromise(reply)) return write(reply);
      reply.then(write, (err) => write(pipeline.errorReply(err, incoming, front.route)));
    } catch (err) {
      write(pipeline.errorReply(err, incoming, undefined));
    }
  });
  const close = (token: uWS.us_listen_socket) => {
    uWS.us_listen_socket_close(token);
    // Open keep-alive connections too (untyped in this build): otherwise a stop waits for
    // uWS's 10 s idle timeout while any client holds a connection.
    (app as unknown as { close(): void }).close();
  };
  return new Promise((resolve, reject) => {
    const refused = `cannot listen on ${host}:${port}: the port is in use or not allowed`;
    if (!gated)
      return void app.listen(host, port, (token) => {
        if (!token) return reject(new SluiceBaseError('LISTEN_FAILED', refused));
        resolve({ port: uWS.us_socket_local_port(token), close: () => close(token) });
      });
    // Behind the gate, the app listens on a private Unix socket only.
    const socket = privateSocketPath();
    app.listen_unix((token) => {
      if (!token) {
        socket.remove();
        return reject(new SluiceBaseError('LISTEN_FAILED', `cannot listen on ${socket.path}`));
      }
      startClientCertGate({ host, port, tls: gated, upstreamPath: socket.path }).then(
        (gate) =>
          resolve({
            port: gate.port,
            close: () => {
              gate.close();
              close(token);
              socket.remove();
            },
          }),
        (err) => {
          close(token);
          socket.remove();
          reject(err);
        },
      );
    }, socket.path);
  });
}

/** Request bodies being read right now (a gauge: an upload the client abandoned must not stay here). */
export const bodyReads = { pending: 0 };

/** Reads the body; `onAbort` is handed a function that fails it when the client goes away mid-upload. */
function readBody(res: uWS.HttpResponse, max: number, onAbort: (settle: () => void) => void): Promise<Buffer> {
  bodyReads.pending++;
  const p = new Promise<Buffer>((resolve, reject) => {
    onAbort(() =>
      reject(invalidRequest([{ path: 'body', message: 'the client closed the connection before the body ended' }])),
    );
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    res.onData((chunk, isLast) => {
      if (failed) return;
      size += chunk.byteLength;
      if (size > max) {
        failed = true;
        return reject(tooLarge(max));
      }
      chunks.push(Buffer.from(new Uint8Array(chunk)));
      if (isLast) resolve(Buffer.concat(chunks));
    });
  });
  p.catch(() => {}).finally(() => bodyReads.pending--); // (a request refused early never awaits its body)
  return p;
}
