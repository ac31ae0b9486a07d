/**
 * mTLS to receivers (issue 23, item 5): with SLUICE_DELIVERY_CLIENT_CERT and
 * SLUICE_DELIVERY_CLIENT_KEY, Sluice presents that certificate on every ping, test send and
 * delivery over https, and publishes its chain at GET /v1/webhooks/client-certificate.
 *
 * The receiver is a real node:https server that requires a client certificate of the test CA
 * (`requestCert`, `rejectUnauthorized`), on a server certificate of that CA. Sluice runs as a real
 * `sluice start` process, so that NODE_EXTRA_CA_CERTS (read only at process start) makes it trust
 * the test CA like any public one: with the setting the receiver sees Sluice's certificate; without
 * it the receiver refuses the handshake and the endpoint stays PENDING.
 */
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { createHash, type X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSecureContext, type TLSSocket } from 'node:tls';
import { loadConfig } from '../../core/config.ts';
import { ConfigError } from '../../core/errors.ts';
import { Http1Agent } from '../../outbound/http1-agent.ts';
import { makeCerts } from '../../harness/certs.ts';
import { runCli, SLUICE_BIN } from '../../harness/sluice-cli.ts';
import { call, fetchToken, freePort, uniquePrefix, until } from '../helpers/sluice.ts';

