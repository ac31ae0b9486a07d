/**
 * One error model for the whole service. Every error Sluice throws on purpose derives from
 * `SluiceBaseError`: a `code` callers switch on (never the message text) and `retriable`, whether
 * the same operation may succeed if tried again (what `retry()` in core/retry.ts goes by, like
 * kafkajs's `KafkaJSError.retriable`). This file imports nothing: the receiver package
 * (receiver-sdk/, built to dist/ with no dependencies) derives its error from it too.
 *
 * `SluiceError` is the API's error: each code maps to an HTTP status and to the `code` member of
 * an RFC 9457 problem+json body. It carries facts, not headers: ingress/problem.ts turns
 * `retryAfterSeconds`, `challenge` and `allow` into Retry-After, WWW-Authenticate and Allow.
 */

export class SluiceBaseError<C extends string = string> extends Error {
  readonly code: C;
  readonly retriable: boolean;
  constructor(code: C, message: string, opts: { retriable?: boolean; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.code = code;
    this.retriable = opts.retriable ?? false;
  }
}

/** Whether trying the same operation again may succeed: the `retriable` flag of Sluice's and kafkajs's errors. */
export function isRetriable(err: unknown): boolean {
  return (err as { retriable?: unknown } | null)?.retriable === true;
}

export const ERRORS = {
  INVALID_REQUEST: { status: 400, title: 'Invalid request' },
  TOKEN_MISSING: { status: 401, title: 'Bearer token missing' },
  TOKEN_INVALID: { status: 401, title: 'Bearer token invalid' },
  TOKEN_EXPIRED: { status: 401, title: 'Bearer token expired' },
  TOKEN_REVOKED: { status: 401, title: 'Bearer token revoked' },
  TOKEN_CERT_REQUIRED: { status: 401, title: 'Bearer token needs its client certificate' },
  TOKEN_CERT_MISMATCH: { status: 401, title: 'Bearer token bound to another client certificate' },
  SCOPE_VIOLATION: { status: 403, title: 'Scope violation' },
  NOT_FOUND: { status: 404, title: 'Not found' },
  METHOD_NOT_ALLOWED: { status: 405, title: 'Method not allowed' },
  CONFLICT: { status: 409, title: 'Conflict' },
  ENDPOINT_LIMIT: { status: 409, title: 'Endpoint limit reached' },
  PAYLOAD_TOO_LARGE: { status: 413, title: 'Payload too large' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, title: 'Unsupported media type' },
  MISDIRECTED_REQUEST: { status: 421, title: 'Wrong region' },
  UNPROCESSABLE_TARGET: { status: 422, title: 'Target URL refused' },
  RATE_LIMITED: { status: 429, title: 'Rate limited', retriable: true },
  INTERNAL: { status: 500, title: 'Internal error' },
  NOT_IMPLEMENTED: { status: 501, title: 'Not implemented' },
  UPSTREAM_UNAVAILABLE: { status: 502, title: 'Upstream unavailable', retriable: true },
  UNAVAILABLE: { status: 503, title: 'Service unavailable', retriable: true },
  UPSTREAM_TIMEOUT: { status: 504, title: 'Upstream timeout', retriable: true },
} as const satisfies Record<string, { status: number; title: string; retriable?: true }>;

export type ErrorCode = keyof typeof ERRORS;

export interface FieldError {
  path: string;
  message: string;
}

/** An RFC 6750 §3 Bearer challenge: why a token was refused (ingress renders it as WWW-Authenticate). */
export interface BearerChallenge {
  realm?: string;
  error?: 'invalid_request' | 'invalid_token' | 'insufficient_scope';
  description?: string;
  scope?: string;
}

/** What a SluiceError knows beyond its code and detail; ingress/problem.ts makes headers of it. */
export interface ErrorFacts {
  /** Seconds after which trying again may succeed (Retry-After). */
  retryAfterSeconds?: number;
  /** The Bearer challenge of a refused token or scope (WWW-Authenticate). */
  challenge?: BearerChallenge;
  /** The methods the path allows (Allow). */
  allow?: readonly string[];
  /** Overrides the code's default (UNAVAILABLE, RATE_LIMITED and the upstream codes are retriable). */
  retriable?: boolean;
  cause?: unknown;
}

export class SluiceError extends SluiceBaseError<ErrorCode> {
  readonly status: number;
  /** Extra members of the problem body (e.g. missing_scope, errors). */
  readonly extra: Record<string, unknown>;
  readonly retryAfterSeconds: number | undefined;
  readonly challenge: BearerChallenge | undefined;
  readonly allow: readonly string[] | undefined;

