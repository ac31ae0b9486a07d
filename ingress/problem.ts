/**
 * The HTTP headers of a refusal, made from the facts its SluiceError carries (core/errors.ts):
 * core says "retry after 1 s", "this token is expired", "GET and POST are allowed"; ingress says
 * it as Retry-After, WWW-Authenticate and Allow.
 */
import type { BearerChallenge, SluiceError } from '../core/errors.ts';

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
