/**
 * What a tenant may make Sluice send to its targets outside deliveries: the ping of a
 * registration, of a verify and of a PATCH's new URL, and test sends. Each reaches a URL the
 * tenant chose at once, so without a budget these would make Sluice a request cannon and a port
 * scanner. Two token buckets, both must have a token: one per endpoint (ENDPOINT_BURST at once,
 * then one every ENDPOINT_EVERY_SECONDS, shared by all those paths) and one per tenant
 * (SLUICE_TENANT_TARGET_REQUESTS_PER_MINUTE). Beyond either: 429 RATE_LIMITED with Retry-After,
 * and nothing is sent. Per node process (core/rate-limit.ts): a cluster allows the budget once
 * per process. Deliveries, replays included, go through the dispatcher's own limits instead.
 */
import { RateLimiter } from '../../core/rate-limit.ts';
import { rateLimited } from '../problem.ts';

export const ENDPOINT_BURST = 3;
export const ENDPOINT_EVERY_SECONDS = 5;

export class TargetBudget {
  private readonly endpoints: RateLimiter;
  private readonly tenants: RateLimiter;
  /** What a tenant may have sent at once: half its minute. */
  private readonly tenantBurst: number;

  constructor(
    private readonly perMinute: number,
    now: () => number = Date.now,
  ) {
    this.tenantBurst = Math.max(1, Math.floor(perMinute / 2));
    this.tenants = new RateLimiter(perMinute / 60, this.tenantBurst, 100_000, now);
    this.endpoints = new RateLimiter(1 / ENDPOINT_EVERY_SECONDS, ENDPOINT_BURST, 100_000, now);
  }

  /**
   * Takes one request of the tenant's budget and, when given, the endpoint's; throws 429 (taking
   * nothing) when either is spent. `what` says what was asked for, for the problem's detail.
   */
  take(tenantId: string, endpointId: string | null, what: string): void {
    const endpointWait = endpointId === null ? null : this.endpoints.peek(endpointId);
    if (endpointWait !== null)
      throw rateLimited(
        endpointWait,
        `endpoint ${endpointId} was sent ${ENDPOINT_BURST} requests lately (${what}: one more every ` +
          `${ENDPOINT_EVERY_SECONDS} s, shared by verify, test sends and new URLs)`,
      );
    const tenantWait = this.tenants.peek(tenantId);
    if (tenantWait !== null)
      throw rateLimited(
        tenantWait,
        `this tenant's targets were sent ${this.tenantBurst} requests lately ` +
          `(${what}: ${this.perMinute} a minute, SLUICE_TENANT_TARGET_REQUESTS_PER_MINUTE)`,
      );
    if (endpointId !== null) this.endpoints.take(endpointId);
    this.tenants.take(tenantId);
  }
}
