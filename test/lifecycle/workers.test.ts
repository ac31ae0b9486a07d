import t from 'tap';
import { spawn } from 'node:child_process';
import { createHash, createHmac } from 'node:crypto';
import { brokers, uniquePrefix, freePort, freePorts, call, spawnStart } from '../helpers/sluice.ts';
import { sumSeries } from '../helpers/prometheus.ts';
import { processTree } from '../../harness/proc-cpu.ts';
import { PROJECT_ROOT } from '../../core/paths.ts';

const root = PROJECT_ROOT;

/** What `sluice start` needs here: this run's Kafka, a prefix of its own, its admin ports from `adminPort`. */
const startEnv = (name: string, adminPort: number): NodeJS.ProcessEnv => ({
  ...process.env,
  KAFKA_BROKERS: brokers().join(','),
  SLUICE_TOPIC_PREFIX: uniquePrefix(name),
  SLUICE_ADMIN_PORT: String(adminPort),
  SLUICE_HOST: '127.0.0.1',
  SLUICE_LOG_LEVEL: 'error',
});

t.test(
  'sluice start --workers 2: two processes share the port, node and workers serve admin ports, SIGTERM stops all',
  async (t) => {
    const port = await freePort();
    const peerPort = await freePort();
    const adminPort = await freePorts(3);
    const masterKey = 'workers-test-master-key-0123456789abcdef';
    const { child, exited, output } = spawnStart(t, ['--workers', '2'], {
      ...startEnv('workers', adminPort),
      SLUICE_PORT: String(port),
      SLUICE_PEER_PORT: String(peerPort),
      SLUICE_MASTER_KEY: masterKey,
    });
    const ready = async (p: number) => {
      for (let i = 0; i < 120; i++) {
        const ok = await fetch(`http://127.0.0.1:${p}/readyz`).then(
          (r) => r.status === 200,
          () => false,
        );
        if (ok) return true;
        await new Promise((r) => setTimeout(r, 500));
      }
      return false;
    };
    t.ok(await ready(adminPort + 1), 'worker 0 is ready on SLUICE_ADMIN_PORT + 1');
    t.ok(await ready(adminPort + 2), 'worker 1 is ready on SLUICE_ADMIN_PORT + 2');
    t.ok(await ready(adminPort), 'the node is ready on SLUICE_ADMIN_PORT once both are');
    for (let i = 0; i < 60 && !/client_secret=\S+/.test(output()); i++) await new Promise((r) => setTimeout(r, 500));
    const id = /client_id=(\S+)/.exec(output())?.[1];
    const secret = /client_secret=(\S+)/.exec(output())?.[1];
    t.ok(id && secret, 'the bootstrap credential is printed once');
    t.equal(output().match(/Bootstrap admin credential/g)?.length, 1, 'by one worker only');
    let issued = 0;
    for (let i = 0; i < 20; i++) {
      const res = await call(`http://127.0.0.1:${port}`, 'POST', '/v1/auth/token', {
        body: { grant_type: 'client_credentials', client_id: id, client_secret: secret },
        headers: { connection: 'close' },
      });
      if (res.status === 200) issued++;
    }
    t.equal(issued, 20, 'every worker issues tokens on the shared port');
    // The node's /metrics is the sum of its workers' pages.
    const tokens = async (p: number) =>
      sumSeries(await (await fetch(`http://127.0.0.1:${p}/metrics`)).text(), 'sluice_tokens_issued_total');
    const [node, w0, w1] = await Promise.all([tokens(adminPort), tokens(adminPort + 1), tokens(adminPort + 2)]);
    t.equal(node, w0 + w1, `the node's count (${node}) is its workers' sum (${w0} + ${w1})`);
    t.ok(node >= 20, 'and holds every token issued');
    // A revocation pushed by another region (and never written to Kafka here) reaches the worker
    // holding the peer port, which passes it to the other: every worker refuses the token.
    const token = (
      await call(`http://127.0.0.1:${port}`, 'POST', '/v1/auth/token', {
        body: { grant_type: 'client_credentials', client_id: id, client_secret: secret },
      })
    ).json.access_token;
    const body = JSON.stringify({ client_id: id, revoked_at: Date.now(), sent_at: Date.now() });
    const key = createHmac('sha256', createHash('sha256').update(masterKey).digest())
      .update('sluice revocation push v1')
      .digest();
    const pushed = await fetch(`http://127.0.0.1:${peerPort}/revocations`, {
      method: 'POST',
      headers: { 'x-sluice-signature': createHmac('sha256', key).update(body).digest('hex') },
      body,
    });
    t.equal(pushed.status, 204, 'the push is taken');
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) {
      const res = await call(`http://127.0.0.1:${port}`, 'GET', '/v1/audit?limit=1', {
        token,
        headers: { connection: 'close' },
      });
      statuses.push(res.status);
      if (res.status !== 401) await new Promise((r) => setTimeout(r, 100)); // the relay is one IPC hop
    }
    t.same(statuses.slice(-15), Array(15).fill(401), 'every worker refuses the pushed client (new connections)');
    child.kill('SIGTERM');
    t.equal(await exited, 0, 'SIGTERM stops every worker and the primary exits 0');
  },
);

