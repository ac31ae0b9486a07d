import t from 'tap';
import { createServer } from 'node:http';
import fc from 'fast-check';
import { canonicalPath, canonicalPathChecked, PLAIN_PATH, segmentKey } from '../../ingress/canonical-path.ts';
import { upstreamUrl } from '../../ingress/routes/data-plane.ts';
import { startTestNode, freePort } from '../helpers/sluice.ts';
import { rawGet } from '../helpers/raw-http.ts';

t.test('canonicalPath keeps plain paths and decodes only unreserved escapes', async (t) => {
  t.equal(canonicalPath('/v1/telemetry/export'), '/v1/telemetry/export');
  t.equal(canonicalPath('/v1/telemetry/%65xport'), '/v1/telemetry/export', '%65 is "e"');
  t.equal(canonicalPath('/v1/inference/a%2dB%7E'), '/v1/inference/a-B~');
  t.equal(canonicalPath('/v1/inference/a%20b'), '/v1/inference/a%20b', 'a space stays encoded');
  t.equal(canonicalPath('/v1/inference/a%3fb'), '/v1/inference/a%3Fb', 'hex of kept escapes is upper-cased');
  t.equal(canonicalPath('/v1/webhooks/endpoints/'), '/v1/webhooks/endpoints/', 'one trailing slash is kept');
  t.equal(canonicalPath('/'), '/');
});

t.test('the fast path for plain paths answers what the full checks answer, for any path', async (t) => {
  const outcome = (f: (p: string) => string, p: string) => {
    try {
      return f(p);
    } catch (err) {
      return `refused: ${(err as Error).message}`;
    }
  };
  // Paths from the characters that decide: plain ones, dots, escapes, slashes, `;`, a backslash.
  const piece = fc.constantFrom('a', 'Z', '0', '-', '_', '~', '.', '/', '%', '%41', '%2F', '%2e', ';', '\\', ' ', '');
  let plain = 0;
  fc.assert(
    fc.property(fc.array(piece, { maxLength: 12 }), fc.boolean(), (parts, slash) => {
      const p = (slash ? '/' : '') + parts.join('');
      if (PLAIN_PATH.test(p)) plain++;
      return outcome(canonicalPath, p) === outcome(canonicalPathChecked, p);
    }),
    { numRuns: 5000 },
  );
  t.ok(plain > 100, `the property met the fast path ${plain} times`);
});

t.test('canonicalPath refuses every form an upstream could read differently', async (t) => {
  const refused = [
    '/v1/telemetry/./export',
    '/v1/telemetry/../../admin/secrets',
    '/v1/inference/../telemetry/export',
    '/v1/telemetry/%2e/export',
    '/v1/telemetry/%2E%2E/x',
    '/v1/telemetry/.%2e/x',
    '/v1/telemetry/%2fexport',
    '/v1/telemetry/%5Cexport',
    '/v1/telemetry\\export',
    '/v1/telemetry//export',
    '//v1/telemetry/export',
    '/v1/telemetry/ex%00port',
    '/v1/telemetry/%zz',
    '/v1/telemetry/%4',
    '/v1/telemetry/a b',
    'v1/telemetry',
    '/v1/telemetry/..',
    '/v1/telemetry/export;x',
    '/v1/telemetry/export;jsessionid=1',
    '/v1/telemetry/;/export',
    '/v1/telemetry/export%3bx',
    '/v1/telemetry/%2565xport',
    '/v1/telemetry/export%25',
    '/v1/telemetry/export.',
    '/v1/telemetry/export..',
    '/v1/telemetry/export%2e',
    '/v1/telemetry/export%20',
    '/v1/telemetry/export%20/x',
    '/v1/inference/a%09',
    '/v1/inference/a%0d%0ab',
    '/v1/inference/a%7f',
  ];
  for (const p of refused) {
    t.throws(() => canonicalPath(p), { code: 'INVALID_REQUEST' }, p);
  }
});

t.test('segmentKey is at least as broad as any upstream reading of a segment', async (t) => {
  for (const seg of ['export', 'EXPORT', 'Export', 'eXpOrT', 'export.csv', 'export.json.gz', 'export%3F', 'export~1'])
    t.equal(segmentKey(seg), 'export', seg);
  for (const seg of ['exports', 'export-jobs', 'export_x', 'xexport', '%C3%A9xport'])
    t.not(segmentKey(seg), 'export', seg);
});

t.test('upstreamUrl never leaves the family prefix', async (t) => {
  const q = new URLSearchParams('a=1');
  t.equal(upstreamUrl('http://up:1', '/v1/telemetry', '/v1/telemetry/x', q).href, 'http://up:1/v1/telemetry/x?a=1');
  t.equal(
    upstreamUrl('http://up:1/base', '/v1/telemetry', '/v1/telemetry', q).pathname,
    '/base/v1/telemetry',
    'a base path is kept',
  );
  t.throws(() => upstreamUrl('http://up:1', '/v1/telemetry', '/v1/telemetryx', q), { code: 'INVALID_REQUEST' });
  t.throws(() => upstreamUrl('http://up:1', '/v1/telemetry', '/v1/inference/x', q), { code: 'INVALID_REQUEST' });
});

