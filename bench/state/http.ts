/**
 * A caller of one tenant: its client credentials, a bearer token refreshed before it gets old, and
 * requests over one keep-alive connection, timed from sending to the last byte of the body
 * (parsing the JSON afterwards is not counted). Requests are sequential: what is measured is the
 * latency of one request, not throughput.
 */
import { performance } from 'node:perf_hooks';
import { Client } from 'undici';
import { percentile } from '../../harness/stats.ts';

export interface Timed {
  status: number;
  json: any;
  ms: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class Caller {
  private readonly client: Client;
  private token = '';
  private tokenAt = 0;

  constructor(
    base: string,
    readonly tenant: string,
    private readonly credentials: { client_id: string; client_secret: string },
  ) {
    this.client = new Client(base, { keepAliveTimeout: 120_000, keepAliveMaxTimeout: 120_000 });
  }

  /** A fresh token (a restarted or just started node may not have read the client yet: retried). */
  async login(timeoutMs = 30_000): Promise<void> {
    for (const deadline = Date.now() + timeoutMs; ; ) {
      const r = await this.send(
        'POST',
        '/v1/auth/token',
        { grant_type: 'client_credentials', ...this.credentials },
        false,
      );
      if (r.status === 200) {
        this.token = r.json.access_token;
        this.tokenAt = Date.now();
        return;
      }
      if (Date.now() > deadline)
        throw new Error(`POST /v1/auth/token for ${this.tenant} answered ${r.status}: ${JSON.stringify(r.json)}`);
      await sleep(250);
    }
  }

  async call(method: string, path: string, body?: unknown): Promise<Timed> {
    if (Date.now() - this.tokenAt > 5 * 60_000) await this.login();
    return this.send(method, path, body, true);
  }

  /** `call` that insists on `status` (default 200). */
  async expect(method: string, path: string, body?: unknown, status = method === 'GET' ? 200 : 202): Promise<Timed> {
    const r = await this.call(method, path, body);
    if (r.status !== status)
      throw new Error(
        `${method} ${path} as ${this.tenant} answered ${r.status}: ${JSON.stringify(r.json).slice(0, 500)}`,
      );
    return r;
  }

  private async send(method: string, path: string, body: unknown, auth: boolean): Promise<Timed> {
    const headers: Record<string, string> = body === undefined ? {} : { 'content-type': 'application/json' };
    if (auth) headers.authorization = `Bearer ${this.token}`;
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const t = performance.now();
    const res = await this.client.request({ method: method as 'GET', path, headers, body: payload });
    const text = await res.body.text();
    const ms = performance.now() - t;
    let json: unknown = text;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      /* not JSON: kept as text */
    }
    return { status: res.statusCode, json, ms };
  }

  async close(): Promise<void> {
    await this.client.close().catch(() => {});
  }
}

export interface Stats {
  n: number;
  p50: number;
  p99: number;
  max: number;
}

export function stats(ms: number[]): Stats {
  const sorted = [...ms].sort((a, b) => a - b);
  return {
    n: sorted.length,
    p50: percentile(sorted, 50) ?? NaN,
    p99: percentile(sorted, 99) ?? NaN,
    max: sorted[sorted.length - 1] ?? NaN,
  };
}

/** Runs `one(i)` `n` times in a row and collects the times it returns. */
export async function repeat(n: number, one: (i: number) => Promise<number>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(await one(i));
  return out;
}
