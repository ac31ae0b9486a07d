/** The shapes every route handler sees: a parsed request in, a reply out. */
import type { VerifiedToken } from '../core/tokens/token-service.ts';

export interface IncomingRequest {
  method: string; // upper case
  path: string;
  query: URLSearchParams;
  /** Lower-case header names. */
  headers: Record<string, string>;
  remoteAddress: string;
  /** Set by the pipeline once known, for metrics and traces: "METHOD /pattern" and the token's tenant. */
  route?: string;
  tenant?: string;
}

export interface AppRequest extends IncomingRequest {
  params: Record<string, string>;
  auth: VerifiedToken | null;
  rawBody: Buffer;
  /** Parsed JSON body for routes that take one. */
  body: unknown;
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

export type BodyKind = 'none' | 'json' | 'json-or-form' | 'raw';

export interface Route {
  method: string;
  /** `/v1/webhooks/endpoints/:id` style. */
  pattern: string;
  /** The scope this route needs; null: no bearer token (token, JWKS, metadata). A function decides per request. */
  scope: string | null | ((req: IncomingRequest) => string);
  body: BodyKind;
  handler: (req: AppRequest) => Reply | Promise<Reply>;
  /** Errors of this route use the RFC 6749 shape instead of problem+json. */
  oauthErrors?: boolean;
}

export function json(status: number, value: unknown, headers: Record<string, string> = {}): Reply {
  return { status, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(value) };
}
