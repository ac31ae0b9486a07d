/** One HTTP exchange of the verifier, kept whole so the checks can look at every part of it. */

export interface ExchangeRequest {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

export interface Exchange {
  request: ExchangeRequest;
  status: number;
  headers: Headers;
  /** The media type without parameters, lower case; '' when absent. */
  mediaType: string;
  text: string;
  json: unknown;
  /** True when the body parsed as JSON. */
  isJson: boolean;
}

/** How a connection fails when the server closed it, idle, just as a request went out on it. */
const CLOSED_BY_PEER = new Set(['UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'ECONNRESET', 'EPIPE']);

/** The server closed the connection before any answer. */
export function closedByPeer(err: unknown): boolean {
  const code = ((err as { cause?: { code?: unknown } }).cause?.code ?? '') as string;
  return err instanceof TypeError && CLOSED_BY_PEER.has(code);
}

export async function send(baseUrl: string, req: ExchangeRequest, timeoutMs = 30_000): Promise<Exchange> {
  const attempt = () =>
    fetch(`${baseUrl}${req.path}`, {
      method: req.method,
      headers: req.headers,
      body: req.body as BodyInit | undefined,
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
  // A keep-alive connection the server closed for idleness as this request was sent on it fails
  // before any answer; fetch retries only idempotent methods, so the verifier sends again once
  // (on a new connection) rather than report a contract failure the server never made.
  const res = await attempt().catch((err: unknown) => {
    if (closedByPeer(err)) return attempt();
    throw err;
  });
  const text = await res.text();
  let json: unknown;
  let isJson = false;
  if (text !== '') {
    try {
      json = JSON.parse(text);
      isJson = true;
    } catch {
      /* not JSON: the content-type check reports it */
    }
  }
  const mediaType = (res.headers.get('content-type') ?? '').split(';')[0].trim().toLowerCase();
  return { request: req, status: res.status, headers: res.headers, mediaType, text, json, isJson };
}

export function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

export function jsonBody(value: unknown): { headers: Record<string, string>; body: string } {
  return { headers: { 'content-type': 'application/json' }, body: JSON.stringify(value) };
}
