import t from 'tap';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { execFile } from 'node:child_process';
import { readFileSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { startTestNode } from '../helpers/sluice.ts';
import { verifyProvider } from '../../contracts/verify/verifier.ts';
import { failed } from '../../contracts/verify/report.ts';
import { PROJECT_ROOT } from '../../core/paths.ts';

const root = PROJECT_ROOT;
// With a dispatcher, whose fan-out counts the event types (listEventTypes checks a published one shows).
const node = await startTestNode({}, { dispatcher: true });
const target = new URL(node.base);

// A deliberately broken Sluice: a proxy that breaks four answers of the live one.
const proxy = createServer((req, res) => {
  const up = request(
    { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
    (upRes) => {
      const chunks: Buffer[] = [];
      upRes.on('data', (c: Buffer) => chunks.push(c));
      upRes.on('end', () => {
        let status = upRes.statusCode ?? 502;
        let body = Buffer.concat(chunks);
        const path = (req.url ?? '').split('?')[0];
        const headers = { ...upRes.headers };
        delete headers['content-length'];
        if (path === '/.well-known/oauth-authorization-server' && status === 200) {
          const meta = JSON.parse(body.toString());
          delete meta.issuer; // schema violation: a required member is gone
          body = Buffer.from(JSON.stringify(meta));
        }
        if (path === '/v1/audit' && status === 200) status = 418; // an undocumented status
        // The JWKS made private by the caller's token: the contract's `max-age` Cache-Control is gone.
        if (path === '/v1/auth/jwks' && req.headers.authorization) headers['cache-control'] = 'no-store';
        if (path === '/v1/webhooks/dlq' && status === 200) {
          status = 500; // a server error
          headers['content-type'] = 'application/problem+json';
          body = Buffer.from(
            JSON.stringify({
              type: 'https://sluice.dev/problems/internal',
              title: 'Internal error',
              status: 500,
              detail: 'boom',
              code: 'INTERNAL',
            }),
          );
        }
        res.writeHead(status, headers).end(body);
      });
    },
  );
  // Sluice closing a connection unanswered (a method uWS does not route) is passed on as such.
  up.on('error', () => res.socket?.destroy());
  req.pipe(up);
});
await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
const broken = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
t.teardown(async () => {
  proxy.close();
  await node.close();
});

const admin = await node.client('admin', 'acme');

t.test('the verifier catches a schema violation, an undocumented status, a 5xx and a bad header', async (t) => {
  const report = await verifyProvider({
    baseUrl: broken,
    clientId: admin.client_id,
    clientSecret: admin.client_secret,
    allowUnimplemented: true,
  });
  const fails = failed(report);
  const of = (id: string) =>
    fails
      .filter((f) => f.operationId === id)
      .map((f) => f.detail)
      .join('\n');
  t.match(
    of('getAuthorizationServerMetadata'),
    /body \(root\) must have required property 'issuer'/,
    'schema violation',
  );
  t.match(of('listAuditEntries'), /status 418 is not documented/, 'undocumented status');
  t.match(of('listDlq'), /answered 500/, '5xx');
  t.match(of('getJwks'), /header Cache-Control .*max-age.*"no-store"/, 'a header against its documented pattern');
  const expected = ['getAuthorizationServerMetadata', 'getJwks', 'listAuditEntries', 'listDlq'];
  const failedOps = new Set(fails.map((f) => f.operationId));
  const others = fails.filter((f) => !expected.includes(f.operationId));
  t.same([...failedOps].sort(), expected, 'nothing else fails');
  for (const f of others) t.comment(`unexpected failure: ${JSON.stringify(f)}`);
});

t.test('`sluice contract verify` exits 1 and writes the failures to the JUnit report', async (t) => {
  const junit = join(mkdtempSync(join(tmpdir(), 'sluice-junit-')), 'contract.xml');
  const { code, stdout } = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
    execFile(
      process.execPath,
      [
        join(root, 'bin/sluice.js'),
        'contract',
        'verify',
        '--base-url',
        broken,
        '--client-id',
        admin.client_id,
        '--client-secret',
        admin.client_secret,
        '--junit',
        junit,
        '--allow-unimplemented',
      ],
      { cwd: root, maxBuffer: 16 << 20 },
      (err, stdout) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout }),
    );
  });
  t.equal(code, 1, 'non-zero exit');
  t.match(stdout, /GET \/v1\/webhooks\/dlq {2}\(listDlq\)/, 'a table per operation');
  t.match(stdout, /FAIL {2}GET → 200 .*answered 500/);
  const xml = readFileSync(junit, 'utf8');
  t.match(xml, /<testsuites name="sluice contract verify" tests="\d+" failures="[1-9]\d*"/);
  t.match(xml, /<failure message="[^"]*status 418 is not documented/);
});

t.test('against the unbroken Sluice the same command exits 0', async (t) => {
  const code = await new Promise<number | null>((resolve) => {
    execFile(
      process.execPath,
      [
        join(root, 'bin/sluice.js'),
        'contract',
        'verify',
        '--base-url',
        node.base,
        '--client-id',
        admin.client_id,
        '--client-secret',
        admin.client_secret,
        '--allow-unimplemented',
      ],
      { cwd: root, maxBuffer: 16 << 20 },
      (err, stdout) => {
        if (err)
          t.comment(
            stdout
              .split('\n')
              .filter((l) => l.includes('FAIL'))
              .join('\n'),
          );
        resolve(err ? ((err as { code?: number }).code ?? 1) : 0);
      },
    );
  });
  t.equal(code, 0);
});
