/**
 * One-off signed sends outside the queue: the verification ping (a signed `ping` event sent to an
 * endpoint at registration, on re-verification and to a new URL), and a tenant's test send.
 * A 2xx within 5 seconds verifies the endpoint. The 5 s is a network timeout and is never divided
 * by SLUICE_TIME_SCALE.
 *
 *   const outcome = await sendPing(rec, secret, { allowInsecure, nowMs: clock.now() });
 *   if (outcome.ok) ... // ACTIVE
 *   const test = await sendEvent(rec, secrets, event, { allowInsecure, nowMs, timeoutMs: 10_000, keepBody: 1024 });
 */
import type { DeliveryClientCertificate } from '../core/config/readers.ts';
import type { DeliveryProxy } from '../core/config/webhooks.ts';
import { newId } from '../core/secrets.ts';
import { attemptDelivery, createDeliveryAgent, type AttemptOutcome } from './attempt.ts';
import type { EndpointRecord, EventRecord } from '../core/webhooks/records.ts';
import { signDelivery, type SigningSecrets } from './signing.ts';
import { guardedLookup, targetGuard, type TargetGuardOptions } from './target-guard.ts';

export const PING_TIMEOUT_MS = 5000;

export interface PingOptions extends TargetGuardOptions {
  nowMs: number;
  timeoutMs?: number;
  /** Presented to a receiver that asks for a client certificate (SLUICE_DELIVERY_CLIENT_CERT). */
  clientCertificate?: DeliveryClientCertificate | null;
  /** The operator's CONNECT proxy (SLUICE_DELIVERY_PROXY), or direct. */
  proxy?: DeliveryProxy | null;
}

export interface SendOptions extends PingOptions {
  /** Keep up to this many bytes of the receiver's body in the outcome's `body`. */
  keepBody?: number;
}

export function pingEvent(rec: EndpointRecord, nowMs: number): EventRecord {
  return { id: newId('evt'), type: 'ping', tenant_id: rec.tenant_id, data: { endpoint_id: rec.id }, created_at: nowMs };
}

export function sendPing(
  rec: EndpointRecord,
  secret: string | SigningSecrets,
  opts: PingOptions,
): Promise<AttemptOutcome> {
  return sendEvent(rec, secret, pingEvent(rec, opts.nowMs), opts);
}

/** Signs `event` as attempt 1 and POSTs it to `rec.url` once (the timeout: `timeoutMs`, else 5 s). */
export async function sendEvent(
  rec: EndpointRecord,
  secret: string | SigningSecrets,
  event: EventRecord,
  opts: SendOptions,
): Promise<AttemptOutcome> {
  const guard: TargetGuardOptions = { allowInsecure: opts.allowInsecure, lookup: opts.lookup };
  const signed = signDelivery(secret, event, 1, opts.nowMs);
  // An agent of its own: a one-off send, and destroying the agent afterwards drops a socket
  // that a receiver which never answers would otherwise keep open.
  const agent = createDeliveryAgent(1, guardedLookup(guard), opts.clientCertificate, opts.proxy);
  try {
    return await attemptDelivery(rec.url, signed.rawBody, signed.headers, {
      timeoutMs: opts.timeoutMs ?? PING_TIMEOUT_MS,
      checkTarget: targetGuard(guard),
      dispatcher: agent,
      ...(opts.keepBody ? { keepBody: opts.keepBody } : {}),
    });
  } finally {
    agent.destroy().catch(() => {});
  }
}

/**
 * What a tenant is told of a failed ping or test send: one of a few classes, never the library's
 * code or message (those told an open port from a closed one from a non-HTTP one in detail).
 * Null when it succeeded.
 */
export function failureClass(outcome: Pick<AttemptOutcome, 'ok' | 'status' | 'error'>): string | null {
  if (outcome.ok) return null;
  if (outcome.status !== null) return `HTTP ${outcome.status}`;
  const e = outcome.error ?? '';
  if (/UNPROCESSABLE_TARGET|not public|invalid URL|line break/.test(e)) return 'target not allowed';
  if (/PROXY_/.test(e)) return 'delivery proxy failed';
  if (/ENOTFOUND|EAI_AGAIN|ENODATA|EAI_NONAME/.test(e)) return 'name not resolved';
  if (/ECONNREFUSED/.test(e)) return 'connection refused';
  if (/no full response within|ETIMEDOUT|TIMEOUT/i.test(e)) return 'timed out';
  if (/TLS|SSL|CERT|certificate|EPROTO|self.signed/i.test(e)) return 'TLS failed';
  return 'no HTTP answer';
}
