/**
 * The admin port (/healthz, /readyz, /metrics: every tenant with its traffic) listens on
 * SLUICE_ADMIN_HOST, 127.0.0.1 by default, whatever SLUICE_HOST says; it is opened elsewhere only
 * on purpose. Reachability is checked on other addresses of this machine: 127.0.0.2 (Linux routes
 * all of 127.0.0.0/8 to loopback, but a socket bound to 127.0.0.1 does not answer there) and every
 * IPv4 address of a non-loopback interface.
 */
import t from 'tap';
import { connect } from 'node:net';
import { networkInterfaces } from 'node:os';
import { loadConfig } from '../../core/config.ts';
import { ConfigError } from '../../core/errors.ts';
import { Metrics } from '../../core/metrics.ts';
import { adminUrl, startAdminServer } from '../../ingress/admin-server.ts';
import { brokers, freePort, startDispatcherNode, startTestNode, uniquePrefix } from '../helpers/sluice.ts';
import { runCli } from '../../harness/sluice-cli.ts';

/**
 * Addresses of this machine other than 127.0.0.1; not those of the regions lab (10.231.x.x, the
 * bridge harness/lab/net.ts makes), which the faults lane beside this one takes down at any time.
 */
const otherAddresses = [
  ...(process.platform === 'linux' ? ['127.0.0.2'] : []),
  ...Object.values(networkInterfaces())
    .flat()
    .filter((i) => i && !i.internal && i.family === 'IPv4' && !i.address.startsWith('10.231.'))
    .map((i) => i!.address),
];

/** Whether a TCP connection to host:port is accepted. */
function reachable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host, port, timeout: 5000 }, () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
    s.on('timeout', () => {
      s.destroy();
      resolve(false);
    });
  });
}

/**
 * Whether Sluice's admin server answers on host:port (its /healthz JSON): a TCP accept alone could be
 * another process of the machine on the same port number (the regions lab's proxies listen on
 * addresses of their own while the fault tests run beside this one).
 */
async function adminAnswers(host: string, port: number): Promise<boolean> {
  if (!(await reachable(host, port))) return false;
  try {
    const res = await fetch(`http://${host}:${port}/healthz`, { signal: AbortSignal.timeout(5000) });
    const body = (await res.json()) as { ready?: unknown };
    return typeof body.ready === 'boolean';
  } catch {
    return false;
  }
}

function refusedBy(env: Record<string, string>): Error | null {
  try {
    loadConfig(env);
  } catch (err) {
    return err as Error;
  }
  return null;
}

t.test('SLUICE_ADMIN_HOST: 127.0.0.1 by default, whatever SLUICE_HOST is; IP addresses accepted', async (t) => {
  t.equal(loadConfig({}).adminHost, '127.0.0.1');
  // A public listener beyond loopback needs a master key of its own (not the development key).
  const key = { SLUICE_MASTER_KEY: 'k'.repeat(32) };
  t.equal(loadConfig({ ...key, SLUICE_HOST: '0.0.0.0' }).adminHost, '127.0.0.1', 'not SLUICE_HOST');
  t.equal(loadConfig({ ...key, SLUICE_HOST: '10.1.2.3' }).adminHost, '127.0.0.1');
  for (const ok of ['0.0.0.0', '::', '::1', '10.1.2.3', 'fd00::2', 'localhost'])
    t.equal(loadConfig({ SLUICE_ADMIN_HOST: ok }).adminHost, ok, ok);
  t.equal(loadConfig({ SLUICE_ADMIN_HOST: '' }).adminHost, '127.0.0.1', 'empty: the default');
});

