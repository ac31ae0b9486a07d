import t from 'tap';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../core/config.ts';
import { ConfigError } from '../../core/errors.ts';
import { type Cert, makeCerts } from '../../harness/certs.ts';
import { rawHttp, rawHttps } from '../helpers/raw-http.ts';
import { parseMetrics, sample } from '../helpers/prometheus.ts';
import { freePort, startTestNode } from '../helpers/sluice.ts';

const dir = mkdtempSync(join(tmpdir(), 'sluice-tls-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const certs = makeCerts(dir);
const ca = readFileSync(certs.ca.cert);

interface Answer {
  status?: number;
  body?: string;
  error?: string;
}

/** One HTTPS request with node:https (a connection of its own), never rejecting. */
function https(port: number, path: string, client?: Cert, init: { method?: string; body?: string } = {}) {
  return new Promise<Answer>((resolve) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: init.method ?? 'GET',
        servername: 'localhost',
        ca,
        agent: false,
        headers: init.body ? { 'content-type': 'application/json' } : {},
        ...(client ? { cert: readFileSync(client.cert), key: readFileSync(client.key) } : {}),
      },
      (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode, body }));
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }));
    req.end(init.body);
  });
}

function configError(env: Record<string, string>): { variable: string; message: string } | string {
  try {
    loadConfig(env);
    return 'no error';
  } catch (err) {
    if (err instanceof ConfigError) return { variable: err.variable, message: err.message };
    throw err;
  }
}

t.test('the TLS settings are checked at start-up, each fault named', async (t) => {
  const { server, client, ca: authority } = certs;
  t.equal(loadConfig({}).tls, null, 'no variables: plain HTTP');
  t.match(loadConfig({}).issuer, /^http:\/\/127\.0\.0\.1:8080$/);
  const tls = loadConfig({ SLUICE_TLS_CERT: server.cert, SLUICE_TLS_KEY: server.key });
  t.same(tls.tls, { certFile: server.cert, keyFile: server.key, clientCaFile: null });
  t.equal(tls.issuer, 'https://127.0.0.1:8080', 'the default issuer says https');
  const cases: [string, Record<string, string>, string, RegExp][] = [
    ['a cert without its key', { SLUICE_TLS_CERT: server.cert }, 'SLUICE_TLS_KEY', /both or neither/],
    ['a key without its cert', { SLUICE_TLS_KEY: server.key }, 'SLUICE_TLS_CERT', /both or neither/],
    ['a client CA alone', { SLUICE_TLS_CLIENT_CA: authority.cert }, 'SLUICE_TLS_CLIENT_CA', /needs SLUICE_TLS_CERT/],
    [
      'a missing cert file',
      { SLUICE_TLS_CERT: join(dir, 'nope.pem'), SLUICE_TLS_KEY: server.key },
      'SLUICE_TLS_CERT',
      /cannot read .*nope\.pem/,
    ],
    [
      'a key file as the cert',
      { SLUICE_TLS_CERT: server.key, SLUICE_TLS_KEY: server.key },
      'SLUICE_TLS_CERT',
      /no PEM certificate/,
    ],
    [
      'a cert file as the key',
      { SLUICE_TLS_CERT: server.cert, SLUICE_TLS_KEY: server.cert },
      'SLUICE_TLS_KEY',
      /not an unencrypted PEM private key/,
    ],
    [
      "another certificate's key",
      { SLUICE_TLS_CERT: server.cert, SLUICE_TLS_KEY: client.key },
      'SLUICE_TLS_KEY',
      /not the key of the certificate/,
    ],
    [
      'an unreadable client CA',
      { SLUICE_TLS_CERT: server.cert, SLUICE_TLS_KEY: server.key, SLUICE_TLS_CLIENT_CA: join(dir, 'none.pem') },
      'SLUICE_TLS_CLIENT_CA',
      /cannot read/,
    ],
  ];
  for (const [name, env, variable, message] of cases) {
    const found = configError(env);
    t.match(found, { variable, message }, name);
  }
});

t.test('SLUICE_TLS_CERT and SLUICE_TLS_KEY: HTTPS through uWS, no client certificate asked', async (t) => {
  const node = await startTestNode({
    SLUICE_TLS_CERT: certs.server.cert,
    SLUICE_TLS_KEY: certs.server.key,
    SLUICE_ISSUER: '',
  });
  t.teardown(() => node.close());
  const port = node.ingress!.port;
  const jwks = await https(port, '/v1/auth/jwks');
  t.equal(jwks.status, 200, 'JWKS over HTTPS');
  t.ok(JSON.parse(jwks.body!).keys.length > 0);
  const meta = await https(port, '/.well-known/oauth-authorization-server');
  t.equal(JSON.parse(meta.body!).issuer, `https://127.0.0.1:${port}`, 'the default issuer is the https URL');
  const c = await node.client('admin', 'acme');
  const issued = await https(port, '/v1/auth/token', undefined, {
    method: 'POST',
    body: JSON.stringify({ grant_type: 'client_credentials', client_id: c.client_id, client_secret: c.client_secret }),
  });
  t.equal(issued.status, 200, 'a token over HTTPS');
  const plain = await rawHttp(port, 'GET /v1/auth/jwks HTTP/1.1\r\nhost: x\r\n\r\n', 1000);
  t.same(plain.statuses, [], 'plain HTTP on the TLS port gets no HTTP answer');
  const client = await https(port, '/v1/auth/jwks', certs.client);
  t.equal(client.status, 200, 'a client certificate nobody asked for changes nothing');
});

