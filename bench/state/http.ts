/**
 * A caller of one tenant: a bearer token renewed every 5 minutes, and sequential requests over one
 * keep-alive connection, timed from sending to the last byte of the body (not the token, not the JSON parsing).
 */
import { performance } from 'node:perf_hooks';
import { Client } from 'undici';
import { bearerToken, type BenchClient } from '../../harness/sluice-api.ts';

export class Caller {
  private readonly client: Client;
  private token = '';
  private tokenAt = 0;

  constructor(
    private readonly base: string,
    readonly tenant: string,
    private readonly credentials: BenchClient,
  ) {
    this.client = new Client(base, { keepAliveTimeout: 120_000, keepAliveMaxTimeout: 120_000 });
  }

  /** A request that must answer `status` (GET: 200, others: 202). */
  async expect(method: string, path: string, body?: unknown, status = method === 'GET' ? 200 : 202) {
    if (Date.now() - this.tokenAt > 5 * 60_000) {
      this.token = await bearerToken(this.base, this.credentials); // retried while the node has not read the client
      this.tokenAt = Date.now();
    }
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const t = performance.now();
    const res = await this.client.request({ method: method as 'GET', path, headers, body: payload });
    const text = await res.body.text();
    const ms = performance.now() - t;
    if (res.statusCode !== status)
      throw new Error(`${method} ${path} as ${this.tenant} answered ${res.statusCode}: ${text.slice(0, 500)}`);
    return { json: (text ? JSON.parse(text) : null) as any, ms };
  }

  async close(): Promise<void> {
    await this.client.close().catch(() => {});
  }
}

/** Runs `one(i)` `n` times in a row and collects the times it returns. */
export async function repeat(n: number, one: (i: number) => Promise<number>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(await one(i));
  return out;
}
