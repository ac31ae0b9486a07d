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
  /** The query parameters the contract declares, typed (integers as numbers), defaults filled in. */
  queryValues: Record<string, unknown>;
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /**
   * The same answer whoever asks (the JWKS): its own Cache-Control stands even when the request
   * carried an Authorization header, which otherwise makes every answer `no-store`.
   */
  shared?: boolean;
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

/**
 * A fault of a request against the contract: a field error (400), or, with `maxBytes`, a value
 * over a byte limit that answers 413 when no field error comes with it.
 */
export interface RequestFault {
  path: string;
  message: string;
  maxBytes?: number;
}

/**
 * One route's request checks, compiled from the contract once at start-up (contracts/requests.ts;
 * cli/assemble.ts hands them to the ingress, which never imports contracts/).
 */
export interface RequestCheck {
  /** The largest body the operation takes, when the contract sets one below the node's limit. */
  maxBodyBytes?: number;
  /** Faults of the named path parameters, under the route's names (`path.id`). */
  path(params: Record<string, string>): RequestFault[];
  /** The declared query parameters, typed and defaulted, and the faults (`query.<name>`). */
  query(query: URLSearchParams): { values: Record<string, unknown>; faults: RequestFault[] };
  /** Faults of a parsed body (`undefined`: none was sent); [] when it is valid. */
  body(body: unknown): RequestFault[];
}

/** The check of a route (`method` upper case, `pattern` as the router writes it), if the contract has one. */
export type RequestChecks = (method: string, pattern: string) => RequestCheck | undefined;

export function json(status: number, value: unknown, headers: Record<string, string> = {}): Reply {
  return jsonText(status, JSON.stringify(value), headers);
}

/** A reply whose JSON body is already text (e.g. stored JSON spliced together). */
export function jsonText(status: number, body: string, headers: Record<string, string> = {}): Reply {
  return { status, headers: { 'content-type': 'application/json', ...headers }, body };
}
