/**
 * Logs never carry secrets. A real `sluice start` at debug level, with tracing on, does a full run
 * (tokens issued, an endpoint registered, a delivery signed, a client secret rotated, a client
 * revoked); everything it printed is searched for every secret the run handled.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createLogger } from '../../core/log.ts';
import { loadConfig } from '../../core/config.ts';
import { openContext } from '../../core/context.ts';
import { unseal } from '../../core/secrets.ts';
import { call, freePort, uniquePrefix } from '../helpers/sluice.ts';
import { runCli, SLUICE_BIN } from '../../harness/sluice-cli.ts';
import { receiver, sleep } from '../dispatcher/receiver.ts';

t.test('fields named like secrets are redacted and secret-looking values masked', async (t) => {
  const lines: string[] = [];
  const log = createLogger('debug', 'test', (l) => lines.push(l));
  log.info('hello', {
    client_secret: 's3cr3t-one',
    headers: { authorization: 'Bearer abc.def.ghi' },
    note: 'got whsec_AAAABBBBCCCC here',
    nested: { secret: 's3cr3t-two' },
  });
  log.warn('Bearer eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln leaked into a message');
  const text = lines.join('\n');
  for (const s of ['s3cr3t-one', 's3cr3t-two', 'abc.def.ghi', 'whsec_', 'eyJhbGci'])
    t.notOk(text.includes(s), `no ${s}`);
  const first = JSON.parse(lines[0]);
  t.equal(first.level, 'info');
  t.equal(first.component, 'test');
  t.equal(first.msg, 'hello');
  t.equal(first.client_secret, '[redacted]');
});

t.test('a full run logs no client secret, signing secret, bearer token or master key', async (t) => {
  const port = await freePort();
  const adminPort = await freePort();
  const masterKey = randomBytes(24).toString('hex');
  const env = {
    ...process.env,
    SLUICE_TOPIC_PREFIX: uniquePrefix('logs'),
    SLUICE_HOST: '127.0.0.1',
    SLUICE_PORT: String(port),
    SLUICE_ADMIN_PORT: String(adminPort),
    SLUICE_ISSUER: `http://127.0.0.1:${port}`,
    SLUICE_TOPIC_PARTITIONS: '3',
    SLUICE_MASTER_KEY: masterKey,
    SLUICE_LOG_LEVEL: 'debug',
    SLUICE_TRACE_EXPORTER: 'console',
    SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
    SLUICE_TIME_SCALE: '600',
    // A client secret and a signing key rotate within seconds.
    SLUICE_SECRET_ROTATION_DAYS: '0.0001',
    SLUICE_KEY_ROTATION_DAYS: '0.0001',
    SLUICE_ROTATION_CHECK_MS: '200',
  };
  const created = await runCli(['admin', 'create-client', '--tenant', 'acme', '--role', 'admin', '--json'], env);
  t.equal(created.code, 0, created.stderr);
  const client = JSON.parse(created.stdout.trim().split('\n').pop()!) as { client_id: string; client_secret: string };

  const child = spawn(process.execPath, [SLUICE_BIN, 'start', '--workers', '1'], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const exited = new Promise((r) => child.once('exit', r));
  t.teardown(() => void child.kill('SIGKILL'));
  const r = await receiver(200);
  t.teardown(() => r.close());
  const base = `http://127.0.0.1:${port}`;
  for (const deadline = Date.now() + 60_000; ; await sleep(100)) {
    if (
      (await fetch(`http://127.0.0.1:${adminPort}/readyz`).then(
        (x) => x.status,
        () => 0,
      )) === 200
    )
      break;
    if (Date.now() > deadline) throw new Error(`sluice start did not become ready:\n${output}`);
  }
  const tokenOf = async (id: string, secret: string) => {
    const res = await call(base, 'POST', '/v1/auth/token', {
      body: { grant_type: 'client_credentials', client_id: id, client_secret: secret },
    });
    return res.json?.access_token as string;
  };
  const secrets: string[] = [masterKey, client.client_secret];
  const token = await tokenOf(client.client_id, client.client_secret);
  t.ok(token, 'a token issued');
  secrets.push(token);
  t.equal(
    (
      await call(base, 'POST', '/v1/auth/token', {
        body: { grant_type: 'client_credentials', client_id: client.client_id, client_secret: 'wrong-secret-value' },
      })
    ).status,
    401,
  );
  t.equal(
    (await call(base, 'GET', '/v1/webhooks/endpoints', { token: `${token}x` })).status,
    401,
    'a bad bearer token',
  );
  const ep = await call(base, 'POST', '/v1/webhooks/endpoints', {
    token,
    body: { url: r.url, events: ['inference.completed'] },
  });
  t.equal(ep.status, 201, 'an endpoint registered');
  t.match(ep.json.secret, /^whsec_/);
  secrets.push(ep.json.secret);
  t.equal(
    (await call(base, 'POST', '/v1/webhooks/events', { token, body: { type: 'inference.completed', data: { n: 1 } } }))
      .status,
    202,
  );
  const [hit] = await r.until((e) => e.length >= 1, 30_000, 'the signed delivery');
  t.ok(hit.headers.traceparent, 'the delivery carried a traceparent');
  // The rotation leader gives the client a new secret within seconds (SLUICE_SECRET_ROTATION_DAYS).
  // Once it has, the token of the old secret reads no secret (401): the operator picks it up.
  let rotated: string | undefined;
  for (const deadline = Date.now() + 60_000; !rotated && Date.now() < deadline; await sleep(200)) {
    const res = await call(base, 'GET', `/v1/auth/clients/${client.client_id}/secret`, { token });
    if (res.status !== 401) continue;
    const read = await runCli(['admin', 'client-secret', '--client-id', client.client_id, '--json'], env);
    if (read.code === 0) rotated = JSON.parse(read.stdout.trim().split('\n').pop()!).client_secret;
  }
  t.ok(rotated, 'the client secret rotated');
  if (rotated) secrets.push(rotated, await tokenOf(client.client_id, rotated));
  const revoked = await call(base, 'POST', '/v1/auth/revocations', {
    token,
    body: { client_id: client.client_id, reason: 'test' },
  });
  t.equal(revoked.status, 201, 'the client revoked');
  for (const deadline = Date.now() + 10_000; !output.includes('revocation applied') && Date.now() < deadline; )
    await sleep(50);
  child.kill('SIGTERM');
  await exited;

  // The signing keys the run made, sealed and in clear.
  const config = loadConfig(env);
  const ctx = await openContext(config, { brokers: config.kafkaBrokers!, component: 'logs-check' });
  const keys = ctx.keys.records();
  await ctx.close();
  t.ok(keys.length >= 1, `${keys.length} signing key(s)`);
  for (const k of keys)
    secrets.push(k.private_sealed, (JSON.parse(unseal(config.masterKey, k.private_sealed)) as { d: string }).d);
  const found = secrets.filter((s) => s && output.includes(s));
  t.same(
    found.map((s) => `${s.slice(0, 12)}…`),
    [],
    'no secret, token or key appears in the output',
  );
  t.notOk(output.includes('whsec_'), 'no whsec_ value at all');
  t.notMatch(output, /eyJ[A-Za-z0-9_-]+\.eyJ/, 'no JWT');
  const logLines = output
    .split('\n')
    .filter((l) => l.startsWith('{"level"'))
    .map((l) => JSON.parse(l));
  t.ok(logLines.length > 5, `${logLines.length} JSON log lines`);
  const requests = logLines.filter((l) => l.msg === 'request');
  t.ok(
    requests.length >= 6 &&
      requests.every((l) => /^[0-9a-f]{32}$/.test(l.trace_id) && /^[0-9a-f]{16}$/.test(l.span_id)),
    'every request line carries trace and span ids',
  );
  const delivered = logLines.find((l) => l.msg === 'delivery outcome' && l.outcome === 'delivered');
  t.equal(
    delivered?.trace_id,
    String(hit.headers.traceparent).split('-')[1],
    'the delivery line carries the trace the receiver saw',
  );
  t.ok(
    logLines.some((l) => l.msg === 'revocation applied'),
    'the revocation was logged',
  );
});
