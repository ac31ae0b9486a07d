/**
 * The webhook HTTP/1.1 client (outbound/http1-agent.ts) against raw TCP servers on 127.0.0.1
 * that answer byte for byte as each case needs: framing, keep-alive and the connection bound.
 */
import { createServer, type Server, type Socket } from 'node:net';
import t from 'tap';
import { Http1Agent, type ResponseHead } from '../../outbound/http1-agent.ts';

interface Raw {
  url: URL;
  connections: number;
  /** Most connections open at once. */
  peak: number;
  requests: string[];
  close(): Promise<void>;
}

/** A server that hands each complete request (head + content-length body) to `answer`. */
async function raw(answer: (socket: Socket, request: string, n: number) => void): Promise<Raw> {
  const sockets = new Set<Socket>();
  const r: Raw = { url: new URL('http://127.0.0.1/'), connections: 0, peak: 0, requests: [], close: async () => {} };
  const server: Server = createServer((socket) => {
    r.connections++;
    sockets.add(socket);
    r.peak = Math.max(r.peak, sockets.size);
    socket.on('close', () => sockets.delete(socket));
    let buf = '';
    socket.on('data', (d) => {
      buf += d.toString('latin1');
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const length = Number(/content-length: (\d+)/i.exec(buf.slice(0, end))?.[1] ?? 0);
        if (buf.length < end + 4 + length) return;
        const request = buf.slice(0, end + 4 + length);
        buf = buf.slice(end + 4 + length);
        r.requests.push(request);
        answer(socket, request, r.requests.length);
      }
    });
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  r.url = new URL(`http://127.0.0.1:${(server.address() as { port: number }).port}/hook?x=1`);
  r.close = async () => {
    for (const s of sockets) s.destroy();
    await new Promise((res) => server.close(res));
  };
  return r;
}

interface Answer {
  head: ResponseHead | null;
  bytes: number;
  error: (Error & { code?: string }) | null;
}

function post(agent: Http1Agent, url: URL, body = '{"a":1}'): Promise<Answer> {
  const a: Answer = { head: null, bytes: 0, error: null };
  const head = `POST ${url.pathname}${url.search} HTTP/1.1\r\nhost: ${url.host}\r\n`;
  const data = `${head}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  return new Promise((resolve) => {
    agent.send(url, data, {
      onHead: (h) => (a.head = h),
      onData: (n) => (a.bytes += n),
      onEnd: () => resolve(a),
      onError: (err) => resolve({ ...a, error: err }),
    });
  });
}

const ok = (extra = '') => `HTTP/1.1 200 OK\r\ncontent-length: 2\r\n${extra}\r\nok`;
const agents: Http1Agent[] = [];
const agent = (n = 4) => {
  const a = new Http1Agent({ connectionsPerOrigin: n });
  agents.push(a);
  return a;
};
t.teardown(async () => {
  for (const a of agents) await a.destroy();
});

t.test('a request is written whole; answers on one connection reuse it', async (t) => {
  const r = await raw((s) => s.write(ok()));
  t.teardown(r.close);
  const a = agent();
  for (let i = 0; i < 3; i++) {
    const x = await post(a, r.url);
    t.same([x.head?.status, x.bytes, x.error], [200, 2, null]);
  }
  t.equal(r.connections, 1, 'three requests, one connection');
  t.match(
    r.requests[0],
    /^POST \/hook\?x=1 HTTP\/1\.1\r\nhost: 127\.0\.0\.1:\d+\r\ncontent-length: 7\r\n\r\n\{"a":1\}$/,
  );
});

t.test('an answer split across reads, a chunked body with trailers, and a 100 Continue first', async (t) => {
  const r = await raw((s, _req, n) => {
    if (n === 1) {
      s.write('HTTP/1.1 20');
      setTimeout(() => s.write('1 Created\r\ncontent-len'), 10);
      setTimeout(() => s.write('gth: 5\r\n\r\nab'), 20);
      setTimeout(() => s.write('cde'), 30);
    } else if (n === 2) {
      s.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n');
      setTimeout(() => s.write('A;ext=1\r\n0123456789\r\n0\r\nx-trailer: 1\r\n\r\n'), 10);
    } else s.write(`HTTP/1.1 100 Continue\r\n\r\n${ok()}`);
  });
  t.teardown(r.close);
  const a = agent(1);
  const first = await post(a, r.url);
  t.same([first.head?.status, first.bytes, first.error], [201, 5, null], 'split head and body');
  const second = await post(a, r.url);
  t.same([second.head?.status, second.bytes, second.error], [200, 13, null], 'chunked: 3 + 10 bytes');
  const third = await post(a, r.url);
  t.same([third.head?.status, third.bytes, third.error], [200, 2, null], 'the 100 is skipped');
  t.equal(r.connections, 1, 'all on one connection');
});

t.test('connection: close, a close-delimited body and bytes after the answer end the connection', async (t) => {
  const r = await raw((s, _req, n) => {
    if (n === 1) s.write(ok('connection: close\r\n'));
    else if (n === 2) s.end('HTTP/1.1 200 OK\r\n\r\nuntil the close');
    else s.write(`${ok()}HTTP/1.1 200 OK\r\n`);
  });
  t.teardown(r.close);
  const a = agent(1);
  t.same((await post(a, r.url)).head?.status, 200);
  const closeDelimited = await post(a, r.url);
  t.same([closeDelimited.head?.status, closeDelimited.bytes, closeDelimited.error], [200, 15, null]);
  t.same((await post(a, r.url)).head?.status, 200);
  t.same((await post(a, r.url)).head?.status, 200, 'a fourth request after the stray bytes');
  t.equal(r.connections, 4, 'none of those connections was reused');
});

t.test("the receiver's keep-alive hint: an idle connection is closed a second before it", async (t) => {
  // timeout=3: reused at once; after 2.5 s idle (past 3 s less one, before the hint itself) a new one.
  const r = await raw((s) => s.write(ok('keep-alive: timeout=3\r\n')));
  t.teardown(r.close);
  const a = agent(1);
  await post(a, r.url);
  await post(a, r.url);
  t.equal(r.connections, 1, 'reused while idle for less than the hint less a second');
  await new Promise((res) => setTimeout(res, 2500));
  await post(a, r.url);
  t.equal(r.connections, 2, 'after 2.5 s idle, under the 3 s hint, a new connection: not reused past 2 s');
});

t.test('bad answers fail the request, never hang it', async (t) => {
  const answers = [
    'NOT HTTP\r\n\r\n',
    'HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nok',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n',
    'HTTP/1.1 101 Switching Protocols\r\n\r\n',
    'HTTP/1.1 200 OK\r\nno colon here\r\n\r\n',
  ];
  for (const answer of answers) {
    const r = await raw((s) => s.write(answer));
    const x = await post(agent(), r.url);
    t.equal(x.error?.code, 'HTTP_PARSE_ERROR', `${JSON.stringify(answer.slice(0, 40))}: ${x.error?.message}`);
    await r.close();
  }
  const early = await raw((s) => s.end('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc'));
  t.teardown(early.close);
  const x = await post(agent(), early.url);
  t.match(x.error?.message, /closed the connection before a full answer/, 'a body cut short');
  const refused = await post(agent(), new URL('http://127.0.0.1:1/'));
  t.equal(refused.error?.code, 'ECONNREFUSED');
  // An https target is spoken to in TLS: a plain HTTP answer to the handshake fails it.
  const plain = createServer((s) => s.once('data', () => s.write(ok())));
  await new Promise<void>((res) => plain.listen(0, '127.0.0.1', res));
  t.teardown(() => new Promise((res) => plain.close(res)));
  const tlsUrl = new URL(`https://127.0.0.1:${(plain.address() as { port: number }).port}/`);
  const tls = await post(agent(), tlsUrl);
  t.match(tls.error?.code, /^(ERR_SSL_.*|EPROTO|ECONNRESET)$/, `https to a plain server: ${tls.error?.code}`);
});

