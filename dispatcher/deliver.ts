/**
 * One delivery attempt: sign afresh (a new timestamp every attempt, so a retry hours later still
 * passes the receiver's 300-second window; both secrets during a rotation's overlap) and POST
 * through the shared keep-alive agent.
 * The network timeout is 10 s of real time, never divided by SLUICE_TIME_SCALE.
 */
import type { Http1Agent } from '../outbound/http1-agent.ts';
import { LruMap } from '../core/lru.ts';
import type { Context } from '../core/context.ts';
import { attemptDelivery, createDeliveryAgent, type AttemptOutcome } from '../outbound/attempt.ts';
import { signDelivery } from '../outbound/signing.ts';
import { guardedLookup, targetGuard } from '../outbound/target-guard.ts';
import type { DeliveryRecord, EndpointRecord } from '../core/webhooks/records.ts';
import { attempting, type TraceContext } from '../core/tracing.ts';

export const DELIVERY_TIMEOUT_MS = 10_000;

export interface Deliverer {
  /** `trace` (tracing on): the parent of the attempt's span; the receiver gets its `traceparent`. */
  attempt(
    rec: DeliveryRecord,
    endpoint: EndpointRecord,
    trace?: TraceContext,
  ): Promise<{ result: AttemptOutcome; startedAt: number }>;
  close(): Promise<void>;
}

/** What the deliverer reads of the process's context. */
export type DelivererDeps = Pick<Context, 'clock' | 'config' | 'endpoints'>;

export function createDeliverer(ctx: DelivererDeps): Deliverer {
  // The URL is checked before each request and every connection goes to a checked address. The
  // dev flag relaxes both the same way as at registration (loopback allowed, metadata never).
  const guard = { allowInsecure: ctx.config.devAllowInsecureTargets };
  // The per-request check looks only at the URL (names and IP literals; DNS is checked at connect):
  // a URL that passed once passes again, so it is checked once per URL, not once per attempt.
  const guardUrl = targetGuard(guard);
  const passed = new LruMap<string, true>(4096);
  const checkTarget = (url: URL) =>
    passed.get(url.href)
      ? undefined
      : guardUrl(url).then(() => {
          passed.set(url.href, true);
        });
  const agent: Http1Agent = createDeliveryAgent(
    ctx.config.dispatchPerEndpoint,
    guardedLookup(guard),
    ctx.config.deliveryClientCertificate,
    ctx.config.deliveryProxy,
  );
  /** One attempt; `traceHeaders` (tracing on) go out with the request. */
  const attemptOnce = async (
    rec: DeliveryRecord,
    endpoint: EndpointRecord,
    traceHeaders?: Record<string, string>,
  ): Promise<{ result: AttemptOutcome; startedAt: number }> => {
    const startedAt = ctx.clock.now();
    const secrets = ctx.endpoints.signingSecrets(endpoint.id, startedAt);
    if (secrets === undefined) {
      return {
        startedAt,
        result: { ok: false, status: null, error: 'the endpoint has no signing secret', durationMs: 0 },
      };
    }
    const signed = signDelivery(secrets, rec.event, rec.attempt, startedAt);
    const headers = traceHeaders ? { ...signed.headers, ...traceHeaders } : signed.headers;
    const result = await attemptDelivery(endpoint.url, signed.rawBody, headers, {
      timeoutMs: DELIVERY_TIMEOUT_MS,
      checkTarget,
      dispatcher: agent,
      // One tenant's receivers never answer another's requests, nor hold its connections.
      partition: rec.tenant_id,
    });
    return { result, startedAt };
  };
  return {
    attempt: (rec, endpoint, trace) => attempting(trace, rec, endpoint, attemptOnce),
    async close() {
      // The dispatcher waited for its attempts; a request still open after a second is cut off
      // (destroy) rather than keep the process from exiting.
      let timer: NodeJS.Timeout | undefined;
      const closed = await Promise.race([
        agent.close().then(
          () => true,
          () => true,
        ),
        new Promise<false>((r) => (timer = setTimeout(() => r(false), 1000))),
      ]);
      clearTimeout(timer);
      if (!closed) await agent.destroy().catch(() => {});
    },
  };
}
