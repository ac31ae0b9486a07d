/**
 * Test harness: a real Sluice node on the test run's real Kafka (KAFKA_BROKERS, set by `npm test`),
 * with a topic prefix of its own so test files never see each other's state.
 */
import { freePort, freePorts } from '../../core/net/free-port.ts';
import { ownedPrefix } from '../../harness/topic-janitor.ts';
import { loadConfig, type Config } from '../../core/config.ts';
import { startNode, type SluiceNode } from '../../cli/assemble.ts';
import { createClient, type CreatedClient } from '../../core/clients/provisioning.ts';
import type { Clock } from '../../core/clock.ts';
import { requestToken } from '../../harness/sluice-api.ts';
import { spawn } from 'node:child_process';
import { SLUICE_BIN } from '../../harness/sluice-cli.ts';

export function brokers(): string[] {
  const b = process.env.KAFKA_BROKERS;
  if (!b) throw new Error('KAFKA_BROKERS is not set: run the tests with `npm test`, which starts a real Kafka');
  return b.split(',');
}

export { freePort, freePorts };

/**
 * A topic prefix (or group id) of this test file's own: `npm test` deletes its topics once the
 * file's process has ended (harness/topic-janitor.ts).
 */
export function uniquePrefix(name = 't'): string {
  return ownedPrefix(name);
}

export interface TestNode extends SluiceNode {
  base: string;
  config: Readonly<Config>;
  admin: string;
  client(role?: string, tenant?: string, region?: string): Promise<CreatedClient>;
  token(c: CreatedClient, scope?: string): Promise<string>;
}

export async function startTestNode(
  env: Record<string, string> = {},
  opts: { clock?: Clock; dispatcher?: boolean; prefix?: string; brokers?: string[] } = {},
): Promise<TestNode> {
  const kafka = opts.brokers ?? brokers();
  const port = await freePort();
  const adminPort = await freePort();
  const config = loadConfig({
    SLUICE_TOPIC_PREFIX: opts.prefix ?? uniquePrefix(),
    SLUICE_PORT: String(port),
    SLUICE_ADMIN_PORT: String(adminPort),
    SLUICE_HOST: '127.0.0.1',
    // A node joining another's prefix adopts that cluster's issuer (core/tokens/cluster-issuer.ts).
    ...(opts.prefix ? {} : { SLUICE_ISSUER: `http://127.0.0.1:${port}` }),
    SLUICE_TOPIC_PARTITIONS: '3',
    SLUICE_LOG_LEVEL: 'error',
    KAFKA_BROKERS: kafka.join(','),
    ...(process.env.SLUICE_DATA_DIR ? { SLUICE_DATA_DIR: process.env.SLUICE_DATA_DIR } : {}),
    ...env,
  });
  const node = await startNode(config, {
    brokers: kafka,
    clock: opts.clock,
    ingress: true,
    dispatcher: opts.dispatcher ?? false,
  });
  const base = `http://127.0.0.1:${node.ingress!.port}`;
  return {
    ...node,
    base,
    config: node.ctx.config,
    admin: `http://127.0.0.1:${node.ingress!.adminPort}`,
    client: (role = 'admin', tenant = 'acme', region = config.region) =>
      createClient(node.ctx, { tenant, role, region }),
    token: (c, scope) => fetchToken(base, c, scope),
  };
}

/** A dispatcher-only node (what `sluice dispatcher` runs) on the test run's Kafka; `env` over the defaults. */
export async function startDispatcherNode(env: Record<string, string> = {}): Promise<SluiceNode> {
  const config = loadConfig({
    SLUICE_TOPIC_PREFIX: uniquePrefix(),
    SLUICE_HOST: '127.0.0.1',
    SLUICE_ADMIN_PORT: '0',
    SLUICE_LOG_LEVEL: 'error',
    KAFKA_BROKERS: brokers().join(','),
    ...(process.env.SLUICE_DATA_DIR ? { SLUICE_DATA_DIR: process.env.SLUICE_DATA_DIR } : {}),
    ...env,
  });
  return startNode(config, { brokers: brokers(), ingress: false, dispatcher: true });
}

/**
 * Reads until `ok` holds and returns that value; past `timeoutMs` throws, naming `what` and the
 * last value read. For waits on work that happens elsewhere (a view, a receiver), not for timing.
 */
export async function until<T>(
  read: () => T | Promise<T>,
  ok: (v: T) => boolean,
  timeoutMs: number,
  what: string,
  everyMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() > deadline) {
      const size = Array.isArray(v) ? `${v.length} items, ` : '';
      throw new Error(`${what}: not within ${timeoutMs} ms (last: ${size}${JSON.stringify(v)?.slice(0, 400)})`);
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** A client-credentials token from the node at `base` (fails on anything but 200). */
export async function fetchToken(
  base: string,
  c: { client_id: string; client_secret: string },
  scope?: string,
): Promise<string> {
  const res = await requestToken(base, c, scope);
  if (res.status !== 200) throw new Error(`token request failed: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

export async function call(
  base: string,
  method: string,
  path: string,
  opts: { token?: string; body?: unknown; raw?: string | Buffer; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  let body: string | Buffer | undefined;
  if (opts.raw !== undefined) body = opts.raw;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(`${base}${path}`, { method, headers, body: body as BodyInit | undefined });
  const text = await res.text();
  let json: any;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** A dispatching test node and another ingress node on the same topics (its own view and producer). */
export async function nodePair(env: Record<string, string>): Promise<{ node: TestNode; other: TestNode }> {
  const node = await startTestNode(env, { dispatcher: true });
  const other = await startTestNode(env, { prefix: node.config.topicPrefix });
  return { node, other };
}

interface Asserts {
  equal(found: unknown, wanted: unknown, message: string): unknown;
  same(found: unknown, wanted: unknown, message: string): unknown;
}

/** `res` is a 400 INVALID_REQUEST whose errors name exactly `paths` (JSON paths of the request body). */
export function assertInvalid(
  t: Asserts,
  res: { status: number; json?: { code?: string; errors?: { path: string }[] } },
  name: string,
  paths: string[],
): void {
  t.equal(res.status, 400, `${name}: status`);
  t.equal(res.json?.code, 'INVALID_REQUEST', `${name}: code`);
  t.same(
    res.json?.errors?.map((e) => e.path),
    paths,
    `${name}: paths`,
  );
}

/** `sluice start <args>` as its own process (stdout kept), SIGKILLed at the test's end if still running. */
export function spawnStart(t: { teardown(fn: () => void): void }, args: string[], env: NodeJS.ProcessEnv) {
  const child = spawn(process.execPath, [SLUICE_BIN, 'start', ...args], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  return { child, exited, output: () => out };
}
