/**
 * JSON-lines logging to stderr (pino). Never pass secrets or tokens here; as a second line of
 * defence, fields named like secrets are redacted and string values that look like a webhook
 * secret (`whsec_…`), a bearer token or a JWT are masked. With tracing on, every line written
 * inside a span carries its `trace_id` and `span_id`.
 */
import { pino } from 'pino';
import { currentIds } from './tracing.ts';

export type Level = 'debug' | 'info' | 'warn' | 'error';

export interface Logger {
  /** The configured level: a caller building costly fields checks `level === 'debug'` first. */
  readonly level: Level;
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

const SECRET_NAMES = [
  'secret',
  'client_secret',
  'secret_sealed',
  'signing_secret',
  'signing_key',
  'private_key',
  'privateKey',
  'd',
  'password',
  'token',
  'access_token',
  'authorization',
  'Authorization',
  'cookie',
  'master_key',
  'masterKey',
];
/** Field paths pino replaces with "[redacted]": at the top level and one level down. */
export const REDACT_PATHS = [
  ...SECRET_NAMES,
  ...SECRET_NAMES.map((n) => `*.${n}`),
  'headers.authorization',
  'req.headers.authorization',
];

const CENSOR = '[redacted]';
/** `whsec_…`, `Bearer …`, and three-part JWS strings (eyJ….eyJ….sig). */
const SECRET_VALUE =
  /whsec_[A-Za-z0-9+/=_-]+|Bearer\s+[A-Za-z0-9._~+/-]+=*|eyJ[A-Za-z0-9_-]*\.eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*/g;

function scrub(fields: Record<string, unknown>): Record<string, unknown> {
  let out: Record<string, unknown> | null = null;
  for (const k in fields) {
    const v = fields[k];
    if (typeof v === 'string' && SECRET_VALUE.test(v)) {
      SECRET_VALUE.lastIndex = 0;
      out ??= { ...fields };
      out[k] = v.replace(SECRET_VALUE, CENSOR);
    }
    SECRET_VALUE.lastIndex = 0;
  }
  return out ?? fields;
}

export function createLogger(level: Level, component: string, write?: (line: string) => void): Logger {
  const destination = write
    ? { write: (s: string) => write(s.endsWith('\n') ? s.slice(0, -1) : s) }
    : pino.destination({ fd: 2, sync: true });
  const p = pino(
    {
      level,
      base: { component },
      messageKey: 'msg',
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT_PATHS, censor: CENSOR },
      formatters: { level: (label) => ({ level: label }), log: scrub },
      mixin: () => currentIds() ?? {},
    },
    destination,
  );
  const at = (lvl: Level) => (msg: string, fields?: Record<string, unknown>) => {
    if (fields === undefined) p[lvl](scrubText(msg));
    else p[lvl](fields, scrubText(msg));
  };
  return { level, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

function scrubText(msg: string): string {
  const out = msg.replace(SECRET_VALUE, CENSOR);
  SECRET_VALUE.lastIndex = 0;
  return out;
}

/**
 * A log call that writes at most `limit` lines per window and then one line counting what it
 * suppressed, so a request an attacker can repeat cannot flood the log.
 */
export function throttled(
  write: (msg: string, fields?: Record<string, unknown>) => void,
  limit = 10,
  windowMs = 60_000,
  now: () => number = Date.now,
) {
  let windowStart = 0;
  let written = 0;
  let suppressed = 0;
  return (msg: string, fields: Record<string, unknown> = {}) => {
    const t = now();
    if (t - windowStart >= windowMs) {
      if (suppressed > 0) write('log lines suppressed by the throttle', { suppressed, window_ms: windowMs });
      windowStart = t;
      written = 0;
      suppressed = 0;
    }
    if (written < limit) {
      written++;
      write(msg, fields);
    } else suppressed++;
  };
}
