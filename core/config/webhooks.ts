/**
 * Webhook settings: when a failing endpoint is disabled, secret overlap, endpoints per tenant, requests
 * to targets outside deliveries, recoveries, and how Sluice reaches targets (a CONNECT proxy, a client
 * certificate, insecure targets in development).
 */
import { ConfigError } from '../errors.ts';
import { bool, deliveryClientCertificate, num } from './readers.ts';
import type { PROCESS_SETTINGS } from './process.ts';
import { intSetting, numSetting, type Setting, type Values } from './schema.ts';

/** An operator's HTTP CONNECT proxy for everything sent to webhook targets (SLUICE_DELIVERY_PROXY). */
export interface DeliveryProxy {
  host: string;
  port: number;
  /** The `Proxy-Authorization` value (`Basic …`) from the URL's credentials, or null. */
  authorization: string | null;
}

export const WEBHOOK_SETTINGS = {
  /** An endpoint whose every attempt failed for this long (before SLUICE_TIME_SCALE) is DISABLED. */
  webhookDisableAfterMs: {
    section: 'webhooks',
    vars: [
      {
        env: 'SLUICE_WEBHOOK_DISABLE_AFTER_HOURS',
        default: '`120` (5 days)',
        doc:
          'an endpoint whose every attempt failed for this long (before `SLUICE_TIME_SCALE`) becomes ' + '`DISABLED`',
      },
    ],
    read: (env) => num(env, 'SLUICE_WEBHOOK_DISABLE_AFTER_HOURS', 120, 1, 24 * 365) * 3600_000,
  },
  /**
   * After a secret rotation, how long the previous secret keeps signing (the default of the request's overlap_seconds).
   */
  webhookSecretOverlapSeconds: intSetting(
    'webhooks',
    'SLUICE_WEBHOOK_SECRET_OVERLAP_SECONDS',
    86_400,
    0,
    7 * 86_400,
    'after `rotate-secret`, how long the previous secret keeps signing beside the new one, unless ' +
      'the request says `overlap_seconds` (0 to 604800)',
  ),
  /** The most webhook endpoints one tenant may have; registering one more is a 409 ENDPOINT_LIMIT. */
  maxEndpointsPerTenant: intSetting(
    'webhooks',
    'SLUICE_MAX_ENDPOINTS_PER_TENANT',
    1000,
    1,
    1_000_000,
    'the most webhook endpoints one tenant may have (1 to 1000000); registering one more is a 409 ' +
      "`ENDPOINT_LIMIT` (with `max_endpoints`) until one is deleted. It bounds a tenant's fan-out: one " +
      'event becomes at most this many deliveries',
  ),
  /**
   * Requests Sluice sends to a tenant's targets outside deliveries (registration, verify, a new
   * URL's ping, test sends), per tenant and node process: this many a minute, half of it at once.
   */
  tenantTargetRequestsPerMinute: intSetting(
    'webhooks',
    'SLUICE_TENANT_TARGET_REQUESTS_PER_MINUTE',
    120,
    1,
    1_000_000,
    "requests Sluice sends to one tenant's targets outside deliveries (the ping of a registration, " +
      "of verify and of a PATCH's new URL, test sends), per node process: half of it at once, then " +
      'this many a minute; beyond it 429 `RATE_LIMITED` with Retry-After. Each endpoint has its own ' +
      'budget beside it: 3 at once, then one every 5 s',
  ),
  /** The share of an endpoint's (and a tenant's) delivery capacity a recovery may use (core/webhooks/recovery.ts). */
  recoveryShare: numSetting(
    'webhooks',
    'SLUICE_RECOVERY_SHARE',
    0.1,
    0.001,
    1,
    'share of delivery capacity a recovery (`POST /v1/webhooks/endpoints/{id}/recover`) may use: it re-sends at ' +
      "most this share of the endpoint's `rate_limit_per_second` (or of `SLUICE_RECOVERY_CAPACITY_PER_SECOND` " +
      "without one) a second, and all of a tenant's recoveries on one node together at most this share of " +
      '`SLUICE_RECOVERY_CAPACITY_PER_SECOND`',
  ),
  /** The deliveries a second taken as an endpoint's (without a rate limit) and a tenant's capacity, for recoveries. */
  recoveryCapacityPerSecond: intSetting(
    'webhooks',
    'SLUICE_RECOVERY_CAPACITY_PER_SECOND',
    500,
    1,
    1_000_000,
    'deliveries a second a recovery takes as the capacity of an endpoint without `rate_limit_per_second`, ' +
      "and as a tenant's; " +
      'a recovery uses `SLUICE_RECOVERY_SHARE` of it',
  ),
  /** Everything sent to webhook targets goes through this CONNECT proxy; null: straight to them. */
  deliveryProxy: {
    section: 'webhooks',
    vars: [
      {
        env: 'SLUICE_DELIVERY_PROXY',
        default: 'unset (direct)',
        doc:
          'an HTTP CONNECT proxy (`http://[user:password@]host:port`) through which every delivery, ' +
          "verification ping and test send goes, so receivers can allow-list the proxy's addresses. " +
          'The target rules still apply: Sluice resolves and checks the target itself and asks the ' +
          'proxy for that address (TLS to the target runs inside the tunnel)',
      },
    ],
    read(env): DeliveryProxy | null {
      const raw = env.SLUICE_DELIVERY_PROXY;
      if (!raw) return null;
      let url: URL;
      try {
        url = new URL(raw);
      } catch {
        throw new ConfigError('SLUICE_DELIVERY_PROXY', `must be a URL like http://proxy:3128, got "${raw}"`);
      }
      if (url.protocol !== 'http:' || url.hostname === '' || (url.pathname !== '/' && url.pathname !== ''))
        throw new ConfigError('SLUICE_DELIVERY_PROXY', `must be http://[user:password@]host:port, got "${url.origin}"`);
      const user = decodeURIComponent(url.username);
      const password = decodeURIComponent(url.password);
      return {
        host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
        port: url.port ? Number(url.port) : 80,
        authorization: user || password ? `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` : null,
      };
    },
  },
  /** The client certificate presented on every delivery, ping and test send over https; null: none. */
  deliveryClientCertificate: {
    section: 'webhooks',
    vars: [
      {
        env: 'SLUICE_DELIVERY_CLIENT_CERT',
        default: 'unset',
        doc:
          'PEM file: the client certificate Sluice presents to webhook receivers that ask for one (mTLS), ' +
          'then any intermediates, in order. Every delivery, verification ping and test send over https ' +
          'carries it; `GET /v1/webhooks/client-certificate` publishes the chain (`docs/webhooks.md`, ' +
          '"Authenticating Sluice by its certificate"). Set it, with the key, on every process that sends: ' +
          'the dispatcher (deliveries) and the ingress (pings, test sends, the route). Needs ' +
          '`SLUICE_DELIVERY_CLIENT_KEY`. Checked at start: readable, each certificate issued by the next. ' +
          'Read once: a renewed certificate takes a restart',
      },
      {
        env: 'SLUICE_DELIVERY_CLIENT_KEY',
        default: 'unset',
        doc:
          "PEM file: the unencrypted private key of `SLUICE_DELIVERY_CLIENT_CERT`'s certificate. Both or " +
          "neither; a key that is not the certificate's stops the process at start",
      },
    ],
    read: deliveryClientCertificate,
  },
} satisfies Record<string, Setting>;

/** The webhook settings that depend on others: whether in production. */
export const WEBHOOK_DERIVED_SETTINGS = {
  devAllowInsecureTargets: {
    section: 'webhooks',
    vars: [
      {
        env: 'SLUICE_DEV_ALLOW_INSECURE_TARGETS',
        default: '`false`',
        doc: 'allow `http://` and private/loopback webhook targets; refused when `NODE_ENV=production`',
      },
    ],
    read(env, base) {
      const allow = bool(env, 'SLUICE_DEV_ALLOW_INSECURE_TARGETS', false);
      if (allow && base.production)
        throw new ConfigError('SLUICE_DEV_ALLOW_INSECURE_TARGETS', 'is refused when NODE_ENV=production');
      return allow;
    },
  },
} satisfies Record<string, Setting<Pick<Values<typeof PROCESS_SETTINGS>, 'production'>>>;
