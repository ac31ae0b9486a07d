import t from 'tap';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { framingFault } from '../../ingress/uws-adapter.ts';
import { startTestNode, call, freePort } from '../helpers/sluice.ts';
import { rawHttp } from '../helpers/raw-http.ts';

const seen: { url: string; headers: IncomingHttpHeaders }[] = [];
const upstreamPort = await freePort();
const upstream = createServer((req, res) => {
  seen.push({ url: req.url!, headers: req.headers });
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'public, max-age=600' });
    res.end('{}');
  });
});
await new Promise<void>((r) => upstream.listen(upstreamPort, '127.0.0.1', r));
const node = await startTestNode({ SLUICE_UPSTREAM_INFERENCE: `http://127.0.0.1:${upstreamPort}` });
t.teardown(async () => {
  await node.close();
  upstream.close();
});
const port = node.ingress!.port;
const token = await node.token(await node.client('admin', 'acme'));

t.test('framingFault refuses every length that could be read two ways', async (t) => {
  t.equal(framingFault([], []), null);
  t.equal(framingFault(['5'], []), null);
  t.equal(framingFault([], ['chunked']), null);
  t.equal(framingFault([], ['Chunked']), null);
  t.match(framingFault(['5', '40'], []), /more than one Content-Length/);
  t.match(framingFault(['5', '5'], []), /more than one Content-Length/, 'even when equal');
  t.match(framingFault(['+5'], []), /decimal/);
  t.match(framingFault(['5, 40'], []), /decimal/);
  t.match(framingFault(['-1'], []), /decimal/);
  t.match(framingFault([], ['gzip']), /only Transfer-Encoding/);
  t.match(framingFault([], ['chunked, gzip']), /only Transfer-Encoding/);
  t.match(framingFault([], ['gzip, chunked']), /only Transfer-Encoding/);
  t.match(framingFault([], ['chunked', 'chunked']), /more than one Transfer-Encoding/);
  t.match(framingFault(['3'], ['chunked']), /together/);
});

// Alone, a 400 that closes the connection; with a request behind it, a close: never an answer to it.
t.test('conflicting framing is refused and the smuggled request is never answered', async (t) => {
  const auth = `authorization: Bearer ${token}\r\n`;
  const smuggled = 'GET /v1/inference/smuggled HTTP/1.1\r\nhost: x\r\n\r\n';
  // The last field: what the request alone gets. uWS's own parser refuses some framings before
  // Sluice sees the request, by closing the connection without an answer (uWS 20.30).
  const cases: [string, string, 400 | 'closed'][] = [
    [
      'two Content-Length',
      `POST /v1/inference/a HTTP/1.1\r\nhost: x\r\n${auth}content-length: 5\r\n` +
        `content-length: ${5 + smuggled.length}\r\n\r\nhello${smuggled}`,
      400,
    ],
    [
      'Transfer-Encoding gzip',
      `POST /v1/inference/a HTTP/1.1\r\nhost: x\r\n${auth}transfer-encoding: gzip, chunked\r\n\r\n0\r\n\r\n${smuggled}`,
      400,
    ],
    [
      'Content-Length with chunked',
      `POST /v1/inference/a HTTP/1.1\r\nhost: x\r\n${auth}transfer-encoding: chunked\r\n` +
        `content-length: 5\r\n\r\n0\r\n\r\n${smuggled}`,
      'closed',
    ],
    [
      'a signed Content-Length',
      `POST /v1/inference/a HTTP/1.1\r\nhost: x\r\n${auth}content-length: +5\r\n\r\nhello${smuggled}`,
      'closed',
    ],
  ];
  for (const [name, raw, aloneGets] of cases) {
    // With a request pipelined behind it, the refused one is left unanswered so that uWS closes the
    // connection before it parses the next (ingress/uws-adapter.ts): nothing at all is answered.
    const res = await rawHttp(port, raw);
    t.same(res.statuses, [], `${name}, a request behind it: no answer (${res.statuses.join(',') || 'none'})`);
    t.ok(res.closed, `${name}, a request behind it: the connection is closed`);
    // Alone, the same request gets its 400 (or uWS's close), and the connection is closed.
    const alone = await rawHttp(port, raw.slice(0, -smuggled.length));
    t.same(
      alone.statuses,
      aloneGets === 400 ? [400] : [],
      `${name} alone: ${aloneGets} (${alone.statuses.join(',') || 'no answer'})`,
    );
    t.ok(alone.closed, `${name} alone: the connection is closed`);
  }
  t.notOk(
    seen.some((s) => s.url.includes('smuggled')),
    'no smuggled request reached the upstream',
  );
  const alone = await rawHttp(
    port,
    `POST /v1/inference/a HTTP/1.1\r\nhost: x\r\n${auth}content-length: 2\r\ncontent-length: 3\r\n\r\n{}`,
  );
  t.same(alone.statuses, [400], 'with nothing behind it, the refusal is a 400');
  t.match(alone.text, /request framing refused: more than one Content-Length/, 'that says why');
  t.ok(alone.closed, 'and closes the connection');
  const plain = await rawHttp(
    port,
    `POST /v1/inference/a HTTP/1.1\r\nhost: x\r\n${auth}content-type: application/json\r\ncontent-length: 2\r\n\r\n{}`,
  );
  t.same(plain.statuses, [200], 'one Content-Length is fine');
  const chunked = await rawHttp(
    port,
    `POST /v1/inference/a HTTP/1.1\r\nhost: x\r\n${auth}content-type: application/json\r\n` +
      'transfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n',
  );
  t.same(chunked.statuses, [200], 'chunked alone is fine');
});