t.test('live: no dot segment, encoding or slash trick reaches the upstream or changes the scope', async (t) => {
  const seen: string[] = [];
  const port = await freePort();
  const upstream = createServer((req, res) => {
    seen.push(req.url!);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  });
  await new Promise<void>((r) => upstream.listen(port, '127.0.0.1', r));
  const up = `http://127.0.0.1:${port}`;
  const node = await startTestNode({
    SLUICE_UPSTREAM_INFERENCE: up,
    SLUICE_UPSTREAM_PIPELINES: up,
    SLUICE_UPSTREAM_TELEMETRY: up,
  });
  t.teardown(async () => {
    await node.close();
    upstream.close();
  });
  const port_ = node.ingress!.port;
  const telemetry = await node.token(await node.client('admin', 'acme'), 'telemetry:read');
  const inference = await node.token(await node.client('admin', 'acme'), 'inference:read');

  const plain = await rawGet(port_, '/v1/telemetry/metrics', { authorization: `Bearer ${telemetry}` });
  t.equal(plain.statuses[0], 200, 'a plain telemetry:read path works');
  t.same(seen, ['/v1/telemetry/metrics'], 'and reaches the upstream as sent');
  seen.length = 0;

  const exportPlain = await rawGet(port_, '/v1/telemetry/export', { authorization: `Bearer ${telemetry}` });
  t.equal(exportPlain.statuses[0], 403, 'export without telemetry:export is 403');
  const encoded = await rawGet(port_, '/v1/telemetry/%65xport', { authorization: `Bearer ${telemetry}` });
  t.equal(encoded.statuses[0], 403, 'an encoded letter does not change the scope');
  t.match(encoded.text, /telemetry:export/, 'and names telemetry:export');

  for (const [path, token] of [
    ['/v1/telemetry/./export', telemetry],
    ['/v1/telemetry/../../admin/secrets', telemetry],
    ['/v1/inference/../telemetry/export', inference],
    ['/v1/inference/%2e%2e/telemetry/export', inference],
    ['/v1/inference/..%2ftelemetry/export', inference],
    ['/v1/telemetry//export', telemetry],
    ['/v1/inference/..\\telemetry', inference],
  ] as const) {
    const res = await rawGet(port_, path, { authorization: `Bearer ${token}` });
    t.equal(res.statuses[0], 400, `${path}: 400`);
    t.match(res.text, /not canonical/, `${path}: says why`);
  }
  t.same(seen, [], 'nothing reached the upstream');
});

t.test('live: every data-plane family decides its scope on the form the upstream could read', async (t) => {
  const seen: string[] = [];
  const port = await freePort();
  const upstream = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  });
  await new Promise<void>((r) => upstream.listen(port, '127.0.0.1', r));
  const up = `http://127.0.0.1:${port}`;
  const node = await startTestNode({
    SLUICE_UPSTREAM_INFERENCE: up,
    SLUICE_UPSTREAM_PIPELINES: up,
    SLUICE_UPSTREAM_TELEMETRY: up,
  });
  t.teardown(async () => {
    await node.close();
    upstream.close();
  });
  const base = `http://127.0.0.1:${node.ingress!.port}`;
  const admin = await node.client('admin', 'acme');
  const call = async (method: string, path: string, scope: string) => {
    const token = await node.token(admin, scope);
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: method === 'GET' ? undefined : '{}',
    });
    return { status: res.status, body: await res.text() };
  };

  // The reported bypass: only telemetry:read (or write) and an export path an upstream reads as /export.
  for (const [method, scope] of [
    ['GET', 'telemetry:read'],
    ['POST', 'telemetry:write'],
  ] as const) {
    for (const variant of ['EXPORT', 'Export', 'export.csv', 'eXport/x', 'EXPORT.json/deep', '%45xport']) {
      const res = await call(method, `/v1/telemetry/${variant}`, scope);
      t.equal(res.status, 403, `${method} /v1/telemetry/${variant} with ${scope}: 403`);
      t.match(res.body, /"missing_scope":"telemetry:export"/, `${variant}: names telemetry:export`);
    }
  }
  t.same(seen, [], 'no export variant reached the upstream without telemetry:export');

  // Every family: what cannot be made unambiguous is a 400 before any scope is looked at.
  const ambiguous = ['x;y', 'x;jsessionid=1', 'x%3By', '%2578', 'x%25', 'x.', 'x%20', 'x%2E', 'x%09'];
  for (const family of ['inference', 'pipelines', 'telemetry']) {
    const read = family === 'pipelines' ? 'pipeline:read' : `${family}:read`;
    const write = family === 'pipelines' ? 'pipeline:write' : `${family}:write`;
    for (const v of ambiguous) {
      for (const [method, scope] of [
        ['GET', read],
        ['POST', write],
      ] as const) {
        const res = await call(method, `/v1/${family}/${v}`, scope);
        t.equal(res.status, 400, `${method} /v1/${family}/${v}: 400`);
        t.match(res.body, /not canonical/, `${family}/${v}: says why`);
      }
    }
    t.same(seen, [], `${family}: nothing ambiguous reached the upstream`);
    // The method decides read against write, whatever the case of the path.
    const get = await call('GET', `/v1/${family}/Models.JSON`, read);
    t.equal(get.status, 200, `${family}: GET with ${read} passes`);
    const post = await call('POST', `/v1/${family}/Models`, read);
    t.equal(post.status, 403, `${family}: POST with only ${read} is 403`);
    t.match(post.body, new RegExp(`"missing_scope":"${write}"`));
    t.same(seen, [`GET /v1/${family}/Models.JSON`], `${family}: the upstream got exactly the path decided on`);
    seen.length = 0;
  }

  const exp = await call('GET', '/v1/telemetry/Export.csv', 'telemetry:export');
  t.equal(exp.status, 200, 'telemetry:export reaches the export path in any case');
  t.same(seen, ['GET /v1/telemetry/Export.csv']);
});