t.test('at most connectionsPerOrigin connections; the others wait their turn', async (t) => {
  const r = await raw((s) => setTimeout(() => s.write(ok()), 20));
  t.teardown(r.close);
  const a = agent(2);
  const answers = await Promise.all(Array.from({ length: 8 }, () => post(a, r.url)));
  t.same(
    answers.map((x) => x.head?.status),
    Array(8).fill(200),
  );
  t.equal(r.peak, 2, 'never more than 2 at once');
});

t.test('an aborted request closes its connection and hears nothing more', async (t) => {
  const r = await raw((s, _req, n) => {
    if (n > 1) s.write(ok());
  });
  t.teardown(r.close);
  const a = agent(1);
  let heard = false;
  const url = r.url;
  const abort = a.send(url, `POST / HTTP/1.1\r\nhost: ${url.host}\r\ncontent-length: 0\r\n\r\n`, {
    onHead: () => (heard = true),
    onData: () => (heard = true),
    onEnd: () => (heard = true),
    onError: () => (heard = true),
  });
  while (r.requests.length === 0) await new Promise((res) => setTimeout(res, 5));
  abort();
  const next = await post(a, r.url);
  t.equal(next.head?.status, 200, 'the next request is answered');
  t.equal(r.connections, 2, 'on a new connection: the aborted one was closed');
  t.equal(heard, false, 'the aborted request got no callback');
});
