/**
 * The one canonical form of a request path. Routing, the scope decision and the proxied URL all
 * use it, so no later normalisation (ours, undici's or an upstream's) can turn a path the scope
 * check saw into a different one. Forms an upstream might read differently are refused outright:
 * - dot segments (plain or percent-encoded), empty segments, encoded slashes and backslashes, raw
 *   backslashes, NUL and anything outside RFC 3986's path characters;
 * - `;` path parameters, raw or encoded (Tomcat and Spring strip them: `/export;x` is `/export`);
 * - an encoded percent, `%25` (an upstream that decodes twice reads `%2565xport` as `export`);
 * - encoded control characters, and a segment ending in `.` or a space (Windows and some servers
 *   drop them: `/export.` and `/export%20` are `/export`).
 * Percent-encoded unreserved characters are decoded (`%65xport` is `export`), other escapes are
 * kept with upper-case hex. Case is kept: what an upstream matches without regard to case, the
 * scope decision compares without regard to case too (see `segmentKey`).
 */
import { invalidRequest } from '../core/errors.ts';

const PCHAR = /^[A-Za-z0-9\-._~!$&'()*+,;=:@%]*$/;
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

/**
 * Segments of letters, digits, `-`, `_` and `~` between single slashes (one trailing slash allowed):
 * nothing to decode or refuse, so such a path is its own canonical form. Nearly every request's path
 * is one; the checks below run for the rest.
 */
export const PLAIN_PATH = /^\/(?:[A-Za-z0-9_~-]+\/)*[A-Za-z0-9_~-]*$/;

export function canonicalPath(raw: string): string {
  return PLAIN_PATH.test(raw) ? raw : canonicalPathChecked(raw);
}

/** canonicalPath without its fast path (exported for the test that compares the two). */
export function canonicalPathChecked(raw: string): string {
  const refuse = (why: string) =>
    invalidRequest([{ path: 'path', message: `the request path is not canonical: ${why}` }]);
  if (!raw.startsWith('/')) throw refuse('it must start with "/"');
  const segments = raw.slice(1).split('/');
  const out: string[] = [];
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i];
    if (!PCHAR.test(seg))
      throw refuse(
        seg.includes('\\') ? 'backslashes are not allowed' : 'it holds characters that must be percent-encoded',
      );
    if (seg.includes(';')) throw refuse('";" path parameters are not allowed');
    const canonical = seg.replace(/%(..)?/g, (_m, hex: string | undefined) => {
      if (hex === undefined || !/^[0-9A-Fa-f]{2}$/.test(hex)) throw refuse('a "%" is not followed by two hex digits');
      const code = parseInt(hex, 16);
      const c = String.fromCharCode(code);
      if (c === '/' || c === '\\') throw refuse('encoded slashes and backslashes are not allowed');
      if (c === '%') throw refuse('an encoded "%" (%25) is not allowed');
      if (c === ';') throw refuse('";" path parameters are not allowed, encoded or not');
      if (code < 0x20 || code === 0x7f) throw refuse('encoded control characters are not allowed');
      return UNRESERVED.test(c) ? c : `%${hex.toUpperCase()}`;
    });
    if (canonical === '.' || canonical === '..') throw refuse('dot segments ("." and "..") are not allowed');
    if (canonical.endsWith('.') || canonical.endsWith('%20')) throw refuse('a segment must not end in "." or a space');
    // One trailing slash is allowed (`/v1/webhooks/endpoints/`); an empty segment elsewhere is not.
    if (canonical === '' && i !== segments.length - 1) throw refuse('empty segments ("//") are not allowed');
    out.push(canonical);
  }
  return `/${out.join('/')}`;
}

/**
 * What any upstream could take a canonical segment to name, for decisions made on it: lower-cased
 * (Express and path-to-regexp match without regard to case) and cut at the first character that is
 * not a letter, digit, `-` or `_` (Spring's suffix match reads `/export.csv` as `/export`, and a
 * server that decodes twice may end the path at an encoded `?` or `#`).
 */
export function segmentKey(segment: string): string {
  const m = /^[A-Za-z0-9_-]*/.exec(segment)!;
  return m[0].toLowerCase();
}
