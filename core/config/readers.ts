/**
 * How a setting's value is read from the environment and checked: numbers in a range, booleans,
 * URLs, directories, roles, certificate files. Each throws a ConfigError naming the variable.
 * Which settings exist, and their defaults, is the schema of core/config/ (one file per section).
 */
import { readFileSync, type Stats, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { ConfigError } from '../errors.ts';
import { DEFAULT_ROLES, isScope } from '../scopes.ts';
import { CidrSet, formatCidr } from '../net/cidr.ts';

export type Env = Record<string, string | undefined>;

export function int(env: Env, name: string, def: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  if (!/^-?\d+$/.test(raw.trim())) throw new ConfigError(name, `must be an integer, got "${raw}"`);
  const n = Number(raw);
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

export function num(env: Env, name: string, def: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min || n > max) {
    throw new ConfigError(name, `must be a number between ${min} and ${max}, got "${raw}"`);
  }
  return n;
}

export function bool(env: Env, name: string, def: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw new ConfigError(name, `must be true or false, got "${raw}"`);
}

export function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], def: T): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  if (!(allowed as readonly string[]).includes(raw))
    throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${raw}"`);
  return raw as T;
}

export function url(env: Env, name: string): string | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const scheme = URL.canParse(raw) ? new URL(raw).protocol : null;
  if (scheme !== 'http:' && scheme !== 'https:') throw new ConfigError(name, `must be an http(s) URL, got "${raw}"`);
  return raw.replace(/\/+$/, '');
}

/** A directory that exists or is missing (created when a process opens its store); a file is refused. */
export function dirPath(env: Env, name: string, def: string): string {
  const raw = env[name];
  if (raw?.includes('\0')) throw new ConfigError(name, 'must be a directory path');
  const dir = resolve(raw || def);
  let stat: Stats | undefined;
  try {
    stat = statSync(dir, { throwIfNoEntry: false });
  } catch (err) {
    throw new ConfigError(name, `cannot use ${dir}: ${(err as Error).message}`);
  }
  if (stat && !stat.isDirectory()) throw new ConfigError(name, `must be a directory, but ${dir} is a file`);
  return dir;
}

export function parseRoles(env: Env): Record<string, readonly string[]> {
  const raw = env.SLUICE_ROLES;
  if (raw === undefined || raw === '') return { ...DEFAULT_ROLES };
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new ConfigError('SLUICE_ROLES', 'must be a JSON object {"role": ["resource:action", ...]}');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ConfigError('SLUICE_ROLES', 'must be a JSON object {"role": ["resource:action", ...]}');
  }
  const roles: Record<string, readonly string[]> = { ...DEFAULT_ROLES };
  for (const [role, scopes] of Object.entries(parsed)) {
    if (!/^[a-z][a-z0-9-]{0,63}$/.test(role)) throw new ConfigError('SLUICE_ROLES', `bad role name "${role}"`);
    if (!Array.isArray(scopes) || scopes.some((s) => typeof s !== 'string' || !isScope(s))) {
      throw new ConfigError('SLUICE_ROLES', `role "${role}" must map to an array of "resource:action" scopes`);
    }
    roles[role] = Object.freeze([...new Set(scopes as string[])]);
  }
  return roles;
}

