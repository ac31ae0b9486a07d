/**
 * `sluice front-door`: prints a complete HAProxy 2.6 configuration that puts a front door before
 * Sluice: TLS and mTLS, strict request framing (refused with 400 and a close before Sluice sees a
 * byte), and the verified client certificate's SHA-256 thumbprint upstream in X-Client-Cert-Sha256.
 * It writes nothing; docs/operations.md ("Front door") says how to run it.
 *
 *   sluice front-door --listen 443 --upstream 10.0.0.5:8080 --cert /etc/haproxy/sluice.pem \
 *     --client-ca /etc/haproxy/clients-ca.pem > /etc/haproxy/haproxy.cfg
 */
import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parse, required, UsageError } from '../args.ts';
import type { Command } from '../command.ts';
import { SluiceError } from '../../core/errors.ts';

const USAGE = `usage: sluice front-door --listen [HOST:]PORT --upstream HOST:PORT [--upstream HOST:PORT ...]
                         --cert FILE [--key FILE] --client-ca FILE [--self-signed-clients]

Prints a complete HAProxy 2.6 configuration (Debian's haproxy package) for a front door before
Sluice; redirect it into a file and run \`haproxy -f FILE\`. The front door:
  - terminates TLS and requires a client certificate signed by --client-ca (mTLS);
  - refuses bad request framing with 400 and closes the connection: conflicting Content-Length,
    an unknown Transfer-Encoding, HTTP/1.0, a missing or repeated Host, more than 40 header
    lines, headers over 15 KB; a request whose headers take longer than 5 s gets 408;
  - sends the verified client certificate's SHA-256 thumbprint (hex of its DER) upstream in
    X-Client-Cert-Sha256 and its subject DN in X-Client-Cert-Subject, after removing any such
    header the client sent (list the front door's address in Sluice's SLUICE_TRUSTED_PROXIES);
  - forwards to the ingress nodes (--upstream, repeatable: round robin) over plain HTTP, so keep
    that hop on loopback or a private network.

  --listen     the public port, or address:port ([::]:443 for IPv6)
  --cert       PEM: the server certificate (then any intermediates). HAProxy 2.6 reads the key
               from the same file, or from FILE.key beside it: give a file holding both
               (cat server.pem server.key > sluice.pem; chmod 600), or --key FILE.key
  --key        the certificate's PEM key, when it is not in --cert; must be named <--cert>.key
  --client-ca  PEM: the CA certificates a client certificate must chain to
  --self-signed-clients  also admit client certificates that do not chain to --client-ca (for
               self_signed_tls_client_auth clients): a certificate is still required; only a verified
               one's subject DN is passed on, so tls_client_auth still needs the CA`;

function readPem(option: string, path: string): string {
  // The configuration names it unquoted.
  if (/\s/.test(path)) throw new UsageError(`--${option}: a path with white space in it is not supported: ${path}`);
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new UsageError(`--${option}: cannot read ${path}: ${(err as Error).message}`);
  }
}

function leafOf(option: string, path: string, text: string): X509Certificate {
  const pem = text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/)?.[0];
  if (!pem) throw new UsageError(`--${option}: ${path} holds no PEM certificate (BEGIN CERTIFICATE)`);
  try {
    return new X509Certificate(pem);
  } catch (err) {
    throw new UsageError(`--${option}: the certificate in ${path} cannot be read: ${(err as Error).message}`);
  }
}

function keyOf(option: string, path: string, text: string): KeyObject {
  try {
    return createPrivateKey(text);
  } catch (err) {
    throw new UsageError(`--${option}: ${path} holds no unencrypted PEM private key: ${(err as Error).message}`);
  }
}

const HOST_PORT = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/;

function port(option: string, raw: string): string {
  const p = Number(raw);
  if (!Number.isInteger(p) || p < 1 || p > 65535) throw new UsageError(`--${option}: ${raw} is not a port (1-65535)`);
  return raw;
}

function listenAddress(raw: string): string {
  if (/^\d+$/.test(raw)) return `:${port('listen', raw)}`;
  const m = HOST_PORT.exec(raw);
  if (!m) throw new UsageError(`--listen must be PORT or HOST:PORT, got "${raw}"`);
  port('listen', m[1]);
  return raw;
}

