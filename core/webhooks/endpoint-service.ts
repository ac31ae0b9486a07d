/**
 * The lifecycle of a webhook endpoint: register (audit, record, ping, state), verify again, delete.
 * Every write goes to `sluice.endpoints` and returns once this node's view shows it, so a caller
 * that reads right after its write sees it.
 *
 *   const { record, secret, ping } = await createEndpoint(ctx, { tenant_id, actor, url, events, metadata: null });
 */
import { appendAudit } from '../audit/audit-log.ts';
import { writeState, type Context } from '../context.ts';
import { SluiceError } from '../errors.ts';
import { newId, newSecret, seal } from '../secrets.ts';
import type { AttemptOutcome } from './attempt.ts';
import { sendPing } from './ping.ts';
import type { EndpointRecord } from './records.ts';
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
}

export function endpointView(rec: EndpointRecord): EndpointView {
  return {
    id: rec.id,
    url: rec.url,
    events: rec.events,
    metadata: rec.metadata,
    state: rec.state,
    created_at: new Date(rec.created_at).toISOString(),
    updated_at: new Date(rec.updated_at).toISOString(),
    verified_at: rec.verified_at === null ? null : new Date(rec.verified_at).toISOString(),
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
  const secret = newSecret('whsec');
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
  await appendAudit(ctx, { tenant_id: record.tenant_id, actor: input.actor, action: 'endpoint.created', subject: record.id });
  await writeEndpoint(ctx, record);
  const ping = await sendPing(record, secret, { ...guard, nowMs: ctx.clock.now() });
  return { record: ping.ok ? await markVerified(ctx, record.id) : record, secret, ping };
}

/**
 * Re-sends the ping; a 2xx makes the endpoint ACTIVE. A failed ping leaves the state as it was:
 * an ACTIVE endpoint is not held back by one failed manual check (its deliveries retry anyway).
 */
export async function verifyEndpoint(ctx: Context, rec: EndpointRecord): Promise<EndpointOutcome> {
  const secret = ctx.endpoints.secret(rec.id);
  if (secret === undefined) throw notFound(rec.id);
  const ping = await sendPing(rec, secret, { ...targetGuardOptions(ctx), nowMs: ctx.clock.now() });
  return { record: ping.ok ? await markVerified(ctx, rec.id) : (ctx.endpoints.get(rec.id) ?? rec), ping };
}

export async function deleteEndpoint(ctx: Context, rec: EndpointRecord, actor: string): Promise<void> {
  await appendAudit(ctx, { tenant_id: rec.tenant_id, actor, action: 'endpoint.deleted', subject: rec.id });
  await writeState(ctx, ctx.topics.endpoints, rec.id, null, () => ctx.endpoints.get(rec.id) === undefined, 'endpoint tombstone');
}

async function markVerified(ctx: Context, id: string): Promise<EndpointRecord> {
  // Read the current record again: a delete while the ping was out must not be undone.
  const current = ctx.endpoints.get(id);
  if (!current) throw notFound(id);
  const now = ctx.clock.now();
  const next: EndpointRecord = { ...current, state: 'ACTIVE', verified_at: now, updated_at: Math.max(now, current.updated_at + 1) };
  await writeEndpoint(ctx, next);
  return next;
}

/** Writes a record and waits until this node's view holds exactly it. */
export async function writeEndpoint(ctx: Context, rec: EndpointRecord): Promise<void> {
  const written = JSON.stringify(rec);
  await writeState(ctx, ctx.topics.endpoints, rec.id, rec, () => JSON.stringify(ctx.endpoints.get(rec.id)) === written, 'endpoint record');
}

function notFound(id: string): SluiceError {
  return new SluiceError('NOT_FOUND', `no webhook endpoint ${id}`);
}
