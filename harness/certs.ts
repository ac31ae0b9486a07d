/**
 * Certificates for TLS tests, made with the `openssl` command line (EC P-256: fast): a CA, a server
 * certificate for 127.0.0.1 and localhost, two client certificates of that CA, one client
 * certificate of a foreign CA, and one of the CA that expired in 2020. Each certificate comes with
 * its key, its SHA-256 thumbprint (lowercase hex of the DER, what the front door sends upstream in
 * X-Client-Cert-Sha256) and the same as base64url (RFC 8705's `x5t#S256`).
 *
 *   const certs = makeCerts(mkdtempSync(join(tmpdir(), 'certs-')));
 *   https.request({ ca: readFileSync(certs.ca.cert), cert: readFileSync(certs.client.cert), ... })
 */
import { execFileSync } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Cert {
  /** PEM certificate file. */
  cert: string;
  /** PEM private key file (unencrypted). */
  key: string;
  /** The certificate then the key in one PEM file (what HAProxy's `crt` takes). */
  pem: string;
  /** Lowercase hex SHA-256 of the certificate's DER. */
  sha256: string;
  /** The same digest, base64url (`cnf: {"x5t#S256": …}`). */
  x5tS256: string;
  /** The subject as node:crypto prints it, one RDN a line (e.g. "O=acme\nCN=client-one"). */
  subject: string;
}

export interface TestCerts {
  dir: string;
  ca: Cert;
  /** Signed by `ca`, for 127.0.0.1 and localhost. */
  server: Cert;
  /** Two client certificates signed by `ca`. */
  client: Cert;
  client2: Cert;
  /** A CA nobody trusts, and a client certificate it signed. */
  foreignCa: Cert;
  foreign: Cert;
  /** Signed by `ca`, valid from 2020-01-01 to 2020-01-02. */
  expired: Cert;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

function finish(dir: string, name: string): Cert {
  const cert = join(dir, `${name}.pem`);
  const key = join(dir, `${name}.key`);
  const pem = join(dir, `${name}-with-key.pem`);
  const certText = readFileSync(cert, 'utf8');
  writeFileSync(pem, certText + readFileSync(key, 'utf8'));
  const x509 = new X509Certificate(certText);
  const digest = createHash('sha256').update(x509.raw).digest();
  return {
    cert,
    key,
    pem,
    sha256: digest.toString('hex'),
    x5tS256: digest.toString('base64url'),
    subject: x509.subject,
  };
}

/** An EC P-256 key, unencrypted: the key half of every `openssl req` here. */
const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

/** A self-signed certificate with `extensions` (`-addext` values), valid for `days`. */
export function selfSigned(dir: string, name: string, subject: string, extensions: string[], days = 3650): Cert {
  openssl(
    [
      'req',
      '-x509',
      ...EC_KEY,
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.pem`,
      '-subj',
      subject,
      '-days',
      String(days),
      ...extensions.flatMap((e) => ['-addext', e]),
    ],
    dir,
  );
  return finish(dir, name);
}

function selfSignedCa(dir: string, name: string, subject: string): Cert {
  return selfSigned(dir, name, subject, ['basicConstraints=critical,CA:TRUE', 'keyUsage=critical,keyCertSign,cRLSign']);
}

function request(dir: string, name: string, subject: string): void {
  openssl(['req', '-new', ...EC_KEY, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject], dir);
}

function signed(dir: string, ca: Cert, name: string, subject: string, extensions: string): Cert {
  request(dir, name, subject);
  writeFileSync(join(dir, `${name}.ext`), extensions);
  openssl(
    [
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      ca.cert,
      '-CAkey',
      ca.key,
      '-CAcreateserial',
      '-out',
      `${name}.pem`,
      '-days',
      '365',
      '-sha256',
      '-extfile',
      `${name}.ext`,
    ],
    dir,
  );
  return finish(dir, name);
}

const CLIENT_EXT = 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n';

/** `openssl x509 -req` (3.0) cannot backdate; `openssl ca` can, with a database of its own. */
function expiredClient(dir: string, ca: Cert): Cert {
  const name = 'expired';
  request(dir, name, '/O=acme/CN=client-expired');
  const db = join(dir, 'ca-db');
  mkdirSync(db, { recursive: true });
  writeFileSync(join(db, 'index.txt'), '');
  writeFileSync(join(db, 'serial'), '1000\n');
  writeFileSync(
    join(dir, 'ca.cnf'),
    [
      '[ca]',
      'default_ca = local',
      '[local]',
      `database = ${join(db, 'index.txt')}`,
      `new_certs_dir = ${db}`,
      `serial = ${join(db, 'serial')}`,
      'default_md = sha256',
      'policy = any',
      'x509_extensions = client',
      'unique_subject = no',
      '[any]',
      'organizationName = optional',
      'commonName = supplied',
      '[client]',
      CLIENT_EXT,
    ].join('\n'),
  );
  openssl(
    [
      'ca',
      '-batch',
      '-config',
      'ca.cnf',
      '-cert',
      ca.cert,
      '-keyfile',
      ca.key,
      '-in',
      `${name}.csr`,
      '-out',
      `${name}.pem`,
      '-notext',
      '-startdate',
      '20200101000000Z',
      '-enddate',
      '20200102000000Z',
    ],
    dir,
  );
  return finish(dir, name);
}

/** Writes every certificate and key into `dir` (which must exist) and returns where they are. */
export function makeCerts(dir: string): TestCerts {
  const ca = selfSignedCa(dir, 'ca', '/O=Sluice test/CN=Sluice test CA');
  const foreignCa = selfSignedCa(dir, 'foreign-ca', '/O=Elsewhere/CN=Foreign CA');
  const server = signed(
    dir,
    ca,
    'server',
    '/O=Sluice test/CN=localhost',
    'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' +
      'subjectAltName=DNS:localhost,IP:127.0.0.1\n',
  );
  return {
    dir,
    ca,
    server,
    client: signed(dir, ca, 'client', '/O=acme/CN=client-one', CLIENT_EXT),
    client2: signed(dir, ca, 'client2', '/O=acme/CN=client-two', CLIENT_EXT),
    foreignCa,
    foreign: signed(dir, foreignCa, 'foreign', '/O=acme/CN=client-foreign', CLIENT_EXT),
    expired: expiredClient(dir, ca),
  };
}
