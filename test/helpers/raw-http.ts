/**
 * Raw HTTP/1.1 over a socket, for requests fetch would normalise or refuse to send: dot segments,
 * duplicate framing headers, pipelined bytes. Resolves with everything the server sent before it
 * closed the connection or went quiet for `idleMs`, and whether it closed.
 */
import { connect } from 'node:net';
import { type ConnectionOptions, connect as tlsConnect } from 'node:tls';

export interface RawResponse {
  text: string;
  closed: boolean;
  /** Status codes of every response in `text`, in order. */
  statuses: number[];
}

/** To a port on 127.0.0.1, or to a Unix socket (`{ path }`). */
export function rawHttp(
  port: number | { path: string },
  request: string | Buffer,
  idleMs = 1500,
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(typeof port === 'number' ? { port, host: '127.0.0.1' } : port);
    let text = '';
    let timer: NodeJS.Timeout | undefined;
    const done = (closed: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ text, closed, statuses: [...text.matchAll(/^HTTP\/1\.[01] (\d{3})/gm)].map((m) => Number(m[1])) });
    };
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => done(false), idleMs);
    };
    socket.on('connect', () => {
      socket.write(request);
      arm();
    });
    socket.on('data', (d) => {
      text += d.toString('latin1');
      arm();
    });
    socket.on('end', () => done(true));
    socket.on('close', () => done(true));
    socket.on('error', (err) => (text ? done(true) : reject(err)));
  });
}

/** One GET with the path sent exactly as given (like `curl --path-as-is`). */
export function rawGet(port: number, path: string, headers: Record<string, string> = {}): Promise<RawResponse> {
  const lines = [
    `GET ${path} HTTP/1.1`,
    'host: 127.0.0.1',
    'connection: close',
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ];
  return rawHttp(port, `${lines.join('\r\n')}\r\n\r\n`);
}

export interface RawTlsResponse extends RawResponse {
  /** The TLS handshake completed (in TLS 1.3 a client's side completes before the server checked its certificate). */
  handshake: boolean;
  /** The error that ended the connection, if any (e.g. ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED, ECONNRESET). */
  error?: string;
  /** Milliseconds from sending the request to the first byte of the answer; undefined: none came. */
  firstByteMs?: number;
}

/**
 * `rawHttp` over TLS (node:tls, SNI localhost): `tlsOptions` carries the CA and the client
 * certificate. Never rejects: a refused handshake is a result (`error`, no statuses).
 */
export function rawHttps(
  port: number,
  request: string | Buffer,
  tlsOptions: ConnectionOptions,
  idleMs = 1500,
): Promise<RawTlsResponse> {
  return new Promise((resolve) => {
    const socket = tlsConnect({ port, host: '127.0.0.1', servername: 'localhost', ...tlsOptions });
    let text = '';
    let handshake = false;
    let error: string | undefined;
    let sentAt = 0;
    let firstByteMs: number | undefined;
    let timer: NodeJS.Timeout | undefined;
    let done = false;
    const finish = (closed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      const statuses = [...text.matchAll(/^HTTP\/1\.[01] (\d{3})/gm)].map((m) => Number(m[1]));
      resolve({ text, closed, statuses, handshake, error, firstByteMs });
    };
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => finish(false), idleMs);
    };
    socket.on('secureConnect', () => {
      handshake = true;
      sentAt = performance.now();
      socket.write(request);
      arm();
    });
    socket.on('data', (d) => {
      firstByteMs ??= performance.now() - sentAt;
      text += d.toString('latin1');
      arm();
    });
    socket.on('end', () => finish(true));
    socket.on('close', () => finish(true));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      error = err.code ?? err.message;
      finish(true);
    });
    arm();
  });
}
