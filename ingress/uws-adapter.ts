/**
 * The one place that touches uWebSockets.js. It applies the rules of uWS once, so handlers are
 * plain functions: read everything from the request before the first await, attach onAborted
 * before going async, copy onData chunks (uWS reuses them), cap the body while reading, write
 * inside cork(), and never let an exception escape a uWS callback.
 */
import uWS from '@trufflesuite/uws-js-unofficial';
import type { Pipeline } from './pipeline.ts';
import { tooLarge } from './pipeline.ts';
import type { IncomingRequest, Reply } from './types.ts';

const STATUS_TEXT: Record<number, string> = {
  200: 'OK', 201: 'Created', 202: 'Accepted', 204: 'No Content', 400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden',
  404: 'Not Found', 405: 'Method Not Allowed', 409: 'Conflict', 413: 'Payload Too Large', 415: 'Unsupported Media Type',
  421: 'Misdirected Request', 422: 'Unprocessable Content', 429: 'Too Many Requests', 500: 'Internal Server Error',
  502: 'Bad Gateway', 503: 'Service Unavailable', 504: 'Gateway Timeout',
};

export interface HttpServer {
  port: number;
  close(): void;
}

export function listen(pipeline: Pipeline, host: string, port: number, maxBodyBytes: number): Promise<HttpServer> {
  const app = uWS.App();
  app.any('/*', (res, req) => {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    const headers: Record<string, string> = {};
    req.forEach((k, v) => {
      headers[k] = k in headers ? `${headers[k]}, ${v}` : v;
    });
    const incoming: IncomingRequest = {
      method: req.getMethod().toUpperCase(),
      path: req.getUrl(),
      query: new URLSearchParams(req.getQuery() ?? ''),
      headers,
      remoteAddress: Buffer.from(res.getRemoteAddressAsText()).toString(),
    };
    const write = (reply: Reply) => {
      if (aborted) return;
      res.cork(() => {
        res.writeStatus(`${reply.status} ${STATUS_TEXT[reply.status] ?? 'Status'}`);
        for (const [k, v] of Object.entries(reply.headers ?? {})) res.writeHeader(k, v);
        if (incoming.method === 'HEAD') res.endWithoutBody();
        else res.end(reply.body ?? '');
      });
    };
    try {
      const front = pipeline.front(incoming);
      if ('reply' in front) return write(front.reply);
      // Start reading the body now, synchronously, as uWS requires.
      const body = readBody(res, maxBodyBytes);
      pipeline
        .back(incoming, front.route, front.params, front.auth, () => body)
        .then(write, (err) => write(pipeline.errorReply(err, incoming, front.route)));
    } catch (err) {
      write(pipeline.errorReply(err, incoming, undefined));
    }
  });
  return new Promise((resolve, reject) => {
    app.listen(host, port, (token) => {
      if (!token) return reject(new Error(`cannot listen on ${host}:${port}: the port is in use or not allowed`));
      resolve({ port: uWS.us_socket_local_port(token), close: () => uWS.us_listen_socket_close(token) });
    });
  });
}

function readBody(res: uWS.HttpResponse, max: number): Promise<Buffer> {
  const p = new Promise<Buffer>((resolve, reject) => {
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
  p.catch(() => {}); // a request refused early never awaits its body
  return p;
}
