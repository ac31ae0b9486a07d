/**
 * The edge's refusals and their HTTP headers. The refusals ingress itself makes (over a rate, over
 * a size, against the contract) are built here, each a SluiceError of core/errors.ts's table; the
 * headers are made from the facts a SluiceError carries: core says "retry after 1 s", "this token
 * is expired", "GET and POST are allowed"; ingress says it as Retry-After, WWW-Authenticate and Allow.
 */
import { SluiceError, invalidRequest, type BearerChallenge } from '../core/errors.ts';
import type { RequestFault } from './types.ts';

/** 429 RATE_LIMITED with Retry-After: `detail` says whose budget ran out. */
export function rateLimited(retryAfterSeconds: number, detail: string): SluiceError {
  const extra = { retry_after: retryAfterSeconds };
  const message = `${detail}; retry after ${retryAfterSeconds} s`;
  return new SluiceError('RATE_LIMITED', message, extra, { retryAfterSeconds });
}

/**
 * The answer to a request's faults against the contract: 400 INVALID_REQUEST listing the field
 * faults; when the only faults are values over a byte limit, 413 naming the first.
 */
export function faultError(faults: RequestFault[]): SluiceError | null {
  if (faults.length === 0) return null;
  const fields = faults.filter((f) => f.maxBytes === undefined);
  if (fields.length > 0) return invalidRequest(fields.map(({ path, message }) => ({ path, message })));
  const { path, message, maxBytes } = faults[0];
  return new SluiceError('PAYLOAD_TOO_LARGE', `${path} ${message}`, { max_bytes: maxBytes });
}

/** 413 PAYLOAD_TOO_LARGE: a body over the route's limit, by its Content-Length or as it was read. */
export function tooLarge(max: number): SluiceError {
  return new SluiceError('PAYLOAD_TOO_LARGE', `the request body exceeds ${max} bytes`, { max_bytes: max });
}

/** Retry-After, WWW-Authenticate and Allow, from what the error carries. */
export function errorHeaders(e: SluiceError): Record<string, string> {
  const headers: Record<string, string> = {};
  if (e.retryAfterSeconds !== undefined) headers['Retry-After'] = String(e.retryAfterSeconds);
  if (e.challenge) headers['WWW-Authenticate'] = bearerChallenge(e.challenge);
  if (e.allow) headers.Allow = e.allow.join(', ');
  return headers;
}

/** `Bearer realm="…", error="…", error_description="…", scope="…"`, with the members given. */
export function bearerChallenge(c: BearerChallenge): string {
  const params: [string, string | undefined][] = [
    ['realm', c.realm],
    ['error', c.error],
    ['error_description', c.description],
    ['scope', c.scope],
  ];
  return `Bearer ${params
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}="${v}"`)
    .join(', ')}`;
}
