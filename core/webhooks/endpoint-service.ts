/**
 * The lifecycle of a webhook endpoint: register (audit, record, ping, state), verify again (which
 * also re-enables a DISABLED one), rotate its secret, disable it (its receiver answered 410, or
 * failed every attempt for days), delete.
 * Every write goes to `sluice.endpoints` and returns once this node's view shows it, so a caller
 * that reads right after its write sees it.
 *
 *   const { record, secret, ping } = await createEndpoint(ctx, { tenant_id, actor, url, events, metadata: null });
 */
import { appendAudit } from '../audit/audit-log.ts';
import { writeState, type Context } from '../context.ts';
import { SluiceError } from '../errors.ts';
import { newId, seal } from '../secrets.ts';
import type { AttemptOutcome } from './attempt.ts';
import { sendPing } from './ping.ts';
import { publishEvent } from './publish.ts';
import type { EndpointRecord } from './records.ts';
import { newEndpointSecret } from './signing.ts';
import { assertPublicAddress, checkTargetUrl, type TargetGuardOptions } from './target-guard.ts';

export interface NewEndpoint {
  tenant_id: string;
  /** The client that asked (recorded in the audit log). */
  actor: string;
  url: string;
  events: string[];
  metadata: Record<string, unknown> | null;
}

export interface EndpointOutcome {
  record: EndpointRecord;
  ping: AttemptOutcome;
}

/** The endpoint as the API shows it: never the secret. */
export interface EndpointView {
  id: string;
  url: string;
  events: string[];
  metadata: Record<string, unknown> | null;
  state: EndpointRecord['state'];
  created_at: string;
  updated_at: string;
  verified_at: string | null;
  /** While a rotation's overlap lasts: until when the previous secret still signs. */
  previous_secret_expires_at: string | null;
  /** Why the endpoint is DISABLED (null otherwise). */
  disabled_reason: string | null;
  disabled_at: string | null;
}

const isoOrNull = (ms: number | null | undefined): string | null =>
  ms === null || ms === undefined ? null : new Date(ms).toISOString();

export function endpointView(rec: EndpointRecord, nowMs: number): EndpointView {
  return {
    id: rec.id,
    url: rec.url,
    events: rec.events,
    metadata: rec.metadata,
    state: rec.state,
    created_at: new Date(rec.created_at).toISOString(),
    updated_at: new Date(rec.updated_at).toISOString(),
    verified_at: isoOrNull(rec.verified_at),
    // Shown only while it is in force; the sealed secret itself never leaves.
    previous_secret_expires_at:
      rec.previous_secret_sealed && rec.previous_secret_until && rec.previous_secret_until > nowMs
        ? isoOrNull(rec.previous_secret_until)
        : null,
    disabled_reason: rec.state === 'DISABLED' ? (rec.disabled_reason ?? null) : null,
    disabled_at: rec.state === 'DISABLED' ? isoOrNull(rec.disabled_at) : null,
  };
}

export function targetGuardOptions(ctx: Context): TargetGuardOptions {
  return { allowInsecure: ctx.config.devAllowInsecureTargets };
}

/** Checks the target, writes the endpoint as PENDING, pings it, and makes it ACTIVE on a 2xx. */
export async function createEndpoint(ctx: Context, input: NewEndpoint): Promise<EndpointOutcome & { secret: string }> {
  const guard = targetGuardOptions(ctx);
  try {
    await assertPublicAddress(checkTargetUrl(input.url, guard), guard);
  } catch (err) {
    // A name that does not resolve yet (DNS not set up, or a resolver hiccup) is not a refusal:
    // the endpoint is registered PENDING, and every ping and delivery checks the target again.
    if (!(err instanceof SluiceError && err.extra.reason === 'unresolvable')) throw err;
  }
  const now = ctx.clock.now();
  const secret = newEndpointSecret();
  const record: EndpointRecord = {
    id: newId('ep'),
    tenant_id: input.tenant_id,
    url: input.url,
    events: input.events,
    metadata: input.metadata,
    secret_sealed: seal(ctx.config.masterKey, secret),
    state: 'PENDING',
    created_at: now,
    updated_at: now,
    verified_at: null,
  };
  // The audit entry comes first: the log never misses an endpoint that exists.
  await appendAudit(ctx, {
    tenant_id: record.tenant_id,
    actor: input.actor,
    action: 'endpoint.created',
    subject: record.id,
  });
  await writeEndpoint(ctx, record);
  const ping = await sendPing(record, secret, { ...guard, nowMs: ctx.clock.now() });
  return { record: ping.ok ? await markVerified(ctx, record.id) : record, secret, ping };
}

/**
 * Re-sends the ping; a 2xx makes the endpoint ACTIVE (a DISABLED one too: that is how it is
 * re-enabled, audited as `endpoint.enabled`). A failed ping leaves the state as it was: an ACTIVE
 * endpoint is not held back by one failed manual check (its deliveries retry anyway).
 */
export async function verifyEndpoint(ctx: Context, rec: EndpointRecord, actor: string): Promise<EndpointOutcome> {
  const secrets = ctx.endpoints.signingSecrets(rec.id, ctx.clock.now());
  if (secrets === undefined) throw notFound(rec.id);
  const ping = await sendPing(rec, secrets, { ...targetGuardOptions(ctx), nowMs: ctx.clock.now() });
  if (!ping.ok) return { record: ctx.endpoints.get(rec.id) ?? rec, ping };
  if (ctx.endpoints.get(rec.id)?.state === 'DISABLED') {
    await appendAudit(ctx, {
      tenant_id: rec.tenant_id,
      actor,
      action: 'endpoint.enabled',
      subject: rec.id,
      reason: 'verified again',
    });
  }
  return { record: await markVerified(ctx, rec.id), ping };
}