export function readFileEnv(env: Env): Env {
  const file = env.SLUICE_CONFIG_FILE;
  if (!file) return env;
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ConfigError('SLUICE_CONFIG_FILE', `cannot read JSON from ${file}: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null)
    throw new ConfigError('SLUICE_CONFIG_FILE', 'must hold a JSON object');
  const fromFile: Env = {};
  for (const [k, v] of Object.entries(parsed)) {
    fromFile[k] = typeof v === 'string' ? v : JSON.stringify(v);
  }
  // The environment wins over the file.
  return { ...fromFile, ...env };
}

/** Reads a file a setting names, or a ConfigError naming the setting. */
export function readSettingFile(name: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(name, `cannot read ${path}: ${(err as Error).message}`);
  }
}

/**
 * The unencrypted PEM private key in a file a setting names, or a ConfigError naming the setting
 * (`refusal`: what it says of a file that holds none).
 */
function privateKeyFile(name: string, path: string, refusal: string): KeyObject {
  try {
    return createPrivateKey(readSettingFile(name, path));
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError(name, `${path} ${refusal}: ${(err as Error).message}`);
  }
}

/**
 * SLUICE_DELIVERY_CLIENT_CERT (PEM: the certificate, then any intermediates) and
 * SLUICE_DELIVERY_CLIENT_KEY (its unencrypted PEM private key): both or neither, readable, each
 * certificate issued by the next, and the key the leaf's.
 */
export function deliveryClientCertificate(env: Env): DeliveryClientCertificate | null {
  const paths = certAndKey(env, 'SLUICE_DELIVERY_CLIENT_CERT', 'SLUICE_DELIVERY_CLIENT_KEY');
  if (paths === null) return null;
  const { certPath, keyPath } = paths;
  const { blocks, certs: chain } = pemCertificates('SLUICE_DELIVERY_CLIENT_CERT', certPath);
  for (let i = 0; i + 1 < chain.length; i++)
    if (!chain[i].checkIssued(chain[i + 1]))
      throw new ConfigError(
        'SLUICE_DELIVERY_CLIENT_CERT',
        `certificate ${i + 2} in ${certPath} did not issue certificate ${i + 1}: the file must hold the ` +
          'certificate first, then each issuer in order',
      );
  const key = privateKeyFile('SLUICE_DELIVERY_CLIENT_KEY', keyPath, 'holds no readable unencrypted PEM private key');
  if (!chain[0].checkPrivateKey(key))
    throw new ConfigError(
      'SLUICE_DELIVERY_CLIENT_KEY',
      `the key in ${keyPath} does not belong to the certificate in ${certPath} ` +
        `(${chain[0].subject.replace(/\n/g, ', ')})`,
    );
  return Object.freeze({ chainPem: `${blocks.join('\n')}\n`, chain: Object.freeze(chain), key });
}

/** SLUICE_TRUSTED_PROXIES: comma-separated addresses or CIDR blocks, IPv4 or IPv6, in canonical text. */
export function trustedProxies(env: Env): readonly string[] {
  try {
    return Object.freeze(CidrSet.parse(env.SLUICE_TRUSTED_PROXIES ?? '').entries.map(formatCidr));
  } catch (err) {
    throw new ConfigError(
      'SLUICE_TRUSTED_PROXIES',
      `${(err as Error).message}; give comma-separated IP addresses or CIDR blocks, e.g. "10.0.0.0/8,::1"`,
    );
  }
}

/** The PEM certificate blocks of a file a setting names, and each parsed, or a ConfigError naming the setting. */
function pemCertificates(name: string, path: string): { blocks: string[]; certs: X509Certificate[] } {
  const blocks = readSettingFile(name, path).match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g);
  if (!blocks) throw new ConfigError(name, `${path} holds no PEM certificate (BEGIN CERTIFICATE)`);
  const certs = blocks.map((pem, i) => {
    try {
      return new X509Certificate(pem);
    } catch (err) {
      throw new ConfigError(name, `certificate ${i + 1} in ${path} cannot be read: ${(err as Error).message}`);
    }
  });
  return { blocks, certs };
}

/** A certificate setting and its key setting: both set (their paths), neither (null), else a ConfigError. */
function certAndKey(env: Env, certVar: string, keyVar: string): { certPath: string; keyPath: string } | null {
  const certPath = env[certVar] || '';
  const keyPath = env[keyVar] || '';
  if (certPath === '' && keyPath === '') return null;
  if (keyPath === '') throw new ConfigError(keyVar, `must be set when ${certVar} is (both or neither)`);
  if (certPath === '') throw new ConfigError(certVar, `must be set when ${keyVar} is (both or neither)`);
  return { certPath, keyPath };
}

/**
 * SLUICE_TLS_CERT and SLUICE_TLS_KEY (both or neither; the key unencrypted and the certificate's),
 * and SLUICE_TLS_CLIENT_CA, which needs them.
 */
export function listenerTls(env: Env): ListenerTls | null {
  const caPath = env.SLUICE_TLS_CLIENT_CA || '';
  const paths = certAndKey(env, 'SLUICE_TLS_CERT', 'SLUICE_TLS_KEY');
  if (paths === null) {
    if (caPath !== '')
      throw new ConfigError('SLUICE_TLS_CLIENT_CA', 'needs SLUICE_TLS_CERT and SLUICE_TLS_KEY (mTLS is TLS first)');
    return null;
  }
  const { certPath, keyPath } = paths;
  const [leaf] = pemCertificates('SLUICE_TLS_CERT', certPath).certs;
  const key = privateKeyFile('SLUICE_TLS_KEY', keyPath, 'is not an unencrypted PEM private key');
  if (!leaf.checkPrivateKey(key))
    throw new ConfigError('SLUICE_TLS_KEY', `${keyPath} is not the key of the certificate in ${certPath}`);
  if (caPath !== '') pemCertificates('SLUICE_TLS_CLIENT_CA', caPath);
  return { certFile: resolve(certPath), keyFile: resolve(keyPath), clientCaFile: caPath ? resolve(caPath) : null };
}

export function peers(env: Env): string[] {
  return (env.SLUICE_PEERS ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)
    .map((p, i) => url({ [`SLUICE_PEERS[${i}]`]: p }, `SLUICE_PEERS[${i}]`)!);
}

export function kafkaRack(env: Env): string | null {
  const rack = env.SLUICE_KAFKA_RACK?.trim();
  if (!rack) return null;
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(rack))
    throw new ConfigError(
      'SLUICE_KAFKA_RACK',
      `must be letters, digits, ".", "_" or "-" (a broker.rack), got "${rack}"`,
    );
  return rack;
}

/**
 * The client certificate the dispatcher and the pings present to receivers (SLUICE_DELIVERY_CLIENT_CERT
 * and SLUICE_DELIVERY_CLIENT_KEY), read and checked once at start-up.
 */
export interface DeliveryClientCertificate {
  /** The certificate blocks of the cert file, leaf first, as PEM (nothing else the file held). */
  chainPem: string;
  /** The same certificates, parsed (`chain[0]` is the leaf, the one the key signs for). */
  chain: readonly X509Certificate[];
  /** The private key (a KeyObject: it prints as `{}`, so it does not leak into a dump of the config). */
  key: KeyObject;
}

/**
 * TLS on the public port (SLUICE_TLS_CERT, SLUICE_TLS_KEY and SLUICE_TLS_CLIENT_CA): absolute paths of
 * files read and checked once at start-up; the listener loads them by name (ingress/uws-adapter.ts).
 */
export interface ListenerTls {
  /** PEM: the server certificate, then any intermediates. */
  certFile: string;
  /** Its unencrypted PEM private key. */
  keyFile: string;
  /** PEM CA certificates a client certificate must chain to; null: no client certificate asked. */
  clientCaFile: string | null;
}
