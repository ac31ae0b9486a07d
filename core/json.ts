/** JSON parsing that reports where a fault is, as a JSON path (`$.events[2]`) and a position. */
import { invalidRequest } from './errors.ts';

/** The deepest nesting of arrays and objects a JSON body may have (documented in docs/configuration.md). */
export const MAX_JSON_DEPTH = 64;

export interface JsonFault {
  path: string;
  position: number;
  message: string;
}

/**
 * A strict recursive-descent scan of JSON text that stops at the first fault. V8's JSON.parse
 * messages no longer carry a position, so this finds it (and the path) when JSON.parse fails.
 */
export function findJsonFault(text: string, maxDepth = MAX_JSON_DEPTH): JsonFault | null {
  let i = 0;
  let depth = 0;
  const path: (string | number)[] = [];
  const segment = (p: string | number) =>
    typeof p === 'number' ? `[${p}]` : /^[A-Za-z_][A-Za-z0-9_]*$/.test(p) ? `.${p}` : `[${JSON.stringify(p)}]`;
  const render = () => `$${path.map(segment).join('')}`;
  class Fault extends Error {}
  const fail = (message: string): never => {
    throw Object.assign(new Fault(message), { position: i });
  };
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i])) i++;
  };
  const str = (): string => {
    if (text[i] !== '"') fail('expected a string');
    const start = i++;
    while (i < text.length && text[i] !== '"') {
      if (text[i] === '\\') {
        const e = text[i + 1];
        if (e === 'u') {
          if (!/^[0-9A-Fa-f]{4}$/.test(text.slice(i + 2, i + 6))) fail('\\u must be followed by four hex digits');
          i += 4;
        } else if (e === undefined || !'"\\/bfnrt'.includes(e)) fail(`invalid escape '\\${e ?? ''}' in string`);
        i++;
      } else if (text.charCodeAt(i) < 0x20) fail('control character in string');
      i++;
    }
    if (i >= text.length) fail('unterminated string');
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  /** The members of an object or the items of an array, after its opening bracket. */
  const members = (close: '}' | ']', member: (n: number) => void): void => {
    if (++depth > maxDepth) fail(`nested deeper than ${maxDepth} levels`);
    i++;
    ws();
    if (text[i] === close) {
      i++;
      depth--;
      return;
    }
    for (let n = 0; ; n++) {
      member(n);
      ws();
      if (text[i] === ',') {
        i++;
        continue;
      }
      if (text[i] === close) {
        i++;
        depth--;
        return;
      }
      fail(text[i] === undefined ? 'unexpected end of input' : `expected ',' or '${close}' but found '${text[i]}'`);
    }
  };
  const value = (): void => {
    ws();
    const c = text[i];
    if (c === undefined) fail('unexpected end of input');
    if (c === '{') {
      members('}', () => {
        ws();
        const key = str();
        ws();
        if (text[i] !== ':') fail(`expected ':' after key "${key}"`);
        i++;
        path.push(key);
        value();
        path.pop();
      });
      return;
    }
    if (c === '[') {
      members(']', (n) => {
        path.push(n);
        value();
        path.pop();
      });
      return;
    }
    if (c === '"') {
      str();
      return;
    }
    const m = /^(?:-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)/.exec(text.slice(i, i + 400));
    if (!m) fail(`unexpected character '${c}'`);
    i += m![0].length;
  };
  try {
    value();
    ws();
    if (i < text.length) fail(`unexpected '${text[i]}' after the JSON value`);
    return null;
  } catch (err) {
    // Anything else (a RangeError, say) is still a fault of the text, never a 500.
    const message = err instanceof Fault ? err.message : `malformed JSON (${(err as Error).message})`;
    return { path: render(), position: i, message };
  }
}

/** The position where nesting first goes deeper than `max`, or -1. Linear, no recursion. */
export function depthExceededAt(text: string, max = MAX_JSON_DEPTH): number {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return i;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return -1;
}

/** Parses a JSON body or throws 400 INVALID_REQUEST naming the path and position of the fault. */
export function parseJsonBody(text: string): unknown {
  if (text.trim() === '')
    throw invalidRequest([{ path: '$', message: 'the request body is empty; a JSON document is required' }]);
  try {
    // Bounded before parsing: a deep document parses, then overflows the stack of whatever
    // walks it next (JSON.stringify when it is stored or delivered).
    if (depthExceededAt(text) >= 0) throw new RangeError('too deep');
    return JSON.parse(text);
  } catch (err) {
    const fault = findJsonFault(text) ?? { path: '$', position: 0, message: (err as Error).message };
    throw invalidRequest([
      { path: fault.path, message: `malformed JSON at position ${fault.position}: ${fault.message}` },
    ]);
  }
}
