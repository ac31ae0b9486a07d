/** A bench's credentials and tokens: `sluice admin create-client`, then POST /v1/auth/token. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

export interface BenchClient {
  client_id: string;
  client_secret: string;
}

/** A client of `tenant` (role admin), made with `sluice admin create-client --json` (`sluice`: bin/sluice.js). */
export async function adminClient(
  sluice: string,
  cwd: string,
  env: NodeJS.ProcessEnv,
  tenant: string,
  role = 'admin',
): Promise<BenchClient> {
  const args = [sluice, 'admin', 'create-client', '--tenant', tenant, '--role', role, '--json'];
  const out = await promisify(execFile)(process.execPath, args, { cwd, env });
  const line = out.stdout.split('\n').find((l) => l.startsWith('{'));
  if (!line) throw new Error(`sluice admin create-client printed no client:\n${out.stderr}`);
  const { client_id, client_secret } = JSON.parse(line) as BenchClient;
  return { client_id, client_secret };
}

/** An access token of `c` from `base`, retried for 10 s (the ingress may not have read the client yet). */
export async function bearerToken(base: string, c: BenchClient): Promise<string> {
  for (let i = 0; ; i++) {
    const res = await fetch(`${base}/v1/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials', ...c }),
    });
    if (res.status === 200) return ((await res.json()) as { access_token: string }).access_token;
    if (i >= 40) throw new Error(`POST /v1/auth/token answered ${res.status}: ${await res.text()}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
