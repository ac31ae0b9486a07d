/**
 * Raw HTTP/1.1 over a socket, for requests fetch would normalise or refuse to send: dot segments,
 * duplicate framing headers, pipelined bytes. Resolves with everything the server sent before it
 * closed the connection or went quiet for `idleMs`, and whether it closed.
 */
import { connect } from 'node:net';

export interface RawResponse {
  text: string;
  closed: boolean;
  /** Status codes of every response in `text`, in order. */
  statuses: number[];
}

export function rawHttp(port: number, request: string | Buffer, idleMs = 1500): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
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