function upstreamAddress(raw: string): string {
  const m = HOST_PORT.exec(raw);
  if (!m) throw new UsageError(`--upstream must be HOST:PORT, got "${raw}"`);
  port('upstream', m[1]);
  return raw;
}

/** The certificate file HAProxy gets, checked: it holds the key, or the key lies at <cert>.key. */
function serverCertificate(certPath: string, keyPath: string | undefined): string {
  const cert = resolve(certPath);
  const text = readPem('cert', cert);
  const leaf = leafOf('cert', cert, text);
  const inline = /-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(text) ? keyOf('cert', cert, text) : null;
  if (inline && !leaf.checkPrivateKey(inline))
    throw new UsageError(`--cert: the private key in ${cert} is not its certificate's`);
  if (keyPath !== undefined) {
    const key = resolve(keyPath);
    if (!leaf.checkPrivateKey(keyOf('key', key, readPem('key', key))))
      throw new UsageError(`--key: ${key} is not the key of the certificate in ${cert}`);
    if (!inline && key !== `${cert}.key`)
      throw new UsageError(
        `--key: HAProxy 2.6 reads the key from the --cert file or from ${cert}.key, not from ${key}: ` +
          `put both in one file (umask 077; cat ${cert} ${key} > sluice.pem) and pass --cert sluice.pem`,
      );
  } else if (!inline && !existsSync(`${cert}.key`))
    throw new UsageError(
      `--cert: ${cert} holds no private key and there is no ${cert}.key: ` +
        'give a file holding the certificate and its key (cat server.pem server.key > sluice.pem)',
    );
  return cert;
}

export interface FrontDoorOptions {
  /** `:PORT` or `HOST:PORT`. */
  listen: string;
  upstreams: string[];
  /** Absolute path of the certificate (with its key, or its key at <cert>.key). */
  cert: string;
  /** Absolute path of the client CA certificates. */
  clientCa: string;
  /**
   * Also admit certificates that do not chain to the CA (self-signed ones, for
   * `self_signed_tls_client_auth` clients): a certificate is still required, and only a CA-verified
   * one's subject goes upstream.
   */
  selfSignedClients?: boolean;
}

/** A string HAProxy reads as one word inside double quotes. */
const quoted = (s: string) => `"${s.replace(/["\\]/g, '\\$&')}"`;

/** The front door's answer to a method no route knows, in the form of every other refusal. */
const NOT_IMPLEMENTED_BODY = JSON.stringify(
  new SluiceError('NOT_IMPLEMENTED', 'no route of Sluice takes this method').toProblem(),
);

const notImplemented =
  '    http-request return status 501 content-type application/problem+json ' +
  `string ${quoted(NOT_IMPLEMENTED_BODY)} if !known_method`;

/** Refused with 400 (and a close: txn.refused below). */
const refuse = (why: string, condition: string) =>
  `    http-request deny deny_status 400 content-type text/plain string ${quoted(why)} if ${condition}`;

const SELF_SIGNED = ' ca-ignore-err all crt-ignore-err all';

const mtlsComment = (selfSigned: boolean) =>
  selfSigned
    ? `    # mTLS: a client without a certificate fails its handshake; with --self-signed-clients one that does not
    # chain to the CA is let through (its thumbprint binds tokens and identifies self_signed_tls_client_auth
    # clients; only a verified one has its subject passed on).`
    : '    # mTLS: a client without a certificate signed by the CA (or with an expired one) fails its handshake.';