  constructor(code: ErrorCode, detail: string, extra: Record<string, unknown> = {}, facts: ErrorFacts = {}) {
    const def: { status: number; retriable?: boolean } = ERRORS[code];
    super(code, detail, { retriable: facts.retriable ?? def.retriable ?? false, cause: facts.cause });
    this.status = def.status;
    this.extra = extra;
    this.retryAfterSeconds = facts.retryAfterSeconds;
    this.challenge = facts.challenge;
    this.allow = facts.allow;
  }

  /** The facts this error was made with: to make another error of the same kind (e.g. with more `extra`). */
  get facts(): ErrorFacts {
    return {
      retryAfterSeconds: this.retryAfterSeconds,
      challenge: this.challenge,
      allow: this.allow,
      retriable: this.retriable,
      cause: this.cause,
    };
  }

  toProblem(instance?: string): Record<string, unknown> {
    return {
      type: `https://sluice.dev/problems/${this.code.toLowerCase().replace(/_/g, '-')}`,
      title: ERRORS[this.code].title,
      status: this.status,
      detail: this.message,
      code: this.code,
      ...(instance ? { instance } : {}),
      ...this.extra,
    };
  }
}

/** 503 UNAVAILABLE, to be retried after a second: Kafka or a view is not there yet. */
export function unavailable(detail: string, cause?: unknown): SluiceError {
  return new SluiceError('UNAVAILABLE', detail, {}, { retryAfterSeconds: 1, cause });
}

/** The most faults one 400 lists (the rest are counted), and the longest path or message shown. */
export const MAX_FIELD_ERRORS = 50;
const MAX_PATH_CHARS = 200;
const MAX_MESSAGE_CHARS = 300;

const clip = (s: string, max: number) => (s.length > max ? `${s.slice(0, max)}… (${s.length} characters)` : s);

/**
 * 400 INVALID_REQUEST listing the faults. Bounded: a 1 MiB body of 80,000 unknown members, or
 * one member with a 1 MiB name, is answered in a few KiB, not with every fault spelled out twice.
 */
export function invalidRequest(errors: FieldError[]): SluiceError {
  const shown = errors
    .slice(0, MAX_FIELD_ERRORS)
    .map((e) => ({ path: clip(e.path, MAX_PATH_CHARS), message: clip(e.message, MAX_MESSAGE_CHARS) }));
  if (errors.length > MAX_FIELD_ERRORS)
    shown.push({ path: '$', message: `and ${errors.length - MAX_FIELD_ERRORS} more faults` });
  const detail = shown.map((e) => `${e.path}: ${e.message}`).join('; ');
  return new SluiceError('INVALID_REQUEST', detail, { errors: shown });
}

/** RFC 6749 §5.2 errors of the token endpoint, which do not use problem+json. */
export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'invalid_scope';

export class OAuthError extends SluiceBaseError<OAuthErrorCode> {
  readonly status: number;
  constructor(code: OAuthErrorCode, description: string) {
    super(code, description);
    this.status = code === 'invalid_client' ? 401 : 400;
  }
}

/** A setting Sluice cannot start with, naming the variable. */
export class ConfigError extends SluiceBaseError<'CONFIG_INVALID'> {
  readonly variable: string;
  constructor(variable: string, message: string) {
    super('CONFIG_INVALID', `${variable}: ${message}`);
    this.variable = variable;
  }
}