t.test('SLUICE_TLS_CLIENT_CA: no route is reached without a valid client certificate of that CA', async (t) => {
  const seen: IncomingHttpHeaders[] = [];
  const upstream = createServer((req, res) => {
    seen.push(req.headers);
    res.end('{}');
  });
  const upstreamPort = await freePort();
  await new Promise<void>((r) => upstream.listen(upstreamPort, '127.0.0.1', r));
  const listeningBefore = listeningTcpPorts();
  const gatesBefore = new Set(gateDirectories());
  const node = await startTestNode({
    SLUICE_TLS_CERT: certs.server.cert,
    SLUICE_TLS_KEY: certs.server.key,
    SLUICE_TLS_CLIENT_CA: certs.ca.cert,
    SLUICE_UPSTREAM_INFERENCE: `http://127.0.0.1:${upstreamPort}`,
  });
  t.teardown(async () => {
    await node.close();
    upstream.close();
  });
  const port = node.ingress!.port;
  const answered = async () => {
    // Before the first request the counter has no series: none counts as 0 here.
    const page = parseMetrics(await (await fetch(`${node.admin}/metrics`)).text());
    return sample(page, 'sluice_http_requests_total', {}, { missing: 0 });
  };
  const before = await answered();
  const get = 'GET /v1/auth/jwks HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n';
  for (const [name, cert] of [
    ['no client certificate', undefined],
    ['a certificate of another CA', certs.foreign],
    ['an expired certificate of the CA', certs.expired],
  ] as const) {
    const r = await rawHttps(
      port,
      get,
      { ca, ...(cert ? { cert: readFileSync(cert.cert), key: readFileSync(cert.key) } : {}) },
      1000,
    );
    t.same(r.statuses, [], `${name}: no HTTP answer`);
    t.ok(r.error ?? r.closed, `${name}: the connection ends (${r.error ?? 'closed by the server'})`);
  }
  t.equal(await answered(), before, 'none of them reached a route (no request counted)');

  const good = await https(port, '/v1/auth/jwks', certs.client);
  t.equal(good.status, 200, 'a certificate of the CA: 200');
  t.equal((await https(port, '/v1/auth/jwks', certs.client2)).status, 200, 'the other one too');
  t.equal(await answered(), before + 2, 'those two were counted');

  // Behind the gate the edge still sees the client's own address, not the loopback it is passed on.
  const c = await node.client('admin', 'acme');
  const issued = await https(port, '/v1/auth/token', certs.client, {
    method: 'POST',
    body: JSON.stringify({ grant_type: 'client_credentials', client_id: c.client_id, client_secret: c.client_secret }),
  });
  t.equal(issued.status, 200, 'a token over mTLS');
  const token = JSON.parse(issued.body!).access_token as string;
  const proxied = await rawHttps(
    port,
    `GET /v1/inference/models HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer ${token}\r\n` +
      'connection: close\r\n\r\n',
    { ca, cert: readFileSync(certs.client.cert), key: readFileSync(certs.client.key) },
  );
  t.same(proxied.statuses, [200], 'a scope-checked request through the gate');
  t.equal(seen.at(-1)?.['x-forwarded-for'], '127.0.0.1', "the upstream is told the client's address");

  // Around the gate: the routes listen on no TCP port but the public one, and the private socket
  // serves no connection the gate did not lead with the client's address.
  const opened = listeningTcpPorts().filter((p) => !listeningBefore.includes(p));
  t.same(
    opened.sort((a, b) => a - b),
    [port, new URL(node.admin).port].map(Number).sort((a, b) => a - b),
    'this node opened TCP listeners on the public and the admin port only',
  );
  const gates = gateDirectories().filter((d) => !gatesBefore.has(d));
  t.ok(gates.length > 0, 'the gate passes connections over a private Unix socket');
  for (const dir of gates) {
    t.equal(statSync(dir).mode & 0o777, 0o700, `${dir}: only its owner may enter`);
    const around = await rawHttp({ path: join(dir, 'uws.sock') }, get, 1000);
    t.same(around.statuses, [], 'a connection made to it without the gate is not served');
  }
  t.equal(await answered(), before + 4, 'and reached no route (the four counted are the ones through the gate)');
});

/** TCP ports this process listens on (from /proc: the sockets among its descriptors in state LISTEN). */
function listeningTcpPorts(): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode) inodes.add(inode);
    } catch {
      // closed meanwhile
    }
  }
  const ports: number[] = [];
  for (const table of ['/proc/self/net/tcp', '/proc/self/net/tcp6']) {
    for (const row of readFileSync(table, 'utf8').trim().split('\n').slice(1)) {
      const cols = row.trim().split(/\s+/);
      if (cols[3] === '0A' && inodes.has(cols[9])) ports.push(Number.parseInt(cols[1].split(':')[1], 16));
    }
  }
  return [...new Set(ports)];
}

function gateDirectories(): string[] {
  return readdirSync(tmpdir())
    .filter((d) => d.startsWith('sluice-gate-'))
    .map((d) => join(tmpdir(), d));
}
