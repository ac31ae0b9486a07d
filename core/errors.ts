/**
 * One error type for the whole service. Every `code` maps straight to an HTTP status and to the
 * `code` member of an RFC 9457 problem+json body; callers switch on `code`, never on message text.
 */

export const ERRORS = {
  INVALID_REQUEST: { status: 400, title: 'Invalid request' },
  TOKEN_MISSING: { status: 401, title: 'Bearer token missing' },
  TOKEN_INVALID: { status: 401, title: 'Bearer token invalid' },
  TOKEN_EXPIRED: { status: 401, title: 'Bearer token expired' },
  TOKEN_REVOKED: { status: 401, title: 'Bearer token revoked' },
  SCOPE_VIOLATION: { status: 403, title: 'Scope violation' },
  NOT_FOUND: { status: 404, title: 'Not found' },
  METHOD_NOT_ALLOWED: { status: 405, title: 'Method not allowed' },
  CONFLICT: { status: 409, title: 'Conflict' },
  PAYLOAD_TOO_LARGE: { status: 413, title: 'Payload too large' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, title: 'Unsupported media type' },
  MISDIRECTED_REQUEST: { status: 421, title: 'Wrong region' },
  UNPROCESSABLE_TARGET: { status: 422, title: 'Target URL refused' },
  RATE_LIMITED: { status: 429, title: 'Rate limited' },
  INTERNAL: { status: 500, title: 'Internal error' },
  UPSTREAM_UNAVAILABLE: { status: 502, title: 'Upstream unavailable' },
  UNAVAILABLE: { status: 503, title: 'Service unavailable' },
  UPSTREAM_TIMEOUT: { status: 504, title: 'Upstream timeout' },
} as const;

export type ErrorCode = keyof typeof ERRORS;

export interface FieldError {
  path: string;
  message: string;
}

export class SluiceError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Extra members of the problem body (e.g. missing_scope, errors). */
  readonly extra: Record<string, unknown>;
  /** Extra response headers (e.g. WWW-Authenticate, Allow, Retry-After). */
  readonly headers: Record<string, string>;

  constructor(
    code: ErrorCode,
    detail: string,
    extra: Record<string, unknown> = {},
    headers: Record<string, string> = {},
  ) {
    super(detail);
    this.name = 'SluiceError';
    this.code = code;
    this.status = ERRORS[code].status;
    this.extra = extra;
    this.headers = headers;
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
  const shown = errors.slice(0, MAX_FIELD_ERRORS).map((e) => ({ path: clip(e.path, MAX_PATH_CHARS), message: clip(e.message, MAX_MESSAGE_CHARS) }));
  if (errors.length > MAX_FIELD_ERRORS) shown.push({ path: '$', message: `and ${errors.length - MAX_FIELD_ERRORS} more faults` });
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

export class OAuthError extends Error {
  readonly error: OAuthErrorCode;
  readonly status: number;
  constructor(error: OAuthErrorCode, description: string) {
    super(description);
    this.name = 'OAuthError';
    this.error = error;
    this.status = error === 'invalid_client' ? 401 : 400;
  }
}

export class ConfigError extends Error {
  readonly variable: string;
  constructor(variable: string, message: string) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
    this.variable = variable;
  }
}
