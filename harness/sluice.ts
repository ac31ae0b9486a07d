/** Sluice processes of a bench: their environment, their readiness, the extra `sluice dispatcher` members. */
import { createClient, type CreatedClient } from '../core/clients/provisioning.ts';
import { loadConfig } from '../core/config.ts';
import { openContext } from '../core/context.ts';
import { freePort, freePorts } from '../core/net/free-port.ts';
import { type Children, type Launched, tail, waitForLine } from './children.ts';
import { processTree } from './proc-cpu.ts';

/** The environment every bench's Sluice shares: the broker, the topic prefix, the node's own address. */
export function sluiceEnv(o: { brokers: string[]; prefix: string; port: number; dataDir: string }): NodeJS.ProcessEnv {
  return {
    ...process.env,
    KAFKA_BROKERS: o.brokers.join(','),
    SLUICE_TOPIC_PREFIX: o.prefix,
    SLUICE_HOST: '127.0.0.1',
    SLUICE_ISSUER: `http://127.0.0.1:${o.port}`,
    SLUICE_LOG_LEVEL: 'error',
    SLUICE_DATA_DIR: o.dataDir,
  };
}

/** For benches whose endpoints point at the local receiver, and register them by the hundred (no ping budget). */
export const RECEIVER_ENV = {
  SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
  SLUICE_TENANT_TARGET_REQUESTS_PER_MINUTE: '1000000',
};

/**
 * The JSON of an admin port's /readyz once it answers 200 and `until` holds (120 s at most); throws
 * with the log's tail when the process exits first.
 */
export async function waitReady(
  node: Pick<Launched, 'proc' | 'log'>,
  name: string,
  adminPort: number,
  until: (body: any) => boolean = () => true,
  pollMs = 250,
): Promise<any> {
  for (const deadline = Date.now() + 120_000; ; await sleep(pollMs)) {
    if (node.proc.exitCode !== null) throw new Error(`${name} exited (${node.proc.exitCode}):\n${tail(node.log)}`);
    const body = await fetch(`http://127.0.0.1:${adminPort}/readyz`).then(
      (r) => (r.status === 200 ? r.json() : null),
      () => null,
    );
    if (body && until(body)) return body;
    if (Date.now() > deadline)
      throw new Error(`${name}: ${adminPort}/readyz not as awaited within 120 s:\n${tail(node.log)}`);
  }
}

export interface Dispatcher {
  name: string;
  adminPort: number;
  /** SLUICE_KAFKA_CLIENT_ID: names the process in the consumer groups (null: Sluice's default). */
  clientId: string | null;
  launched: Launched;
}

/** `count` `sluice dispatcher` processes, one after the other, each running before the next starts. */
export async function startDispatchers(
  children: Children,
  sluice: string,
  env: NodeJS.ProcessEnv,
  count: number,
  clientIdPrefix: string | null = null,
  nodeArgs: string[] = [],
): Promise<Dispatcher[]> {
  const out: Dispatcher[] = [];
  for (let i = 1; i <= count; i++) {
    const adminPort = await freePort();
    const clientId = clientIdPrefix === null ? null : `${clientIdPrefix}-dispatcher-${i}`;
    const name = `dispatcher-${i}`;
    const launched = children.spawn(
      name,
      sluice,
      ['dispatcher'],
      { ...env, SLUICE_ADMIN_PORT: String(adminPort), ...(clientId ? { SLUICE_KAFKA_CLIENT_ID: clientId } : {}) },
      'sluice',
      nodeArgs,
    );
    await waitForLine(launched, /dispatcher running/, 120_000, `dispatcher ${i}`);
    out.push({ name, adminPort, clientId, launched });
  }
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * `sluice ingress --workers N` (k6 targets of the suite and the front-door bench), with `env` over
 * the bench's; resolves once every worker is ready.
 */
export async function startIngress(
  children: Children,
  name: string,
  sluice: string,
  workers: number,
  env: NodeJS.ProcessEnv,
): Promise<{ port: number; launched: Launched; pids: () => number[] }> {
  const port = await freePort();
  const adminPort = await freePorts(workers);
  const args = ['ingress', '--workers', String(workers), '--port', String(port), '--admin-port', String(adminPort)];
  const launched = children.spawn(name, sluice, args, env, 'sluice');
  for (let i = 0; i < workers; i++) await waitReady(launched, name, adminPort + i, undefined, 200);
  return { port, launched, pids: () => processTree(launched.proc.pid!) };
}

/** `count` clients of `role` made in this process (no CLI run each), as `sluice admin create-client` does. */
export async function benchClients(brokers: string[], prefix: string, count: number, roles: string[]) {
  const ctx = await openContext(loadConfig({ KAFKA_BROKERS: brokers.join(','), SLUICE_TOPIC_PREFIX: prefix }), {
    brokers,
    component: 'bench',
  });
  const out: CreatedClient[][] = roles.map(() => []);
  for (let i = 0; i < count; i++)
    for (const [r, role] of roles.entries()) out[r].push(await createClient(ctx, { tenant: 'bench', role }));
  await ctx.close();
  return out;
}
