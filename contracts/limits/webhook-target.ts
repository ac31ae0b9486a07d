/** A local webhook target for the delivery guards: answers the ping with 200 and the rest as told. */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Json } from '../contract.ts';
import { issueToken } from './types.ts';
import type { LimitContext } from './types.ts';

export interface Target {
  url: string;
  close(): Promise<void>;
}

export async function startTarget(
  onEvent: (req: IncomingMessage, res: ServerResponse, raw: Buffer) => void,
  onPing: (res: ServerResponse) => void = (res) => res.writeHead(200).end(),
): Promise<Target> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () =>
      req.headers['x-service-event-type'] === 'ping' ? onPing(res) : onEvent(req, res, Buffer.concat(chunks)),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** How long one API call may take before the guard fails (a guard never hangs on a silent Sluice). */
export const API_TIMEOUT_MS = 30_000;

/**
 * One token per guard client, reused for 5 minutes (tokens live 15). A Sluice that rotates secrets in
 * scaled time (the limits test: every 20 s) retires the secret the guards were given after two
 * rotations, while the retry guards still run; a token already issued stays valid until it expires.
 */
const tokens = new Map<string, { token: string; until: number }>();
const TOKEN_REUSE_MS = 5 * 60_000;

async function guardToken(ctx: LimitContext): Promise<string> {
  const key = `${ctx.baseUrl}\0${ctx.clientId}\0${ctx.clientSecret}`;
  const held = tokens.get(key);
  if (held && held.until > Date.now()) return held.token;
  const issued = await issueToken(ctx.baseUrl, ctx.clientId, ctx.clientSecret);
  if (issued.status !== 200) return '';
  tokens.set(key, { token: issued.body.access_token, until: Date.now() + TOKEN_REUSE_MS });
  return issued.body.access_token;
}

export async function api(
  ctx: LimitContext,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Json; ms: number }> {
  const token = await guardToken(ctx);
  const started = performance.now();
  const res = await fetch(`${ctx.baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
    signal: AbortSignal.timeout(API_TIMEOUT_MS),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, ms: performance.now() - started };
}

/**
 * Registers an endpoint at `url` (with `extra` fields of EndpointCreate, e.g. a delivery policy).
 * Anything but a 201 is a failure of the guard that needs it (never a skip): the reason says what
 * to fix (e.g. start Sluice with SLUICE_DEV_ALLOW_INSECURE_TARGETS=true).
 */
export async function register(
  ctx: LimitContext,
  url: string,
  events = ['inference.completed'],
  extra: Json = {},
): Promise<{ id: string; state: string; secret: string; ms: number; body: Json } | { fail: string }> {
  const r = await api(ctx, 'POST', '/v1/webhooks/endpoints', { url, events, ...extra });
  if (r.status === 404) return { fail: 'POST /v1/webhooks/endpoints answered 404 (not implemented?)' };
  // A refusal of another field than the url is not about local targets: say what was refused.
  const paths: string[] = Array.isArray(r.body?.errors) ? r.body.errors.map((e: Json) => e.path) : [];
  if (r.status === 400 && paths.some((p) => p !== '$.url'))
    return { fail: `registration refused: 400 ${r.body?.detail ?? ''}` };
  if (r.status === 422 || r.status === 400)
    return {
      fail:
        `a local target was refused (${r.status} ${r.body?.code ?? ''}); ` +
        'start Sluice with SLUICE_DEV_ALLOW_INSECURE_TARGETS=true',
    };
  if (r.status !== 201) return { fail: `registration answered ${r.status}` };
  return { id: r.body.id, state: r.body.state, secret: r.body.secret, ms: r.ms, body: r.body };
}
