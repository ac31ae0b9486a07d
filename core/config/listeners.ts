/**
 * Listener settings: the public listener's address and port, its TLS (and mTLS), the front doors whose
 * client-certificate headers are believed, and the admin port.
 */
import { isIP } from 'node:net';
import { ConfigError } from '../errors.ts';
import { listenerTls, trustedProxies } from './readers.ts';
import { intSetting, type Setting } from './schema.ts';

export const LISTENER_SETTINGS = {
  host: {
    section: 'listeners',
    vars: [
      {
        env: 'SLUICE_HOST',
        default: '`0.0.0.0`; `127.0.0.1` without `SLUICE_MASTER_KEY`',
        doc:
          'listen address of the public listener (not of the admin port). With the public development ' +
          'key (no `SLUICE_MASTER_KEY`) an address other than loopback is refused unless ' +
          '`SLUICE_DEV_ALLOW_DEVELOPMENT_KEY=true`',
      },
    ],
    read: (env) => env.SLUICE_HOST || (env.SLUICE_MASTER_KEY ? '0.0.0.0' : '127.0.0.1'),
  },
  port: intSetting('listeners', 'SLUICE_PORT', 8080, 0, 65535, 'public listener'),
  /** HTTPS (and mTLS) on the public port; null: plain HTTP. */
  tls: {
    section: 'listeners',
    vars: [
      {
        env: 'SLUICE_TLS_CERT',
        default: 'unset',
        doc:
          'PEM file: the server certificate, then any intermediates. With `SLUICE_TLS_KEY`, the public ' +
          "listener speaks HTTPS only (uWebSockets.js's TLS app). Both or neither; unset: plain HTTP. " +
          'Checked at start: readable, a certificate, the key its own. Read once: a renewed certificate ' +
          'takes a restart. `docs/operations.md`, "Front door"',
      },
      { env: 'SLUICE_TLS_KEY', default: 'unset', doc: "PEM file: the certificate's unencrypted private key" },
      {
        env: 'SLUICE_TLS_CLIENT_CA',
        default: 'unset',
        doc:
          'PEM file: CA certificates. Set (with the two above), every connection must present a valid, ' +
          'unexpired client certificate signed by one of them: without one, or with another, the handshake ' +
          'fails and no route is reached (mTLS; the port is then served through node:tls, ' +
          '`docs/decisions.md`, "mTLS without a proxy"). Needs `SLUICE_TLS_CERT` and `SLUICE_TLS_KEY`',
      },
    ],
    read: listenerTls,
  },
  /**
   * SLUICE_TRUSTED_PROXIES: the peers (addresses or CIDR blocks, canonical text) whose client-certificate
   * headers the ingress believes (ingress/client-cert.ts); empty: nobody's.
   */
  trustedProxies: {
    section: 'listeners',
    vars: [
      {
        env: 'SLUICE_TRUSTED_PROXIES',
        default: 'unset (nobody)',
        doc:
          'comma-separated IP addresses or CIDR blocks, IPv4 or IPv6 (`10.0.0.0/8,::1`): the front doors ' +
          'whose client-certificate headers (`X-Client-Cert-Sha256`, `X-Client-Cert-Subject`) Sluice ' +
          'believes, for certificate-bound tokens and mTLS client authentication. From any other peer the ' +
          'headers are ignored, never an error. An IPv4 peer of a dual-stack listener (`::ffff:10.0.0.7`) ' +
          'is its IPv4 address. A host name, a bad prefix or host bits past the prefix (`10.0.0.1/8`) stop ' +
          'the process at start. `docs/operations.md`, "Certificate-bound tokens and mTLS clients"',
      },
    ],
    read: trustedProxies,
  },
  adminPort: intSetting(
    'listeners',
    'SLUICE_ADMIN_PORT',
    9464,
    0,
    65535,
    'health (`/healthz`, `/readyz`) and metrics (`/metrics`)',
  ),
  /** Listen address of the admin port (/healthz, /readyz, /metrics): SLUICE_ADMIN_HOST, loopback by default. */
  adminHost: {
    section: 'listeners',
    vars: [
      {
        env: 'SLUICE_ADMIN_HOST',
        default: '`127.0.0.1`',
        doc:
          'listen address of the admin port, in every process that has one (`sluice start` and its ' +
          'workers, `sluice ingress`, `sluice dispatcher`). An IP address of this machine or `localhost`: ' +
          "`0.0.0.0` (every IPv4 interface), `::` (every interface) or one interface's address opens it to " +
          'other hosts, for a Prometheus or a health check that is not on the machine: see "Exposing the ' +
          'admin port" in `docs/operations.md`. Anything else stops the process at start',
      },
    ],
    read(env) {
      // Not SLUICE_HOST: /metrics names every tenant with its traffic, so the admin port stays on
      // loopback unless it is opened on purpose.
      const host = env.SLUICE_ADMIN_HOST || '127.0.0.1';
      if (isIP(host) === 0 && host !== 'localhost')
        throw new ConfigError(
          'SLUICE_ADMIN_HOST',
          'must be an IP address of this machine or localhost (127.0.0.1, ::1; 0.0.0.0 or :: opens the admin port ' +
            `on every interface), got "${host}"`,
        );
      return host;
    },
  },
} satisfies Record<string, Setting>;
