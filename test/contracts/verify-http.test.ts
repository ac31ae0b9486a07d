/**
 * The verifier's HTTP: a request that meets a connection the server closes unanswered (a
 * keep-alive connection closed for idleness as the request went out on it: Node servers close
 * idle ones after 5 s, and under load the client's reuse can race that) is sent again once on a
 * new connection, instead of failing the operation with "fetch failed". Only once.
 */
import t from 'tap';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { send } from '../../contracts/verify/http.ts';

/** A server that closes, unanswered, the first `drop` POSTs it receives. */
async function dropping(t: { teardown(fn: () => Promise<void>): void }, drop: number) {
  const posts: number[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'POST') {
      posts.push(posts.length + 1);
      if (posts.length <= drop) {
        req.socket.destroy();
        return;
      }
    }
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, posts };
}

const post = { method: 'POST', path: '/b', headers: { 'content-type': 'application/json' }, body: '{}' };

t.test('a POST whose connection the server closes unanswered is sent again once', async (t) => {
  const { base, posts } = await dropping(t, 1);
  t.equal((await send(base, { method: 'GET', path: '/a' })).status, 200, 'a request before it is answered');
  const res = await send(base, post);
  t.equal(res.status, 200, 'the POST is answered the second time');
  t.equal(posts.length, 2, 'the server saw it twice');
});

t.test('only once: a server that closes every POST fails the request', async (t) => {
  const { base, posts } = await dropping(t, Number.POSITIVE_INFINITY);
  await t.rejects(send(base, post), /fetch failed/);
  t.equal(posts.length, 2, 'sent twice, then given up');
});
