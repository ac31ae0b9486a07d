/**
 * The client certificate of a request, as the trusted front door describes it. uWS does not hand
 * the peer certificate to JavaScript, so a proxy that terminates mTLS (HAProxy: `sluice front-door`)
 * says which certificate the client presented, in two request headers. Sluice believes them only
 * from a peer in SLUICE_TRUSTED_PROXIES; from anyone else they are ignored (never an error), as is
 * a value of the wrong form.
 *
 * What the front door must send (and remove first, whatever the client sent under these names):
 *
 *   X-Client-Cert-Sha256: hex SHA-256 of the client certificate's DER, 64 digits (either case);
 *       sent whenever the client presented a certificate whose key it holds (the TLS handshake
 *       proves that): token binding (RFC 8705 §3) and self_signed_tls_client_auth need no CA.
 *       HAProxy: http-request set-header X-Client-Cert-Sha256 %[ssl_c_der,sha2(256),hex] if { ssl_c_used }
 *   X-Client-Cert-Subject: the certificate's subject DN in RFC 4514/2253 form, most specific
 *       first (`CN=billing,O=Acme,C=FR`), non-ASCII bytes as \XX; sent only when the chain was
 *       verified against the client CA (tls_client_auth trusts the CA for the name).
 *       HAProxy: http-request set-header X-Client-Cert-Subject %[ssl_c_s_dn(,0,rfc2253)]
 *                if { ssl_c_used } { ssl_c_verify 0 }
 *   both preceded by: http-request del-header X-Client-Cert-Sha256 / X-Client-Cert-Subject
 *
 * The subject counts only beside a thumbprint (the same certificate). A repeated thumbprint reaches
 * Sluice joined with ", " and is ignored as malformed; that the subject is the front door's own
 * rests on its del-header.
 *
 *   const cert = presentedCertificate(req, trusted); // null: none Sluice believes
 */
import type { PresentedCertificate } from '../core/clients/certificate-auth.ts';
import { normalizeSubjectDn } from '../core/clients/certificate-auth.ts';
import type { CidrSet } from '../core/net/cidr.ts';
import type { IncomingRequest } from './types.ts';

export const CERT_SHA256_HEADER = 'x-client-cert-sha256';
export const CERT_SUBJECT_HEADER = 'x-client-cert-subject';

const HEX64 = /^[0-9a-fA-F]{64}$/;

/**
 * The lower-case hex thumbprint of the request's client certificate, when a trusted proxy sent
 * exactly 64 hex digits; else null. Costs nothing without the header or without trusted proxies.
 */
export function clientCertThumbprint(req: IncomingRequest, trusted: CidrSet): string | null {
  const v = req.headers[CERT_SHA256_HEADER];
  if (v === undefined || trusted.size === 0 || !HEX64.test(v)) return null;
  return trusted.has(req.remoteAddress) ? v.toLowerCase() : null;
}

/** The request's client certificate (thumbprint, and subject DN when sent), from a trusted proxy; else null. */
export function presentedCertificate(req: IncomingRequest, trusted: CidrSet): PresentedCertificate | null {
  const sha256 = clientCertThumbprint(req, trusted);
  if (sha256 === null) return null;
  const subject = req.headers[CERT_SUBJECT_HEADER];
  return { sha256, subjectDn: subject === undefined ? null : normalizeSubjectDn(subject) };
}