t.test('a stop does not wait for clients that hold keep-alive connections', async (t) => {
  const { startTestNode } = await import('../helpers/sluice.ts');
  const { connect } = await import('node:net');
  const node = await startTestNode();
  const port = node.ingress!.port;
  const sockets = await Promise.all(
    Array.from(
      { length: 5 },
      () =>
        new Promise<import('node:net').Socket>((resolve) => {
          const s = connect(port, '127.0.0.1', () => s.write('GET /v1/auth/jwks HTTP/1.1\r\nhost: x\r\n\r\n'));
          s.once('data', () => resolve(s));
        }),
    ),
  );
  // The clients keep their connections busy (a request every 500 ms), so uWS's idle timeout never
  // closes them: only the stop can, and a stop that waits for them never ends.
  const busy = sockets.map((s) =>
    setInterval(() => s.writable && s.write('GET /v1/auth/jwks HTTP/1.1\r\nhost: x\r\n\r\n'), 500),
  );
  const closed = sockets.map((s) => new Promise<void>((r) => s.once('close', () => r())));
  const liveness = new Promise<'open'>((r) => setTimeout(() => r('open'), 30_000).unref());
  const stopped = await Promise.race([node.close().then(() => Promise.all(closed)), liveness]);
  for (const timer of busy) clearInterval(timer);
  for (const s of sockets) s.destroy();
  t.not(stopped, 'open', 'the node stopped and closed 5 busy keep-alive connections');
});

t.test('sluice ingress --workers 2: both processes issue tokens on the shared port', async (t) => {
  const { startTestNode } = await import('../helpers/sluice.ts');
  const { cliEnv } = await import('../../harness/sluice-cli.ts');
  const node = await startTestNode();
  t.teardown(() => node.close());
  const c = await node.client('admin', 'acme');
  const port = await freePort();
  const adminPort = await freePorts(3);
  const child = spawn(
    process.execPath,
    ['bin/sluice.js', 'ingress', '--workers', '2', '--port', String(port), '--admin-port', String(adminPort)],
    { cwd: root, env: cliEnv(node.config), stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  const ready = async (p: number) => {
    for (let i = 0; i < 120; i++) {
      if (
        await fetch(`http://127.0.0.1:${p}/readyz`).then(
          (r) => r.status === 200,
          () => false,
        )
      )
        return true;
      await new Promise((r) => setTimeout(r, 500));
    }
    return false;
  };
  t.ok(await ready(adminPort + 1), 'worker 0 is ready on --admin-port + 1');
  t.ok(await ready(adminPort + 2), 'worker 1 is ready on --admin-port + 2');
  t.ok(await ready(adminPort), 'the node is ready on --admin-port');
  let issued = 0;
  for (let i = 0; i < 40; i++) {
    const res = await call(`http://127.0.0.1:${port}`, 'POST', '/v1/auth/token', {
      body: { grant_type: 'client_credentials', client_id: c.client_id, client_secret: c.client_secret },
      headers: { connection: 'close' },
    });
    if (res.status === 200) issued++;
  }
  t.equal(issued, 40, 'every request got a token');
  const issuedBy = async (p: number) =>
    Number(
      /^sluice_tokens_issued_total\S* (\d+)/m.exec(await (await fetch(`http://127.0.0.1:${p}/metrics`)).text())?.[1] ??
        0,
    );
  const counts = [await issuedBy(adminPort + 1), await issuedBy(adminPort + 2)];
  t.equal(counts[0] + counts[1], 40, `the two workers issued them between them (${counts.join(' + ')})`);
  t.equal(await issuedBy(adminPort), 40, "the node's /metrics counts them all");
  t.ok(counts[0] > 0 && counts[1] > 0, 'and each worker issued some (the kernel spreads 40 connections over both)');
  child.kill('SIGTERM');
  t.equal(await exited, 0, 'SIGTERM stops both workers and the primary exits 0');
});

t.test('a stop that comes while the workers are still loading stops them all', async (t) => {
  const { child, exited } = spawnStart(t, ['--workers', '2'], {
    ...startEnv('early-stop', await freePorts(3)),
    SLUICE_PORT: String(await freePort()),
  });
  // The primary has forked both workers, which are still loading their modules: no listener for
  // the primary's 'shutdown' yet.
  const workers = () => processTree(child.pid!).length - 1;
  for (let i = 0; i < 500 && workers() < 2; i++) await new Promise((r) => setTimeout(r, 10));
  t.equal(workers(), 2, 'both workers forked');
  child.kill('SIGTERM');
  const timeout = new Promise<'hung'>((r) => setTimeout(() => r('hung'), 60_000).unref());
  t.equal(await Promise.race([exited, timeout]), 0, 'the primary and both workers exit, 0');
});