export const MAX_SECRET_OVERLAP_MS = 7 * 24 * 3600_000;

/**
 * Issues a new secret; the old one keeps signing beside it for `overlapMs` (a rotation during an
 * overlap drops the older of the two at once: two secrets sign at most). Audited.
 */
export async function rotateSecret(
  ctx: Context,
  rec: EndpointRecord,
  actor: string,
  overlapMs: number,
): Promise<{ record: EndpointRecord; secret: string }> {
  const old = ctx.endpoints.secret(rec.id);
  const current = ctx.endpoints.get(rec.id);
  if (old === undefined || !current) throw notFound(rec.id);
  await appendAudit(ctx, {
    tenant_id: rec.tenant_id,
    actor,
    action: 'endpoint.secret_rotated',
    subject: rec.id,
    reason: `previous secret signs for ${Math.round(overlapMs / 1000)} s more`,
  });
  const now = ctx.clock.now();
  const secret = newEndpointSecret();
  const next: EndpointRecord = {
    ...current,
    secret_sealed: seal(ctx.config.masterKey, secret),
    previous_secret_sealed: overlapMs > 0 ? current.secret_sealed : null,
    previous_secret_until: overlapMs > 0 ? now + overlapMs : null,
    updated_at: Math.max(now, current.updated_at + 1),
  };
  await writeEndpoint(ctx, next);
  return { record: next, secret };
}

/** Who disables endpoints on their receivers' answers (the audit log's actor). */
export const DISPATCHER_ACTOR = 'sluice-dispatcher';

/**
 * Moves an endpoint to DISABLED: audited, written, and an `endpoint.disabled` event published to
 * the tenant's other endpoints (the disabled one is matched by nothing any more). Its deliveries
 * still queued go to the DLQ as they come up (the dispatcher's precheck). A no-op when the
 * endpoint is gone or already DISABLED; two dispatchers racing publish one event (its id is
 * derived from the endpoint and its last verification).
 */
export async function disableEndpoint(
  ctx: Context,
  id: string,
  reason: string,
  actor = DISPATCHER_ACTOR,
): Promise<EndpointRecord | undefined> {
  const current = ctx.endpoints.get(id);
  if (!current || current.state === 'DISABLED') return current;
  await appendAudit(ctx, { tenant_id: current.tenant_id, actor, action: 'endpoint.disabled', subject: id, reason });
  const now = ctx.clock.now();
  const next: EndpointRecord = {
    ...current,
    state: 'DISABLED',
    disabled_reason: reason,
    disabled_at: now,
    failing_since: null,
    updated_at: Math.max(now, current.updated_at + 1),
  };
  await writeEndpoint(ctx, next);
  await publishEvent(ctx, {
    tenant_id: current.tenant_id,
    type: 'endpoint.disabled',
    id: `endpoint.disabled:${id}:${current.verified_at ?? current.created_at}`,
    data: { endpoint_id: id, url: current.url, reason, disabled_at: new Date(now).toISOString() },
  });
  return next;
}

/**
 * Writes since when every attempt at the endpoint failed (null: one succeeded). Only for an ACTIVE
 * endpoint, and only when the record says otherwise. The dispatcher calls it rarely (see
 * dispatcher/health.ts): a checkpoint once an outage has lasted, a clear once it ends.
 */
export async function recordFailingSince(ctx: Context, id: string, since: number | null): Promise<void> {
  const current = ctx.endpoints.get(id);
  if (current?.state !== 'ACTIVE' || (current.failing_since ?? null) === since) return;
  // Read-modify-write of the latest record this view holds: only the health field changes.
  await writeEndpoint(ctx, {
    ...current,
    failing_since: since,
    updated_at: Math.max(ctx.clock.now(), current.updated_at + 1),
  });
}

export async function deleteEndpoint(ctx: Context, rec: EndpointRecord, actor: string): Promise<void> {
  await appendAudit(ctx, { tenant_id: rec.tenant_id, actor, action: 'endpoint.deleted', subject: rec.id });
  await writeState(
    ctx,
    ctx.topics.endpoints,
    rec.id,
    null,
    () => ctx.endpoints.get(rec.id) === undefined,
    'endpoint tombstone',
  );
}

async function markVerified(ctx: Context, id: string): Promise<EndpointRecord> {
  // Read the current record again: a delete while the ping was out must not be undone.
  const current = ctx.endpoints.get(id);
  if (!current) throw notFound(id);
  const now = ctx.clock.now();
  const next: EndpointRecord = {
    ...current,
    state: 'ACTIVE',
    verified_at: now,
    failing_since: null,
    disabled_reason: null,
    disabled_at: null,
    updated_at: Math.max(now, current.updated_at + 1),
  };
  await writeEndpoint(ctx, next);
  return next;
}

/** Writes a record and waits until this node's view holds exactly it. */
export async function writeEndpoint(ctx: Context, rec: EndpointRecord): Promise<void> {
  const written = JSON.stringify(rec);
  await writeState(
    ctx,
    ctx.topics.endpoints,
    rec.id,
    rec,
    () => JSON.stringify(ctx.endpoints.get(rec.id)) === written,
    'endpoint record',
  );
}

function notFound(id: string): SluiceError {
  return new SluiceError('NOT_FOUND', `no webhook endpoint ${id}`);
}
