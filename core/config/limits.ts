/** Limit settings: the request body size and the per-client request, token and failed-authentication rates. */
import { intSetting, type Setting } from './schema.ts';

export const LIMIT_SETTINGS = {
  maxBodyBytes: intSetting(
    'limits',
    'SLUICE_MAX_BODY_BYTES',
    1024 * 1024,
    1024,
    16 * 1024 * 1024,
    'request bodies above this get 413',
  ),
  /** Requests per second per client per node at the edge (0: off), and the burst above it. */
  clientRateLimit: intSetting(
    'limits',
    'SLUICE_RATE_LIMIT_PER_CLIENT',
    10_000,
    0,
    10_000_000,
    'requests per second per client at each node (0: off); over it, 429 `RATE_LIMITED` with `Retry-After`',
  ),
  clientRateBurst: intSetting('limits', 'SLUICE_RATE_LIMIT_BURST', 20_000, 1, 100_000_000, 'burst above that rate'),
  /** Failed token requests per second per client id and per address (0: off). */
  authFailureRate: intSetting(
    'limits',
    'SLUICE_AUTH_FAILURE_RATE',
    5,
    0,
    1_000_000,
    'failed token requests per second per client id and per address before they get 429 (0: off)',
  ),
  authFailureBurst: intSetting(
    'limits',
    'SLUICE_AUTH_FAILURE_BURST',
    20,
    1,
    1_000_000,
    'burst of failures before that',
  ),
  /**
   * Token requests per minute per known client id at each node, successful or failed (0: off), and
   * the burst above it: over it, 429 with Retry-After in the OAuth error shape.
   */
  tokenRatePerMinute: intSetting(
    'limits',
    'SLUICE_TOKEN_RATE_PER_MINUTE',
    600,
    0,
    60_000_000,
    'token requests per minute per known client id at each node, failed authentications included (0: ' +
      'off); over it, 429 `temporarily_unavailable` with `Retry-After`',
  ),
  tokenRateBurst: intSetting(
    'limits',
    'SLUICE_TOKEN_RATE_BURST',
    100,
    1,
    1_000_000,
    'burst of token requests above that rate',
  ),
} satisfies Record<string, Setting>;
