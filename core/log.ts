/** JSON-lines logging to stderr. Never pass secrets or tokens here. */
export type Level = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export function createLogger(level: Level, component: string, write: (line: string) => void = (l) => process.stderr.write(l + '\n')): Logger {
  const at = (lvl: Level) => (msg: string, fields: Record<string, unknown> = {}) => {
    if (ORDER[lvl] < ORDER[level]) return;
    write(JSON.stringify({ t: new Date().toISOString(), level: lvl, component, msg, ...fields }));
  };
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

/**
 * A log call that writes at most `limit` lines per window and then one line counting what it
 * suppressed, so a request an attacker can repeat cannot flood the log.
 */
export function throttled(write: (msg: string, fields?: Record<string, unknown>) => void, limit = 10, windowMs = 60_000, now: () => number = Date.now) {
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
