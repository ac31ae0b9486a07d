/**
 * A webhook receiver on a raw node:net server (127.0.0.1), for receivers no HTTP server library
 * would let us write: it parses just enough of each request (head + Content-Length body), answers
 * the verification ping and chosen attempts with a clean `200` (Connection: close), and hands the
 * socket of every other request to a misbehaviour that writes whatever bytes it likes.
 *
 * Every connection is recorded: when the request arrived, its X-Service-Delivery-Attempt, how many
 * response bytes the socket accepted, and when (and by which side) it was closed.
 */
import { createServer, type Socket } from 'node:net';

export interface RawConn {
  opened: number;
  /** When the whole request (head and body) had arrived; null until then. */
  requestAt: number | null;
  headers: Record<string, string>;
  body: string;
  /** Bytes of response the socket accepted (handed to the kernel or its write buffer). */
  bytesOut: number;
  /** When the socket closed, and whether the receiver itself ended it. */
  closedAt: number | null;
  closedByReceiver: boolean;
  /** Set by a misbehaviour that finished everything it meant to write (e.g. all 10 MB). */
  finishedWriting: boolean;
  socket: Socket;
}

export type Misbehaviour = (conn: RawConn) => void;

export interface RawReceiver {
  url: string;
  conns: RawConn[];
  /** Connections that carried an event (not the ping). */
  events(): RawConn[];
  until(check: (events: RawConn[]) => boolean, timeoutMs: number, what: string): Promise<RawConn[]>;
  close(): Promise<void>;
}

export const OK_RESPONSE =
  'HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok';

/** Writes `data` and counts it as sent; false once the socket is gone. */
export function send(conn: RawConn, data: string | Buffer): boolean {
  if (conn.socket.destroyed) return false;
  conn.bytesOut += typeof data === 'string' ? Buffer.byteLength(data) : data.length;
  return conn.socket.write(data);
}

/** Answers 200 and ends the connection from the receiver's side. */
export function answerOk(conn: RawConn): void {
  conn.closedByReceiver = true;
  send(conn, OK_RESPONSE);
  conn.socket.end();
}

/**
 * `misbehave` gets every event request for which `cleanFor` is false (by default: only the first
 * attempt misbehaves, so the retry shows up and is answered 200).
 */
export async function rawReceiver(
  misbehave: Misbehaviour,
  cleanFor: (conn: RawConn) => boolean = (c) => c.headers['x-service-delivery-attempt'] !== '1',
): Promise<RawReceiver> {
  const conns: RawConn[] = [];
  const server = createServer((socket) => {
    const conn: RawConn = {
      opened: Date.now(),
      requestAt: null,
      headers: {},
      body: '',
      bytesOut: 0,
      closedAt: null,
      closedByReceiver: false,
      finishedWriting: false,
      socket,
    };
    conns.push(conn);
    socket.on('error', () => {});
    socket.on('close', () => (conn.closedAt = Date.now()));
    let buf = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
      const headers: Record<string, string> = {};
      for (const l of lines.slice(1)) {
        const i = l.indexOf(':');
        if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
      }
      const length = Number(headers['content-length'] ?? 0);
      if (buf.length < end + 4 + length) return;
      socket.off('data', onData);
      conn.headers = headers;
      conn.body = buf.subarray(end + 4, end + 4 + length).toString('utf8');
      conn.requestAt = Date.now();
      if (headers['x-service-event-type'] === 'ping' || cleanFor(conn)) answerOk(conn);
      else misbehave(conn);
    };
    socket.on('data', onData);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const events = () => conns.filter((c) => c.requestAt !== null && c.headers['x-service-event-type'] !== 'ping');
  return {
    url: `http://127.0.0.1:${port}/hook`,
    conns,
    events,
    async until(check, timeoutMs, what) {
      const deadline = Date.now() + timeoutMs;
      while (!check(events())) {
        if (Date.now() > deadline)
          throw new Error(`${what}: not within ${timeoutMs} ms (${events().length} event requests so far)`);
        await new Promise((r) => setTimeout(r, 25));
      }
      return events();
    },
    async close() {
      for (const c of conns) c.socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
