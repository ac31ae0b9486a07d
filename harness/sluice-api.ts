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

/** POST /v1/auth/token at `base` with `c`'s client credentials (and `scope`): the answer as it came. */
export function requestToken(base: string, c: BenchClient, scope?: string): Promise<Response> {
  return fetch(`${base}/v1/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      grant_type: 'client_credentials',
      client_id: c.client_id,
      client_secret: c.client_secret,
      ...(scope ? { scope } : {}),
    }),
  });
}

/** An access token of `c` from `base`, retried for 10 s (the ingress may not have read the client yet). */
export async function bearerToken(base: string, c: BenchClient): Promise<string> {
  for (let i = 0; ; i++) {
    const res = await requestToken(base, c);
    if (res.status === 200) return ((await res.json()) as { access_token: string }).access_token;
    if (i >= 40) throw new Error(`POST /v1/auth/token answered ${res.status}: ${await res.text()}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** A request to the Sluice API as the holder of a token: its status and its body (JSON when it parses). */
export type Api = (method: string, path: string, body?: unknown) => Promise<{ status: number; body: any }>;

/** Requests to `base` (or what it gives at the time) with the token `token()` gives. */
export function sluiceApi(base: string | (() => string), token: () => string | Promise<string>): Api {
  return async (method, path, body) => {
    const headers: Record<string, string> = { authorization: `Bearer ${await token()}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch((typeof base === 'string' ? base : base()) + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    try {
      return { status: res.status, body: text ? JSON.parse(text) : null };
    } catch {
      return { status: res.status, body: text };
    }
  };
}

/** Registers an endpoint for `url` (inference.completed unless `more` says otherwise); its id, once ACTIVE. */
export async function registerEndpoint(api: Api, url: string, more: Record<string, unknown> = {}): Promise<string> {
  const r = await api('POST', '/v1/webhooks/endpoints', { url, events: ['inference.completed'], ...more });
  if (r.status !== 201 || r.body?.state !== 'ACTIVE')
    throw new Error(`registering ${url} answered ${r.status}: ${JSON.stringify(r.body)}`);
  return r.body.id;
}

/** The event ids of an endpoint's DLQ entries, by pages of 1,000 (`maxPages` at most). */
export async function dlqEventIds(api: Api, endpointId: string, maxPages = 100): Promise<string[]> {
  const ids: string[] = [];
  for (let cursor: string | null = null, pages = 0; pages < maxPages; pages++) {
    const page = cursor ? `&cursor=${encodeURIComponent(cursor)}` : '';
    const res = await api('GET', `/v1/webhooks/dlq?endpoint_id=${encodeURIComponent(endpointId)}&limit=1000${page}`);
    if (res.status !== 200) throw new Error(`GET /v1/webhooks/dlq answered ${res.status}: ${JSON.stringify(res.body)}`);
    for (const e of res.body.data as { event_id: string }[]) ids.push(e.event_id);
    cursor = res.body.next_cursor;
    if (!cursor) break;
  }
  return ids;
}