t.test('an invalid SLUICE_ADMIN_HOST is refused at start, by name, saying what is expected', async (t) => {
  for (const bad of ['yes', '127.0.0.1:9464', '0.0.0.0/0', '999.1.1.1', '[::1]', 'admin.example.com', ' 127.0.0.1']) {
    const err = refusedBy({ SLUICE_ADMIN_HOST: bad });
    t.ok(err instanceof ConfigError, `${JSON.stringify(bad)}: a ConfigError`);
    t.match(err?.message ?? '', /^SLUICE_ADMIN_HOST: must be an IP address/, `${JSON.stringify(bad)}: ${err?.message}`);
    t.ok(err?.message.includes(JSON.stringify(bad)), 'quotes the value');
  }
  // Every command that serves an admin port stops before it opens anything.
  for (const command of ['start', 'ingress', 'dispatcher']) {
    const res = await runCli([command], {
      ...process.env,
      KAFKA_BROKERS: brokers().join(','),
      SLUICE_ADMIN_HOST: '0.0.0.0:9464',
    });
    t.equal(res.code, 1, `sluice ${command}: exits 1`);
    t.match(
      res.stderr,
      /^sluice: configuration error: SLUICE_ADMIN_HOST: must be an IP address .*got "0\.0\.0\.0:9464"/,
      `sluice ${command}: one line naming the variable`,
    );
  }
});

t.test('an address that is not this machine is refused when the admin port opens, saying so', async (t) => {
  await t.rejects(
    startAdminServer('203.0.113.7', 0, new Metrics(), {
      ready: () => true,
      problem: () => null,
      details: () => ({}),
    }),
    {
      code: 'LISTEN_FAILED',
      message: /cannot serve the admin port on 203\.0\.113\.7:0: .*not an address of this machine/,
    },
  );
});

t.test('adminUrl: where to reach the admin port from this machine', async (t) => {
  t.equal(adminUrl('127.0.0.1', 9464, '/metrics'), 'http://127.0.0.1:9464/metrics');
  t.equal(adminUrl('0.0.0.0', 9464, '/healthz'), 'http://127.0.0.1:9464/healthz');
  t.equal(adminUrl('::', 9464), 'http://[::1]:9464');
  t.equal(adminUrl('fd00::2', 1), 'http://[fd00::2]:1');
});

t.test('ingress with SLUICE_HOST=0.0.0.0: public on every address, admin on 127.0.0.1 only', async (t) => {
  t.ok(otherAddresses.length > 0, `other addresses of this machine: ${otherAddresses.join(', ')}`);
  const node = await startTestNode({ SLUICE_HOST: '0.0.0.0', SLUICE_DEV_ALLOW_DEVELOPMENT_KEY: 'true' });
  t.teardown(() => node.close());
  const { port, adminPort } = node.ingress!;
  t.equal((await fetch(`${node.admin}/metrics`)).status, 200, '/metrics answers on 127.0.0.1');
  for (const address of otherAddresses) {
    t.ok(await reachable(address, port), `${address}: the public port is open (the check can see an open port)`);
    t.notOk(await adminAnswers(address, adminPort), `${address}: the admin port is closed`);
  }
});

t.test('SLUICE_ADMIN_HOST=0.0.0.0 opens the admin port on every address', async (t) => {
  const node = await startTestNode({
    SLUICE_HOST: '0.0.0.0',
    SLUICE_ADMIN_HOST: '0.0.0.0',
    SLUICE_DEV_ALLOW_DEVELOPMENT_KEY: 'true',
  });
  t.teardown(() => node.close());
  for (const address of ['127.0.0.1', ...otherAddresses]) {
    const res = await fetch(`http://${address}:${node.ingress!.adminPort}/healthz`);
    t.equal(res.status, 200, `${address}: /healthz answers`);
  }
});

t.test('a dispatcher-only process (sluice dispatcher) keeps its admin port on 127.0.0.1 too', async (t) => {
  const node = await startDispatcherNode({
    SLUICE_TOPIC_PREFIX: uniquePrefix('adm'),
    SLUICE_HOST: '0.0.0.0',
    SLUICE_DEV_ALLOW_DEVELOPMENT_KEY: 'true',
    SLUICE_ADMIN_PORT: String(await freePort()),
    SLUICE_TOPIC_PARTITIONS: '1',
  });
  t.teardown(() => node.close());
  t.equal((await fetch(`http://127.0.0.1:${node.adminPort}/healthz`)).status, 200, '/healthz answers on 127.0.0.1');
  for (const address of otherAddresses)
    t.notOk(await adminAnswers(address, node.adminPort), `${address}: the admin port is closed`);
});