const dir = mkdtempSync(join(tmpdir(), 'sluice-delivery-mtls-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const certs = makeCerts(dir);
/** What SLUICE_DELIVERY_CLIENT_CERT names: Sluice's certificate, then the CA that issued it. */
const chainFile = join(dir, 'sluice-chain.pem');
writeFileSync(chainFile, readFileSync(certs.client.cert, 'utf8') + readFileSync(certs.ca.cert, 'utf8'));

interface Seen {
  /** The event type of each request that reached the receiver, with the client certificate's thumbprint. */
  requests: { type: string; certSha256: string | null }[];
  /** Handshakes the receiver refused, and why. */
  refused: string[];
}

/** An https receiver on 127.0.0.1 that requires a client certificate issued by the test CA. */
async function mtlsReceiver(): Promise<Seen & { url: string; close(): Promise<void> }> {
  const seen: Seen = { requests: [], refused: [] };
  const server = createHttpsServer(
    {
      key: readFileSync(certs.server.key),
      cert: readFileSync(certs.server.cert),
      ca: readFileSync(certs.ca.cert),
      requestCert: true,
      rejectUnauthorized: true,
    },
    (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const peer = (req.socket as TLSSocket).getPeerCertificate();
        const certSha256 = peer?.raw ? createHash('sha256').update(peer.raw).digest('hex') : null;
        let type = '?';
        try {
          type = JSON.parse(Buffer.concat(chunks).toString('utf8')).type;
        } catch {}
        seen.requests.push({ type, certSha256 });
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      });
    },
  );
  server.on('tlsClientError', (err) => seen.refused.push(err.message));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    ...seen,
    url: `https://127.0.0.1:${port}/hook`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

interface Sluice {
  base: string;
  token: string;
  output(): string;
}

/** A `sluice start --workers 1` (ingress and dispatcher) trusting the test CA, with `extra` settings. */
async function startSluice(t: Test, extra: Record<string, string>): Promise<Sluice> {
  const port = await freePort();
  const adminPort = await freePort();
  const env = {
    ...process.env,
    NODE_EXTRA_CA_CERTS: certs.ca.cert,
    SLUICE_TOPIC_PREFIX: uniquePrefix('mtls'),
    SLUICE_HOST: '127.0.0.1',
    SLUICE_PORT: String(port),
    SLUICE_ADMIN_PORT: String(adminPort),
    SLUICE_ISSUER: `http://127.0.0.1:${port}`,
    SLUICE_TOPIC_PARTITIONS: '3',
    SLUICE_LOG_LEVEL: 'error',
    SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
    ...extra,
  };
  const created = await runCli(['admin', 'create-client', '--tenant', 'acme', '--role', 'admin', '--json'], env);
  if (created.code !== 0) throw new Error(`create-client failed: ${created.stderr}`);
  const client = JSON.parse(created.stdout.trim().split('\n').pop()!) as { client_id: string; client_secret: string };
  const child = spawn(process.execPath, [SLUICE_BIN, 'start', '--workers', '1'], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const exited = new Promise((r) => child.once('exit', r));
  t.teardown(async () => {
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(killer);
  });
  const ready = () =>
    fetch(`http://127.0.0.1:${adminPort}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    );
  await until(ready, (ok) => ok || child.exitCode !== null, 60_000, 'sluice start ready');
  if (child.exitCode !== null) throw new Error(`sluice start exited:\n${output}`);
  const base = `http://127.0.0.1:${port}`;
  return { base, token: await fetchToken(base, client), output: () => output };
}

t.test('the settings are checked at start-up: both or neither, readable, the key of the certificate', async (t) => {
  const load = (env: Record<string, string>) => () => loadConfig(env);
  t.equal(loadConfig({}).deliveryClientCertificate, null, 'unset: none');
  const ok = loadConfig({ SLUICE_DELIVERY_CLIENT_CERT: chainFile, SLUICE_DELIVERY_CLIENT_KEY: certs.client.key });
  const chain = ok.deliveryClientCertificate!.chain as X509Certificate[];
  t.same(
    chain.map((c) => c.subject),
    [certs.client.subject, certs.ca.subject],
    'the chain, leaf first',
  );
  t.notMatch(JSON.stringify(ok), /PRIVATE KEY/, 'the key does not print with the config');
  const refusals: [string, Record<string, string>, RegExp][] = [
    [
      'the certificate alone',
      { SLUICE_DELIVERY_CLIENT_CERT: chainFile },
      /SLUICE_DELIVERY_CLIENT_KEY.*both or neither/,
    ],
    ['the key alone', { SLUICE_DELIVERY_CLIENT_KEY: certs.client.key }, /SLUICE_DELIVERY_CLIENT_CERT.*both or neither/],
    [
      'a missing certificate file',
      { SLUICE_DELIVERY_CLIENT_CERT: join(dir, 'nope.pem'), SLUICE_DELIVERY_CLIENT_KEY: certs.client.key },
      /SLUICE_DELIVERY_CLIENT_CERT: cannot read .*nope\.pem/,
    ],
    [
      'a missing key file',
      { SLUICE_DELIVERY_CLIENT_CERT: chainFile, SLUICE_DELIVERY_CLIENT_KEY: join(dir, 'nope.key') },
      /SLUICE_DELIVERY_CLIENT_KEY: cannot read .*nope\.key/,
    ],
    [
      'a key file as the certificate',
      { SLUICE_DELIVERY_CLIENT_CERT: certs.client.key, SLUICE_DELIVERY_CLIENT_KEY: certs.client.key },
      /SLUICE_DELIVERY_CLIENT_CERT: .* holds no PEM certificate/,
    ],
    [
      'a certificate as the key',
      { SLUICE_DELIVERY_CLIENT_CERT: chainFile, SLUICE_DELIVERY_CLIENT_KEY: certs.client.cert },
      /SLUICE_DELIVERY_CLIENT_KEY: .* holds no readable unencrypted PEM private key/,
    ],
    [
      'the key of another certificate',
      { SLUICE_DELIVERY_CLIENT_CERT: chainFile, SLUICE_DELIVERY_CLIENT_KEY: certs.client2.key },
      /SLUICE_DELIVERY_CLIENT_KEY: the key in .* does not belong to the certificate/,
    ],
  ];
  const backwards = join(dir, 'backwards.pem');
  writeFileSync(backwards, readFileSync(certs.ca.cert, 'utf8') + readFileSync(certs.client.cert, 'utf8'));
  refusals.push([
    'a chain out of order',
    { SLUICE_DELIVERY_CLIENT_CERT: backwards, SLUICE_DELIVERY_CLIENT_KEY: certs.ca.key },
    /SLUICE_DELIVERY_CLIENT_CERT: certificate 2 in .* did not issue certificate 1/,
  ]);
  for (const [what, env, message] of refusals) {
    t.throws(load(env), ConfigError, `${what}: a ConfigError`);
    t.throws(load(env), { message }, `${what}: says which and why`);
  }
  // The CLI stops at start-up with the one line naming the variable.
  const bad = await runCli(['dispatcher'], {
    ...process.env,
    SLUICE_DELIVERY_CLIENT_CERT: chainFile,
    SLUICE_DELIVERY_CLIENT_KEY: certs.client2.key,
  });
  t.not(bad.code, 0, 'sluice dispatcher refuses to start');
  t.match(bad.stderr, /configuration error: SLUICE_DELIVERY_CLIENT_KEY: the key in .* does not belong/);
});

t.test('the delivery agent presents the certificate of its TLS context, made once', async (t) => {
  const r = await mtlsReceiver();
  t.teardown(() => r.close());
  // In this process the test CA is not trusted by default: the context names it.
  const ca = readFileSync(certs.ca.cert);
  const send = (agent: Http1Agent) =>
    new Promise<number | string>((resolve) => {
      const body = '{"type":"probe"}';
      const request = `POST /hook HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
      let status = 0;
      agent.send(new URL(r.url), request, {
        onHead: (h) => (status = h.status),
        onData: () => {},
        onEnd: () => resolve(status),
        onError: (err) => resolve(`error: ${err.message}`),
      });
    });
  const withCert = new Http1Agent({
    connectionsPerOrigin: 1,
    secureContext: createSecureContext({
      ca,
      cert: readFileSync(certs.client.cert),
      key: readFileSync(certs.client.key),
    }),
  });
  t.teardown(() => withCert.destroy());
  t.equal(await send(withCert), 200);
  t.equal(await send(withCert), 200, 'again, on the kept connection');
  t.same(r.requests, [
    { type: 'probe', certSha256: certs.client.sha256 },
    { type: 'probe', certSha256: certs.client.sha256 },
  ]);
  const without = new Http1Agent({ connectionsPerOrigin: 1, secureContext: createSecureContext({ ca }) });
  t.teardown(() => without.destroy());
  t.match(await send(without), /^error: /, 'no certificate: no answer');
  t.equal(r.requests.length, 2, 'the request without a certificate never reached the receiver');
  await until(
    () => r.refused.length,
    (n) => n > 0,
    5000,
    'the refused handshake',
  );
  t.match(r.refused.join('\n'), /did not return a certificate/, 'the receiver refused for want of a certificate');
});

t.test(
  'with the settings: pings, test sends and deliveries present the certificate; the chain is published',
  async (t) => {
    const r = await mtlsReceiver();
    t.teardown(() => r.close());
    const sluice = await startSluice(t, {
      SLUICE_DELIVERY_CLIENT_CERT: chainFile,
      SLUICE_DELIVERY_CLIENT_KEY: certs.client.key,
    });
    const { base, token } = sluice;

    const published = await call(base, 'GET', '/v1/webhooks/client-certificate');
    t.equal(published.status, 200, 'the certificate is published, without a token');
    t.match(published.headers.get('content-type'), /application\/json/);
    t.equal(published.json.sha256, certs.client.sha256, 'its thumbprint');
    t.equal(published.json.subject, certs.client.subject);
    t.equal(published.json.issuer, certs.ca.subject);
    t.ok(Date.parse(published.json.not_after) > Date.now() + 300 * 86400_000, 'valid for about a year');
    const blocks = String(published.json.pem).match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g);
    t.same(
      blocks,
      [readFileSync(certs.client.cert, 'utf8').trim(), readFileSync(certs.ca.cert, 'utf8').trim()],
      'the chain: the certificate, then its issuer',
    );
    t.notMatch(published.json.pem, /PRIVATE KEY/);

    const created = await call(base, 'POST', '/v1/webhooks/endpoints', {
      token,
      body: { url: r.url, events: ['inference.completed'] },
    });
    t.equal(created.status, 201, created.text);
    t.equal(created.headers.get('sluice-ping-result'), 'ok', `ping: ${created.headers.get('sluice-ping-error')}`);
    t.equal(created.json.state, 'ACTIVE', 'the registration ping made it ACTIVE');
    const id = created.json.id as string;

    const test = await call(base, 'POST', `/v1/webhooks/endpoints/${id}/test`, {
      token,
      body: { type: 'inference.completed', data: { n: 0 } },
    });
    t.equal(test.status, 200, test.text);
    t.equal(test.json.status, 200, 'the test send got through');

    for (let n = 1; n <= 3; n++) {
      const res = await call(base, 'POST', '/v1/webhooks/events', {
        token,
        body: { type: 'inference.completed', data: { n } },
      });
      t.equal(res.status, 202, res.text);
    }
    await until(
      () => r.requests.filter((x) => x.type === 'inference.completed').length,
      (n) => n >= 4,
      30_000,
      'the test send and 3 deliveries',
    );
    t.same(
      r.requests.map((x) => x.type),
      ['ping', ...Array(4).fill('inference.completed')],
      'the ping, the test send and the deliveries reached the receiver',
    );
    t.ok(
      r.requests.every((x) => x.certSha256 === certs.client.sha256),
      "every request came over a connection with Sluice's certificate",
    );
    t.same(r.refused, [], 'no handshake refused');
  },
);

t.test(
  'without them: the receiver refuses the handshake, the endpoint stays PENDING, nothing is published',
  async (t) => {
    const r = await mtlsReceiver();
    t.teardown(() => r.close());
    const { base, token } = await startSluice(t, {});
    const published = await call(base, 'GET', '/v1/webhooks/client-certificate');
    t.equal(published.status, 404);
    t.match(published.headers.get('content-type'), /application\/problem\+json/);
    t.equal(published.json.code, 'NOT_FOUND');
    t.match(published.json.detail, /SLUICE_DELIVERY_CLIENT_CERT/);

    const created = await call(base, 'POST', '/v1/webhooks/endpoints', {
      token,
      body: { url: r.url, events: ['inference.completed'] },
    });
    t.equal(created.status, 201, created.text);
    t.equal(created.headers.get('sluice-ping-result'), 'failed');
    t.ok(created.headers.get('sluice-ping-error'), `why: ${created.headers.get('sluice-ping-error')}`);
    t.equal(created.json.state, 'PENDING', 'the endpoint stays PENDING');
    const test = await call(base, 'POST', `/v1/webhooks/endpoints/${created.json.id}/test`, {
      token,
      body: { type: 'inference.completed', data: { n: 0 } },
    });
    t.equal(test.status, 200, test.text);
    t.equal(test.json.ok, false, `the test send failed: ${test.json.error}`);
    t.same(r.requests, [], 'no request reached the receiver');
    t.ok(r.refused.length >= 2, `the receiver refused ${r.refused.length} handshakes`);
    t.ok(
      r.refused.every((m) => /did not return a certificate/.test(m)),
      `each for want of a client certificate, not for its own being untrusted: ${r.refused.join('; ')}`,
    );
  },
);
