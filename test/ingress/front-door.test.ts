import t from 'tap';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { connect as h2connect } from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeCerts, type Cert } from '../../harness/certs.ts';
import { runCli } from '../../harness/sluice-cli.ts';
import { parseMetrics, sample } from '../helpers/prometheus.ts';
import { rawHttps } from '../helpers/raw-http.ts';
import { freePort, startTestNode } from '../helpers/sluice.ts';

// Debian puts it in /usr/sbin, which a user's PATH may not have.
const HAPROXY = ['haproxy', '/usr/sbin/haproxy'].find((bin) => !spawnSync(bin, ['-v']).error) ?? '';
if (!HAPROXY) {
  t.plan(0, 'haproxy is not installed (apt-get install haproxy; .ci/run installs it)');
  process.exit(0);
}

const dir = mkdtempSync(join(tmpdir(), 'sluice-front-door-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const certs = makeCerts(dir);
const ca = readFileSync(certs.ca.cert);
const withCert = (c?: Cert) => ({ ca, ...(c ? { cert: readFileSync(c.cert), key: readFileSync(c.key) } : {}) });

/** `sluice front-door` as a user runs it, into a file. */
async function frontDoorConfig(name: string, listen: number, upstream: string, extra: string[] = []) {
  const r = await runCli(
    [
      'front-door',
      '--listen',
      `127.0.0.1:${listen}`,
      '--upstream',
      upstream,
      '--cert',
      certs.server.pem,
      '--client-ca',
      certs.ca.cert,
      ...extra,
    ],
    process.env,
  );
  if (r.code !== 0) throw new Error(`sluice front-door exited ${r.code}: ${r.stderr}`);
  const file = join(dir, `${name}.cfg`);
  writeFileSync(file, r.stdout);
  return file;
}

/** The real HAProxy on a configuration, until the test ends; resolves once it takes connections. */
async function startHaproxy(cfg: string, port: number): Promise<ChildProcess> {
  const proc = spawn(HAPROXY, ['-f', cfg], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  proc.stdout!.on('data', (d) => (log += d));
  proc.stderr!.on('data', (d) => (log += d));
  t.teardown(() => void proc.kill('SIGKILL'));
  for (const deadline = Date.now() + 10_000; ; ) {
    if (proc.exitCode !== null) throw new Error(`haproxy exited ${proc.exitCode}:\n${log}`);
    const probe = await rawHttps(
      port,
      'GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n',
      withCert(certs.client),
    );
    if (probe.handshake) return proc;
    if (Date.now() > deadline) throw new Error(`haproxy does not take connections on ${port}:\n${log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// The front door is on this host: its thumbprint header is believed from 127.0.0.1 (certificate-bound tokens).
const node = await startTestNode({ SLUICE_TRUSTED_PROXIES: '127.0.0.1' });
t.teardown(() => node.close());
const doorPort = await freePort();
await startHaproxy(await frontDoorConfig('sluice', doorPort, `127.0.0.1:${node.ingress!.port}`), doorPort);

// For the header case only: a plain upstream that records what the front door sends it.
const echoed: IncomingHttpHeaders[] = [];
const echo = createServer((req, res) => {
  echoed.push(req.headers);
  res.end('{}');
});
await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
t.teardown(() => void echo.close());
const echoDoor = await freePort();
const echoAddress = echo.address() as { port: number };
await startHaproxy(await frontDoorConfig('echo', echoDoor, `127.0.0.1:${echoAddress.port}`), echoDoor);

const answered = async () => {
  // Before the first request the counter has no series: none counts as 0 here.
  const page = parseMetrics(await (await fetch(`${node.admin}/metrics`)).text());
  return sample(page, 'sluice_http_requests_total', {}, { missing: 0 });
};

t.test('mTLS: only a valid client certificate of the CA reaches Sluice', async (t) => {
  const before = await answered();
  const get = 'GET /v1/auth/jwks HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n';
  for (const [name, cert] of [
    ['no client certificate', undefined],
    ['a certificate of another CA', certs.foreign],
    ['an expired certificate of the CA', certs.expired],
  ] as const) {
    const r = await rawHttps(doorPort, get, withCert(cert), 1000);
    t.same(r.statuses, [], `${name}: no HTTP answer`);
    t.ok(r.error, `${name}: the TLS handshake is refused (${r.error})`);
  }
  t.equal(await answered(), before, 'none of them reached Sluice');
  for (const cert of [certs.client, certs.client2]) {
    const r = await rawHttps(doorPort, get, withCert(cert));
    t.same(r.statuses, [200], `${cert.subject.replace('\n', ', ')}: JWKS through the front door`);
  }
  t.equal(await answered(), before + 2);
});

t.test('HTTP/2 clients are served too (as HTTP/1.1 to Sluice)', async (t) => {
  const session = h2connect(`https://localhost:${doorPort}`, withCert(certs.client));
  t.teardown(() => void session.close());
  const status = await new Promise<number>((resolve, reject) => {
    const req = session.request({ ':path': '/v1/auth/jwks' });
    req.on('response', (h) => resolve(Number(h[':status'])));
    req.on('error', reject);
    req.resume();
    req.end();
  });
  t.equal(status, 200);
});

t.test('bad framing gets 400 and a close; what is smuggled behind it is never answered', async (t) => {
  const smuggled = 'GET /v1/auth/jwks HTTP/1.1\r\nhost: localhost\r\n\r\n';
  const post = 'POST /v1/auth/token HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n';
  const headers = (n: number) => Array.from({ length: n }, (_, i) => `x-h${i}: v\r\n`).join('');
  const cases: [string, string, number][] = [
    [
      'two Content-Length of different values',
      `${post}content-length: 2\r\ncontent-length: ${2 + smuggled.length}\r\n\r\n{}${smuggled}`,
      400,
    ],
    ['Content-Length not a number', `${post}content-length: +2\r\n\r\n{}${smuggled}`, 400],
    ['Transfer-Encoding foo', `${post}transfer-encoding: foo\r\n\r\n0\r\n\r\n${smuggled}`, 400],
    ['Transfer-Encoding gzip', `${post}transfer-encoding: gzip\r\n\r\n0\r\n\r\n${smuggled}`, 400],
    ['Transfer-Encoding chunked, gzip', `${post}transfer-encoding: chunked, gzip\r\n\r\n0\r\n\r\n${smuggled}`, 400],
    [
      'chunked twice',
      `${post}transfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n${smuggled}`,
      400,
    ],
    // A coding HAProxy knows and does not decode: its own 422, and the close.
    ['Transfer-Encoding gzip, chunked', `${post}transfer-encoding: gzip, chunked\r\n\r\n0\r\n\r\n${smuggled}`, 422],
    ['HTTP/1.0 without Host', `GET /v1/auth/jwks HTTP/1.0\r\n\r\n${smuggled}`, 400],
    ['HTTP/1.0 with Host (uWS 20.30 would never answer it)', `GET /v1/auth/jwks HTTP/1.0\r\nhost: x\r\n\r\n`, 400],
    ['HTTP/1.1 without Host', `GET /v1/auth/jwks HTTP/1.1\r\n\r\n${smuggled}`, 400],
    ['two Host headers', `GET /v1/auth/jwks HTTP/1.1\r\nhost: a\r\nhost: b\r\n\r\n${smuggled}`, 400],
    ['41 header lines', `GET /v1/auth/jwks HTTP/1.1\r\nhost: x\r\n${headers(40)}\r\n${smuggled}`, 400],
    [
      '20 KB of headers',
      `GET /v1/auth/jwks HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n${smuggled}`,
      400,
    ],
  ];
  const before = await answered();
  for (const [name, request, status] of cases) {
    // Read for 5 s, half of uWS's own 10 s timeout: an answer at all is the front door's, not a timeout's.
    const r = await rawHttps(doorPort, request, withCert(certs.client), 5000);
    t.same(r.statuses, [status], `${name}: ${status}, and nothing else answered (${r.firstByteMs?.toFixed(1)} ms)`);
    t.ok(r.closed, `${name}: the connection is closed`);
  }
  t.equal(await answered(), before, 'none of them reached Sluice');

  const fine = await rawHttps(
    doorPort,
    `GET /v1/auth/jwks HTTP/1.1\r\nhost: x\r\n${headers(38)}connection: close\r\n\r\n`,
    withCert(certs.client),
  );
  t.same(fine.statuses, [200], '40 header lines are served (uWS takes 48; the front door adds 3)');
});

t.test('framing with one reading is made plain before Sluice sees it, and answered', async (t) => {
  const post = 'POST /v1/auth/token HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n';
  // uWS 20.30 alone leaves these unanswered until its 10 s timeout; HAProxy sends one Content-Length on.
  for (const [name, request] of [
    ['the same Content-Length twice', `${post}content-length: 2\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}`],
    ['a Content-Length list of one value', `${post}content-length: 2, 2\r\nconnection: close\r\n\r\n{}`],
    // Read as chunked (an empty body), the Content-Length dropped, and the connection closed after.
    ['Content-Length beside chunked', `${post}transfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n0\r\n\r\n`],
  ]) {
    // Read for 5 s, half of uWS's 10 s timeout: answered at all, it was answered, not timed out.
    const r = await rawHttps(doorPort, request, withCert(certs.client), 5000);
    t.same(r.statuses, [400], `${name}: Sluice's own answer (an empty token request)`);
    t.match(r.text, /invalid_request/, `${name}: the token endpoint's error`);
  }
});

t.test("a method no route knows gets 501 problem+json from the front door; a known one Sluice's 405", async (t) => {
  const before = await answered();
  for (const method of ['QUERY', 'FOO', 'PROPFIND', 'M-SEARCH', 'get']) {
    for (const path of ['/v1/auth/jwks', '/v1/webhooks/dlq', '/nowhere']) {
      const r = await rawHttps(
        doorPort,
        `${method} ${path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n`,
        withCert(certs.client),
      );
      t.same(r.statuses, [501], `${method} ${path}: 501`);
      const body = JSON.parse(r.text.split('\r\n\r\n')[1] ?? '{}');
      t.match(r.text, /content-type: application\/problem\+json/i, `${method} ${path}: problem+json`);
      t.match(body, { status: 501, code: 'NOT_IMPLEMENTED', title: 'Not implemented' }, `${method} ${path}: its code`);
    }
  }
  t.equal(await answered(), before, 'none of them reached Sluice');
  const known = await rawHttps(
    doorPort,
    'PUT /v1/auth/jwks HTTP/1.1\r\nhost: localhost\r\ncontent-length: 0\r\nconnection: close\r\n\r\n',
    withCert(certs.client),
  );
  t.same(known.statuses, [405], "a method uWS routes reaches Sluice's 405");
  t.match(known.text, /allow: GET, HEAD/i, 'with Allow');
  t.equal(await answered(), before + 1, "that one was Sluice's");
});

t.test('headers that take longer than 5 s get 408 and a close', async (t) => {
  const r = await rawHttps(doorPort, 'GET /v1/auth/jwks HTTP/1.1\r\nhost: localhost\r\n', withCert(certs.client), 8000);
  t.same(r.statuses, [408]);
  t.ok(r.closed);
  t.ok(r.firstByteMs! > 4500, `not before the 5 s of timeout http-request (${r.firstByteMs} ms)`);
});

t.test("X-Client-Cert-Sha256 and -Subject describe the verified certificate, never the client's words", async (t) => {
  const forged =
    'x-client-cert-sha256: 00\r\nX-Client-Cert-Sha256: 11\r\nx-client-cert-subject: CN=admin\r\n' +
    'x-forwarded-for: 203.0.113.9\r\n';
  for (const cert of [certs.client, certs.client2]) {
    echoed.length = 0;
    const r = await rawHttps(
      echoDoor,
      `GET /anything HTTP/1.1\r\nhost: localhost\r\n${forged}connection: close\r\n\r\n`,
      withCert(cert),
    );
    t.same(r.statuses, [200]);
    t.equal(echoed.length, 1);
    t.equal(echoed[0]['x-client-cert-sha256'], cert.sha256, 'one header, the hex SHA-256 of the DER');
    const subject = cert.subject.split('\n').reverse().join(',');
    t.equal(echoed[0]['x-client-cert-subject'], subject, 'its subject DN, most specific first');
    t.equal(echoed[0]['x-forwarded-for'], '127.0.0.1', "X-Forwarded-For is the front door's, not the client's");
  }
});

t.test('through the real front door, a token is bound to the certificate it was issued over', async (t) => {
  const c = await node.client('admin', 'acme');
  const body = JSON.stringify({
    grant_type: 'client_credentials',
    client_id: c.client_id,
    client_secret: c.client_secret,
  });
  const issued = await rawHttps(
    doorPort,
    `POST /v1/auth/token HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n` +
      `content-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
    withCert(certs.client),
  );
  t.same(issued.statuses, [200]);
  const token = JSON.parse(issued.text.slice(issued.text.indexOf('\r\n\r\n') + 4)).access_token as string;
  const claims = JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString());
  t.same(claims.cnf, { 'x5t#S256': certs.client.x5tS256 }, "cnf names the client certificate's thumbprint");
  const list = (cert: Cert) =>
    rawHttps(
      doorPort,
      `GET /v1/webhooks/endpoints?limit=1 HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer ${token}\r\n` +
        'connection: close\r\n\r\n',
      withCert(cert),
    );
  t.same((await list(certs.client)).statuses, [200], 'over the same certificate: served');
  const other = await list(certs.client2);
  t.same(other.statuses, [401], 'over another certificate of the CA: 401');
  t.match(other.text, /TOKEN_CERT_MISMATCH/);
});

t.test('sluice front-door checks its files and says how to hand HAProxy the key', async (t) => {
  const args = (cert: string, key?: string) => [
    'front-door',
    '--listen',
    '8443',
    '--upstream',
    '127.0.0.1:8080',
    '--cert',
    cert,
    ...(key ? ['--key', key] : []),
    '--client-ca',
    certs.ca.cert,
  ];
  const apart = await runCli(args(certs.server.cert, certs.server.key), process.env);
  t.equal(apart.code, 2, 'a key HAProxy would not find');
  t.match(apart.stderr, /cat .*server\.pem .*server\.key > sluice\.pem/);
  const wrong = await runCli(args(certs.server.pem, certs.client.key), process.env);
  t.equal(wrong.code, 2);
  t.match(wrong.stderr, /is not the key of the certificate/);
  // HAProxy's own rule: a key not in the PEM is read from <cert>.key.
  const cert = join(dir, 'beside.pem');
  copyFileSync(certs.server.cert, cert);
  copyFileSync(certs.server.key, `${cert}.key`);
  const beside = await runCli(args(cert, `${cert}.key`), process.env);
  t.equal(beside.code, 0, beside.stderr);
  t.match(beside.stdout, /bind :8443 ssl crt \S+beside\.pem ca-file/);
  const file = join(dir, 'beside.cfg');
  writeFileSync(file, beside.stdout);
  const check = spawnSync(HAPROXY, ['-c', '-f', file], { encoding: 'utf8' });
  t.equal(check.status, 0, `haproxy -c accepts it: ${check.stdout}${check.stderr}`);
});

t.test('--self-signed-clients: a certificate outside the CA gets through, without its subject', async (t) => {
  const port = await freePort();
  await startHaproxy(
    await frontDoorConfig('echo-self-signed', port, `127.0.0.1:${echoAddress.port}`, ['--self-signed-clients']),
    port,
  );
  const get = 'GET /anything HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n';
  const none = await rawHttps(port, get, withCert(), 1000);
  t.same(none.statuses, [], 'still no answer without a client certificate');
  const from = echoed.length;
  const foreign = await rawHttps(port, get, withCert(certs.foreign));
  t.same(foreign.statuses, [200], 'a certificate that does not chain to the CA is let through');
  const seen = echoed[from];
  t.equal(seen['x-client-cert-sha256'], certs.foreign.sha256, 'its thumbprint goes upstream');
  t.equal(seen['x-client-cert-subject'], undefined, 'its subject does not (it was not verified)');
  const verified = await rawHttps(port, get, withCert(certs.client));
  t.same(verified.statuses, [200]);
  t.ok(echoed[from + 1]?.['x-client-cert-subject'], 'a verified certificate still has its subject passed on');
});