export function frontDoorConfig(o: FrontDoorOptions): string {
  const upstreams = o.upstreams.join(' --upstream ');
  const verifyErrors = o.selfSignedClients ? SELF_SIGNED : '';
  return `# HAProxy 2.6 before Sluice: TLS and mTLS, strict request framing, the client certificate's thumbprint.
# Printed by \`sluice front-door --listen ${o.listen.replace(/^:/, '')} --upstream ${upstreams} \\
#   --cert ${o.cert} --client-ca ${o.clientCa}\`. Check it with \`haproxy -c -f FILE\`.
# docs/operations.md, "Front door", says what each part is for.

global
    log stdout format raw local0 info
    # Headers must fit one buffer (less tune.maxrewrite, 1 KB): a request with more than 15 KB of them gets 400.
    tune.bufsize 16384
    # uWebSockets.js 20.30 drops, without an answer, a request of more than 48 header lines, and three are added
    # here (X-Client-Cert-Sha256, X-Client-Cert-Subject, X-Forwarded-For): one of more than 40 gets 400 instead.
    tune.http.maxhdr 40
    ssl-default-bind-options ssl-min-ver TLSv1.2 no-tls-tickets
    tune.ssl.default-dh-param 2048

defaults
    mode http
    log global
    option httplog
    # Only errors and refusals are logged.
    option dontlog-normal
    timeout connect 5s
    timeout client 30s
    timeout server 30s
    # A request's headers must all arrive within 5 s (else 408 and a close).
    timeout http-request 5s
    timeout http-keep-alive 10s

frontend sluice-front-door
${mtlsComment(o.selfSignedClients === true)}
    bind ${o.listen} ssl crt ${o.cert} ca-file ${o.clientCa} verify required${verifyErrors} alpn h2,http/1.1
    # HAProxy's HTTP/1 parser itself refuses, with 400 and a close: two Content-Length of different values, one
    # that is not a number, an unknown Transfer-Encoding or one not ending in chunked, chunked twice, too many or too
    # large headers ("gzip, chunked", a coding it does not decode: 422 and a close). It merges a Content-Length
    # repeated with the same value into one, and drops Content-Length beside Transfer-Encoding (RFC 9112 6.3), so
    # what goes on has one reading.
    # uWebSockets.js 20.30 answers no HTTP/1.0 request and no request without Host: refused here, not left hanging.
    acl http10 req.ver 1.0
    acl one_host req.hdr_cnt(host) eq 1
    # A deny alone leaves an HTTP/1.1 connection open: its answer says close, and HAProxy then closes it.
    http-request set-var(txn.refused) bool(true) if http10 || !one_host
    http-after-response set-header Connection close if { var(txn.refused) -m bool }
${refuse('HTTP/1.0 is not served: use HTTP/1.1 or HTTP/2', 'http10')}
${refuse('a request needs one Host header', '!one_host')}
    # uWebSockets.js 20.30 routes nine methods and closes the connection on any other: 501 here (RFC 9110 15.6.2).
    acl known_method method GET HEAD POST PUT DELETE PATCH OPTIONS TRACE CONNECT
${notImplemented}
    # The certificate verified above (ingress/client-cert.ts), never what the client wrote itself: its thumbprint
    # (certificate-bound tokens, RFC 8705) and its subject DN (tls_client_auth).
    http-request del-header X-Client-Cert-Sha256
    http-request del-header X-Client-Cert-Subject
    http-request set-header X-Client-Cert-Sha256 %[ssl_c_der,sha2(256),hex,lower] if { ssl_c_used }
    http-request set-header X-Client-Cert-Subject %[ssl_c_s_dn(,0,rfc2253)] if { ssl_c_used } { ssl_c_verify 0 }
    http-request del-header X-Forwarded-For
    option forwardfor
    default_backend sluice

backend sluice
    balance roundrobin
${o.upstreams.map((u, i) => `    server sluice-${i + 1} ${u}`).join('\n')}
`;
}

export const frontDoor: Command = {
  async run(argv) {
    const { values } = parse(
      argv,
      {
        listen: { type: 'string' },
        upstream: { type: 'string', multiple: true },
        cert: { type: 'string' },
        key: { type: 'string' },
        'client-ca': { type: 'string' },
        'self-signed-clients': { type: 'boolean' },
      },
      USAGE,
    );
    const listen = listenAddress(required(values, 'listen', USAGE));
    if (!values.upstream?.length) throw new UsageError(`--upstream is required\n\n${USAGE}`);
    const upstreams = values.upstream.map(upstreamAddress);
    const cert = serverCertificate(required(values, 'cert', USAGE), values.key);
    const clientCa = resolve(required(values, 'client-ca', USAGE));
    leafOf('client-ca', clientCa, readPem('client-ca', clientCa));
    const selfSignedClients = values['self-signed-clients'] === true;
    process.stdout.write(frontDoorConfig({ listen, upstreams, cert, clientCa, selfSignedClients }));
    return 0;
  },
};
