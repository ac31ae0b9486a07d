/**
 * Token settings: audience, roles, clock skew, how long a revocation may take before it answers 503,
 * the verified-token cache, the issuer and the master key, and the public development key used
 * without one (refused beyond loopback unless allowed).
 */
import { createHash } from 'node:crypto';
import { ConfigError } from '../errors.ts';
import { parseRoles } from './readers.ts';
import type { LISTENER_SETTINGS } from './listeners.ts';
import type { PROCESS_SETTINGS } from './process.ts';
import type { REGION_SETTINGS } from './regions.ts';
import { boolSetting, intSetting, type Setting, textSetting, type Values } from './schema.ts';

const DEV_MASTER_KEY = 'sluice-development-master-key-do-not-use-in-production';

export const TOKEN_SETTINGS = {
  /** Whether the public development master key may serve beyond loopback (a development setup). */
  devAllowDevelopmentKey: boolSetting(
    'tokens',
    'SLUICE_DEV_ALLOW_DEVELOPMENT_KEY',
    false,
    'with no `SLUICE_MASTER_KEY`, Sluice signs and seals with a development key anyone can read in ' +
      'its source: it then refuses a public listener beyond loopback and the peer port ' +
      '(`SLUICE_PEER_PORT`, whose pushes that key would sign) unless this says it is a development ' +
      'setup; refused when `NODE_ENV=production`',
  ),
  audience: textSetting('tokens', 'SLUICE_AUDIENCE', 'sluice', '`aud` of tokens'),
  roles: {
    section: 'tokens',
    vars: [
      {
        env: 'SLUICE_ROLES',
        default: 'built-in roles',
        doc: 'JSON object `{"role": ["resource:action", …]}` merged over the defaults',
      },
    ],
    read: (env): Readonly<Record<string, readonly string[]>> => Object.freeze(parseRoles(env)),
  },
  clockSkewSeconds: intSetting('tokens', 'SLUICE_CLOCK_SKEW_SECONDS', 5, 0, 60, 'leeway on `exp`, `nbf`, `iat`'),
  revocationAnswerMs: intSetting(
    'tokens',
    'SLUICE_REVOCATION_ANSWER_MS',
    5000,
    1000,
    60_000,
    'a revocation not through within this long (Kafka has not committed it, or this node has not ' +
      'read it back) is answered 503 with `Retry-After` and goes on in the background; a repeat ' +
      'reaching the same process joins it (`sluice admin revoke` waits without this bound)',
  ),
  tokenCacheSize: intSetting(
    'tokens',
    'SLUICE_TOKEN_CACHE_SIZE',
    100_000,
    0,
    10_000_000,
    'verified tokens kept per node (0 disables the cache)',
  ),
  /** Tokens live 15 minutes; no variable changes it. */
  tokenTtlSeconds: { read: () => 900 },
  masterKeyIsDefault: { read: (env) => env.SLUICE_MASTER_KEY === undefined },
  /** SLUICE_ISSUER unset: the node adopts the issuer its cluster already uses (core/tokens/cluster-issuer.ts). */
  issuerIsDefault: { read: (env) => !env.SLUICE_ISSUER },
} satisfies Record<string, Setting>;

/** The token settings that depend on others: the listener's scheme and port, whether in production. */
export const TOKEN_DERIVED_SETTINGS = {
  issuer: {
    section: 'tokens',
    vars: [
      {
        env: 'SLUICE_ISSUER',
        default: "the cluster's (the first node's `http://127.0.0.1:<SLUICE_PORT>`, `https://` with `SLUICE_TLS_CERT`)",
        doc:
          "`iss` of tokens and the metadata's issuer: set it to the public URL. One per cluster, kept in " +
          "`sluice.keys`: a node without it adopts the cluster's, a node whose value differs refuses to " +
          'start',
      },
    ],
    read(env, base) {
      const issuer = env.SLUICE_ISSUER || `${base.tls ? 'https' : 'http'}://127.0.0.1:${base.port}`;
      if (!URL.canParse(issuer)) throw new ConfigError('SLUICE_ISSUER', `must be a URL, got "${issuer}"`);
      return issuer;
    },
  },
  /** 32 bytes; keys the secret hashes and encrypts signing keys at rest. */
  masterKey: {
    section: 'tokens',
    vars: [
      {
        env: 'SLUICE_MASTER_KEY',
        default: 'development key',
        doc:
          '≥ 32 characters; keys the secret hashes and encrypts signing keys and endpoint secrets at rest. ' +
          'Required when `NODE_ENV=production`',
      },
    ],
    read(env, base): Buffer {
      const raw = env.SLUICE_MASTER_KEY;
      if (base.production && !raw) throw new ConfigError('SLUICE_MASTER_KEY', 'is required when NODE_ENV=production');
      if (raw !== undefined && raw.length < 32)
        throw new ConfigError('SLUICE_MASTER_KEY', 'must be at least 32 characters');
      return createHash('sha256')
        .update(raw ?? DEV_MASTER_KEY)
        .digest();
    },
  },
} satisfies Record<
  string,
  Setting<Pick<Values<typeof LISTENER_SETTINGS>, 'tls' | 'port'> & Pick<Values<typeof PROCESS_SETTINGS>, 'production'>>
>;

const isLoopback = (host: string) => /^(127\.\d+\.\d+\.\d+|::1|localhost)$/i.test(host);

/**
 * The development key is public: whatever it signs or seals, anyone can. So with it Sluice serves
 * loopback only, and opens no peer port (a push signed with it would revoke clients), unless
 * SLUICE_DEV_ALLOW_DEVELOPMENT_KEY says this is a development setup.
 */
export function refuseDevelopmentKeyBeyondLoopback(
  config: Pick<Values<typeof TOKEN_SETTINGS>, 'devAllowDevelopmentKey'> &
    Pick<Values<typeof PROCESS_SETTINGS>, 'production'> &
    Pick<Values<typeof REGION_SETTINGS>, 'peerPort'> &
    Pick<Values<typeof LISTENER_SETTINGS>, 'host'>,
): void {
  if (config.devAllowDevelopmentKey) {
    if (config.production)
      throw new ConfigError('SLUICE_DEV_ALLOW_DEVELOPMENT_KEY', 'is refused when NODE_ENV=production');
    return;
  }
  const fix = 'set SLUICE_MASTER_KEY (or SLUICE_DEV_ALLOW_DEVELOPMENT_KEY=true on a development setup)';
  if (config.peerPort !== null)
    throw new ConfigError(
      'SLUICE_PEER_PORT',
      `is refused with the public development key: anyone could sign a revocation push; ${fix}`,
    );
  if (!isLoopback(config.host))
    throw new ConfigError(
      'SLUICE_HOST',
      `${config.host} is beyond loopback, refused with the public development key; ${fix}`,
    );
}
