/**
 * The verification ping: a signed `ping` event sent to an endpoint at registration and
 * on re-verification. A 2xx within 5 seconds verifies the endpoint. The 5 s is a network timeout
 * and is never divided by SLUICE_TIME_SCALE.
 *
 *   const outcome = await sendPing(rec, secret, { allowInsecure, nowMs: clock.now() });
 *   if (outcome.ok) ... // ACTIVE
 */
import { newId } from '../secrets.ts';
import { attemptDelivery, createDeliveryAgent, type AttemptOutcome } from './attempt.ts';
import type { EndpointRecord, EventRecord } from './records.ts';
import { signDelivery, type SigningSecrets } from './signing.ts';
import { guardedLookup, targetGuard, type TargetGuardOptions } from './target-guard.ts';

export const PING_TIMEOUT_MS = 5000;

export interface PingOptions extends TargetGuardOptions {
  nowMs: number;
  timeoutMs?: number;
}

export function pingEvent(rec: EndpointRecord, nowMs: number): EventRecord {
  return { id: newId('evt'), type: 'ping', tenant_id: rec.tenant_id, data: { endpoint_id: rec.id }, created_at: nowMs };
}

export async function sendPing(
  rec: EndpointRecord,
  secret: string | SigningSecrets,
  opts: PingOptions,
): Promise<AttemptOutcome> {
  const guard: TargetGuardOptions = { allowInsecure: opts.allowInsecure, lookup: opts.lookup };
  const signed = signDelivery(secret, pingEvent(rec, opts.nowMs), 1, opts.nowMs);
  // An agent of its own: a ping is a one-off, and destroying the agent afterwards drops a socket
  // that a receiver which never answers would otherwise keep open.
  const agent = createDeliveryAgent(1, guardedLookup(guard));
  try {
    return await attemptDelivery(rec.url, signed.rawBody, signed.headers, {
      timeoutMs: opts.timeoutMs ?? PING_TIMEOUT_MS,
      checkTarget: targetGuard(guard),
      dispatcher: agent,
    });
  } finally {
    agent.destroy().catch(() => {});
  }
}
