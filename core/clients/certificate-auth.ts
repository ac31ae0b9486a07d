/**
 * mTLS client authentication (RFC 8705 §2): what a client registered with a certificate holds,
 * and whether a presented certificate (as the trusted front door described it: ingress/client-cert.ts)
 * is that certificate.
 *
 * - `tls_client_auth`: a certificate the front door verified against its client CA, whose subject
 *   DN is the registered one (`tls_client_auth_subject_dn`, RFC 4514 string, most specific first:
 *   `CN=billing,O=Acme,C=FR`).
 * - `self_signed_tls_client_auth`: the certificate whose SHA-256 thumbprint (hex of the DER) is the
 *   registered one (`tls_client_auth_sha256`); no CA is involved.
 *
 *   normalizeSubjectDn('cn=billing, O=Acme') // 'CN=billing,O=Acme'
 */
import { constantTimeEqual } from '../secrets.ts';

export type CertificateAuthMethod = 'tls_client_auth' | 'self_signed_tls_client_auth';
export const CERTIFICATE_AUTH_METHODS: readonly CertificateAuthMethod[] = [
  'tls_client_auth',
  'self_signed_tls_client_auth',
];

/** The certificate-auth fields of a client record (absent on a client that authenticates with a secret). */
export interface CertificateAuth {
  token_endpoint_auth_method?: CertificateAuthMethod;
  /** `tls_client_auth`: the subject DN, normalized (normalizeSubjectDn). */
  tls_client_auth_subject_dn?: string;
  /** `self_signed_tls_client_auth`: lower-case hex SHA-256 of the certificate's DER. */
  tls_client_auth_sha256?: string;
}

/** A client certificate as the trusted front door described it. */
export interface PresentedCertificate {
  /** Lower-case hex SHA-256 of the DER. */
  sha256: string;
  /** Normalized subject DN, when the front door sent one (only for a certificate it verified). */
  subjectDn: string | null;
}

const HEX64 = /^[0-9a-fA-F]{64}$/;

/** A SHA-256 thumbprint as 64 hex digits (either case; colons between byte pairs allowed), lower-cased; else null. */
export function parseThumbprint(text: string): string | null {
  const t = text.trim().replace(/:/g, '');
  return HEX64.test(t) ? t.toLowerCase() : null;
}

/** The `x5t#S256` confirmation (RFC 8705 §3.1) of a hex thumbprint: base64url of its 32 bytes. */
export function x5tS256(hexSha256: string): string {
  return Buffer.from(hexSha256, 'hex').toString('base64url');
}

/** The hex thumbprint of an `x5t#S256` value, or null when it is not base64url of 32 bytes. */
export function thumbprintOfX5t(value: unknown): string | null {
  if (typeof value !== 'string' || !/^[A-Za-z0-9_-]{43}$/.test(value)) return null;
  const bytes = Buffer.from(value, 'base64url');
  return bytes.length === 32 ? bytes.toString('hex') : null;
}

/** Characters RFC 4514 §2.4 escapes anywhere in a value. */
const SPECIAL = new Set([',', '+', '"', '\\', '<', '>', ';', '=']);

/** Splits on `sep` where it is not escaped with a backslash. */
function splitUnescaped(s: string, sep: string): string[] {
  const out: string[] = [];
  let cur = '';
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '\\' && i + 1 < s.length) {
      cur += c + s[i + 1];
      i++;
    } else if (c === sep) {
      out.push(cur);
      cur = '';
    } else cur += c;
  }
  out.push(cur);
  return out;
}

/** The bytes an RFC 4514 value stands for (`\,` and `\2C` alike), or null when an escape is broken. */
function unescapeValue(v: string): Buffer | null {
  const parts: Buffer[] = [];
  for (let i = 0; i < v.length; i++) {
    const c = v[i];
    if (c !== '\\') {
      parts.push(Buffer.from(c, 'utf8'));
      continue;
    }
    const pair = v.slice(i + 1, i + 3);
    if (/^[0-9a-fA-F]{2}$/.test(pair)) {
      parts.push(Buffer.from(pair, 'hex'));
      i += 2;
    } else if (i + 1 < v.length && (SPECIAL.has(v[i + 1]) || v[i + 1] === ' ' || v[i + 1] === '#')) {
      parts.push(Buffer.from(v[i + 1]));
      i++;
    } else return null;
  }
  return Buffer.concat(parts);
}

/** One canonical spelling of a value: specials escaped with a backslash, other non-printable bytes as \XX. */
function escapeValue(bytes: Buffer): string {
  let out = '';
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    const c = String.fromCharCode(b);
    const edgeSpace = c === ' ' && (i === 0 || i === bytes.length - 1);
    if (SPECIAL.has(c) || edgeSpace || (c === '#' && i === 0)) out += `\\${c}`;
    else if (b < 0x20 || b >= 0x7f) out += `\\${b.toString(16).toUpperCase().padStart(2, '0')}`;
    else out += c;
  }
  return out;
}

/** Trims the unescaped spaces around a value (an escaped space at an edge stays). */
function trimValue(v: string): string {
  let start = 0;
  while (start < v.length && v[start] === ' ') start++;
  let end = v.length;
  while (end > start && v[end - 1] === ' ') {
    let backslashes = 0;
    for (let j = end - 2; j >= start && v[j] === '\\'; j--) backslashes++;
    if (backslashes % 2 === 1) break;
    end--;
  }
  return v.slice(start, end);
}

/**
 * One spelling of a subject DN in RFC 4514 form, so two spellings of the same name compare equal:
 * attribute types upper-cased, spaces around separators dropped, values re-escaped one way (`\,`
 * and `\2C` alike), the values of a multi-valued RDN sorted. Values keep their case. Null when
 * it is not a DN (an OpenSSL one-line `/C=FR/CN=x` is not: RFC 4514 lists the CN first).
 */
export function normalizeSubjectDn(dn: string): string | null {
  // Not trimmed here: a trailing space may be escaped (`CN=x\ `); each type and value is trimmed below.
  const text = dn;
  if (text.trim() === '' || text.length > 4096) return null;
  const rdns: string[] = [];
  for (const rdn of splitUnescaped(text, ',')) {
    const avas: string[] = [];
    for (const ava of splitUnescaped(rdn, '+')) {
      const eq = splitUnescaped(ava, '=');
      if (eq.length < 2) return null;
      const type = eq[0].trim();
      if (!/^([A-Za-z][A-Za-z0-9-]*|\d+(\.\d+)*)$/.test(type)) return null;
      const raw = trimValue(ava.slice(ava.indexOf('=') + 1).replace(/^\s+/, ''));
      const value = unescapeValue(raw);
      if (value === null || value.length === 0) return null;
      avas.push(`${type.toUpperCase()}=${escapeValue(value)}`);
    }
    rdns.push(avas.sort().join('+'));
  }
  return rdns.join(',');
}

/** Whether the record's registered certificate is the presented one (constant time on the thumbprint). */
export function certificateMatches(auth: CertificateAuth, cert: PresentedCertificate | null): boolean {
  if (cert === null) return false;
  switch (auth.token_endpoint_auth_method) {
    case 'self_signed_tls_client_auth':
      return auth.tls_client_auth_sha256 !== undefined && constantTimeEqual(auth.tls_client_auth_sha256, cert.sha256);
    case 'tls_client_auth':
      return (
        auth.tls_client_auth_subject_dn !== undefined &&
        cert.subjectDn !== null &&
        constantTimeEqual(auth.tls_client_auth_subject_dn, cert.subjectDn)
      );
    default:
      return false;
  }
}
