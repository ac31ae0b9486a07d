/**
 * The one canonical form of a request path. Routing, the scope decision and the proxied URL all
 * use it, so no later normalisation (ours, undici's or an upstream's) can turn a path the scope
 * check saw into a different one. Forms an upstream might read differently are refused outright:
 * dot segments (plain or percent-encoded), empty segments, encoded slashes and backslashes, raw
 * backslashes, NUL and anything outside RFC 3986's path characters. Percent-encoded unreserved
 * characters are decoded (`%65xport` is `export`), other escapes are kept with upper-case hex.
 */
import { invalidRequest } from '../core/errors.ts';

const PCHAR = /^[A-Za-z0-9\-._~!$&'()*+,;=:@%]*$/;
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

export function canonicalPath(raw: string): string {
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
    const canonical = seg.replace(/%(..)?/g, (_m, hex: string | undefined) => {
      if (hex === undefined || !/^[0-9A-Fa-f]{2}$/.test(hex)) throw refuse('a "%" is not followed by two hex digits');
      const c = String.fromCharCode(parseInt(hex, 16));
      if (c === '/' || c === '\\') throw refuse('encoded slashes and backslashes are not allowed');
      if (c === '\0') throw refuse('an encoded NUL is not allowed');
      return UNRESERVED.test(c) ? c : `%${hex.toUpperCase()}`;
    });
    if (canonical === '.' || canonical === '..') throw refuse('dot segments ("." and "..") are not allowed');
    // One trailing slash is allowed (`/v1/webhooks/endpoints/`); an empty segment elsewhere is not.
    if (canonical === '' && i !== segments.length - 1) throw refuse('empty segments ("//") are not allowed');
    out.push(canonical);
  }
  return `/${out.join('/')}`;
}
