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

export async function send(baseUrl: string, req: ExchangeRequest, timeoutMs = 30_000): Promise<Exchange> {
  const res = await fetch(`${baseUrl}${req.path}`, {
    method: req.method,
    headers: req.headers,
    body: req.body as BodyInit | undefined,
    redirect: 'manual',
    signal: AbortSignal.timeout(timeoutMs),
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