t.test('no server banner; nosniff everywhere; authenticated responses are never cached', async (t) => {
  const anon = await call(node.base, 'GET', '/v1/auth/jwks');
  t.equal(anon.headers.get('uwebsockets'), null, 'no uWebSockets header');
  t.equal(anon.headers.get('x-content-type-options'), 'nosniff');
  const authed = await call(node.base, 'GET', '/v1/webhooks/endpoints', { token });
  t.equal(authed.status, 200);
  t.equal(authed.headers.get('x-content-type-options'), 'nosniff');
  t.equal(authed.headers.get('cache-control'), 'no-store');
  const proxied = await call(node.base, 'GET', '/v1/inference/models', { token });
  t.equal(proxied.status, 200);
  t.equal(
    proxied.headers.get('cache-control'),
    'no-store',
    "the upstream's cache-control does not make an authenticated answer cacheable",
  );
  const refused = await call(node.base, 'GET', '/v1/inference/models', { headers: { authorization: 'Bearer nope' } });
  t.equal(refused.status, 401);
  t.equal(refused.headers.get('cache-control'), 'no-store');
});

t.test('client claims about address, host or path never reach the upstream', async (t) => {
  seen.length = 0;
  const lies = {
    forwarded: 'for=1.2.3.4;host=evil',
    'x-real-ip': '1.2.3.4',
    'x-forwarded-for': '1.2.3.4',
    'x-forwarded-host': 'evil',
    'x-forwarded-proto': 'https',
    'x-original-url': '/admin/secrets',
    'x-rewrite-url': '/admin/secrets',
    'x-http-method-override': 'DELETE',
    'true-client-ip': '1.2.3.4',
    'x-sluice-tenant': 'globex',
    'x-custom': 'kept',
  };
  const res = await call(node.base, 'GET', '/v1/inference/models', { token, headers: lies });
  t.equal(res.status, 200);
  const h = seen[0].headers;
  for (const name of [
    'forwarded',
    'x-real-ip',
    'x-forwarded-host',
    'x-forwarded-proto',
    'x-original-url',
    'x-rewrite-url',
    'x-http-method-override',
    'true-client-ip',
  ]) {
    t.equal(h[name], undefined, `${name} is stripped`);
  }
  t.equal(h['x-forwarded-for'], '127.0.0.1', 'x-forwarded-for is the edge’s own');
  t.equal(h['x-sluice-tenant'], 'acme', 'the tenant header is the edge’s own');
  t.equal(h['x-custom'], 'kept', 'other headers pass');
});

t.test('an upload abandoned mid-body leaves no body read pending', async (t) => {
  const { bodyReads } = await import('../../ingress/uws-adapter.ts');
  const { connect } = await import('node:net');
  const before = bodyReads.pending;
  for (let i = 0; i < 20; i++) {
    await new Promise<void>((resolve) => {
      const s = connect(port, '127.0.0.1', () => {
        s.write(
          `POST /v1/webhooks/events HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${token}\r\n` +
            'content-type: application/json\r\ncontent-length: 1000\r\n\r\n{"type":"inference.',
        );
        setTimeout(() => {
          s.destroy();
          resolve();
        }, 50);
      });
    });
  }
  for (let i = 0; i < 40 && bodyReads.pending > before; i++) await new Promise((r) => setTimeout(r, 50));
  t.equal(bodyReads.pending, before, 'every abandoned body read settled');
  const res = await call(node.base, 'GET', '/v1/webhooks/endpoints', { token });
  t.equal(res.status, 200, 'and the node answers as before');
});
