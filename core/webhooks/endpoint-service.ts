/**
 * The lifecycle of a webhook endpoint: register (audit, record, ping, state), update (a new URL is
 * pinged like a registration), verify again (which also re-enables a DISABLED one), rotate its
 * secret, disable it (its receiver answered 410, or failed every attempt for days), delete; and a
 * test send (a signed event sent once, outside the queue, changing nothing).
 * Every write goes to `sluice.endpoints` and returns once this node's view has read it, so a caller
 * that reads right after its write sees it.
 *
 * Writes of one endpoint are a read-modify-write by compare-and-set (`commit`): the record goes out
 * one version above the one it was made from, and every view applies it only on top of that
 * version (EndpointRegistry.apply), so a write from another node that got there first is never
 * overwritten; the refused write is made again from the newer record (or, for a secret rotation
 * that another rotation beat, answered 409 CONFLICT). Within a process the writes of one endpoint
 * also run one at a time (`serialised`), each reading the record its predecessor wrote, so they
 * never refuse each other. Creations in one tenant run one at a time too, so the tenant's endpoint
 * count checked against SLUICE_MAX_ENDPOINTS_PER_TENANT is exact within a node.
 *
 *   const { record, secret, ping } = await createEndpoint(ctx, { tenant_id, actor, url, events, metadata: null });
 */
import { randomUUID } from 'node:crypto';
import { appendAudit, type AuditDeps } from '../audit/audit-log.ts';
import { waitFor, writeState, type Context, type WriteStateDeps } from '../context.ts';
import type { Config } from '../config.ts';
import { invalidRequest, SluiceError, unavailable } from '../errors.ts';
import { newId, seal } from '../secrets.ts';
import type { AttemptOutcome } from '../../outbound/attempt.ts';
import { isPublishableType } from './deliveries.ts';
import { failureClass, type PingOptions, sendEvent, sendPing } from '../../outbound/ping.ts';
import { publishEvent, type PublishDeps } from './publish.ts';
import type { EndpointRecord, EventRecord, Ordering, SigningMode } from './records.ts';
import { newEndpointSecret } from '../../outbound/signing.ts';
import { newSigningKeyPair } from './signing-keys.ts';
import { checkFilter } from './filters/endpoint-filter.ts';
import {
  assertPublicAddress,
  checkTargetUrl,
  normalTargetUrl,
  type TargetGuardOptions,
} from '../../outbound/target-guard.ts';

export interface NewEndpoint {
  tenant_id: string;
  /** The client that asked (recorded in the audit log). */
  actor: string;
  url: string;
  events: string[];
  metadata: Record<string, unknown> | null;
  description?: string | null;
  rate_limit_per_second?: number | null;
  max_in_flight?: number | null;
  ordering?: Ordering;
  /** Which signatures deliveries carry; absent: `hmac`. */
  signing?: SigningMode;
  /** A CEL expression over the event (core/webhooks/filters); null/absent: every event of its types. */
  filter?: string | null;
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
  description: string | null;
  state: EndpointRecord['state'];
  created_at: string;
  updated_at: string;
  verified_at: string | null;
  /** While a rotation's overlap lasts: until when the previous secret still signs. */
  previous_secret_expires_at: string | null;
  /** Why the endpoint is DISABLED (null otherwise). */
  disabled_reason: string | null;
  disabled_at: string | null;
  /** Paused by the tenant. */
  disabled: boolean;
  rate_limit_per_second: number | null;
  max_in_flight: number | null;
  ordering: Ordering;
  signing: SigningMode;
  filter: string | null;
  /** How often the current filter failed to evaluate (no match) and the newest failure; null: never. */
  filter_errors: { count: number; last_at: string; last_error: string } | null;
}

const isoOrNull = (ms: number | null | undefined): string | null =>
  ms === null || ms === undefined ? null : new Date(ms).toISOString();

export function endpointView(rec: EndpointRecord, nowMs: number): EndpointView {
  return {
    id: rec.id,
    url: rec.url,
    events: rec.events,
    metadata: rec.metadata,
    description: rec.description ?? null,
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
    disabled: rec.paused === true,
    rate_limit_per_second: rec.rate_limit_per_second ?? null,
    max_in_flight: rec.max_in_flight ?? null,
    ordering: rec.ordering ?? 'none',
    signing: rec.signing ?? 'hmac',
    filter: rec.filter ?? null,
    filter_errors: rec.filter_errors
      ? {
          count: rec.filter_errors.count,
          last_at: new Date(rec.filter_errors.last_at).toISOString(),
          last_error: rec.filter_errors.last_error,
        }
      : null,
  };
}

export function targetGuardOptions(config: Readonly<Config>): TargetGuardOptions {
  return { allowInsecure: config.devAllowInsecureTargets };
}

/** A ping's or a test send's options: the target guard, the client certificate, the time now. */
function sendOptions(ctx: Pick<Context, 'clock' | 'config'>): PingOptions {
  const clientCertificate = ctx.config.deliveryClientCertificate;
  const proxy = ctx.config.deliveryProxy;
  return { ...targetGuardOptions(ctx.config), clientCertificate, proxy, nowMs: ctx.clock.now() };
}

/**
 * What the endpoint writes read of the process's context: the view and the compare-and-set
 * writes (`commit`), the audit writer, and the configuration and clock of the target guard and pings.
 */
export type EndpointDeps = CommitDeps & AuditDeps & Pick<Context, 'clock' | 'config'>;

/** Checks the target, writes the endpoint as PENDING, pings it, and makes it ACTIVE on a 2xx. */
export async function createEndpoint(
  ctx: EndpointDeps,
  input: NewEndpoint,
): Promise<EndpointOutcome & { secret: string; publicKey: string }> {
  checkFilter(input.filter);
  const guard = targetGuardOptions(ctx.config);
  const url = await checkNewTarget(input.url, guard);
  const secret = newEndpointSecret();
  // Every endpoint gets its key pair, whatever it signs with now: a later PATCH to ed25519 needs no new key.
  const pair = newSigningKeyPair();
  const id = newId('ep');
  // One creation of the tenant's at a time in this process: the count below includes every
  // endpoint created before, so concurrent requests cannot all pass the limit together.
  const record = await serialised(ctx, `tenant ${input.tenant_id}`, async () => {
    const limit = ctx.config.maxEndpointsPerTenant;
    if (ctx.endpoints.countTenant(input.tenant_id, limit) >= limit) throw endpointLimit(limit);
    const now = ctx.clock.now();
    // The audit entry comes first: the log never misses an endpoint that exists.
    await appendAudit(ctx, { tenant_id: input.tenant_id, actor: input.actor, action: 'endpoint.created', subject: id });
    const created = await writeVersion(ctx, undefined, {
      id,
      tenant_id: input.tenant_id,
      url,
      events: input.events,
      metadata: input.metadata,
      description: input.description ?? null,
      ...deliveryPolicy(input),
      ...(input.filter ? { filter: input.filter } : {}),
      secret_sealed: seal(ctx.config.masterKey, secret),
      signing: input.signing ?? 'hmac',
      signing_key_sealed: seal(ctx.config.masterKey, pair.privateKey),
      signing_public_key: pair.publicKey,
      state: 'PENDING',
      created_at: now,
      updated_at: now,
      verified_at: null,
    });
    // A new id has no record to lose to: only a view that could not apply it gets here.
    if (!created) throw unavailable(`webhook endpoint ${id} was not applied; retry`);
    return created;
  });
  const signing = { current: secret, signing: record.signing, keys: [pair.privateKey] };
  const ping = await sendPing(record, signing, sendOptions(ctx));
  const verified = ping.ok ? await markVerified(ctx, record.id, record.url) : record;
  return { record: verified, secret, publicKey: pair.publicKey, ping };
}

/**
 * The SSRF guard of a URL an endpoint is given (422 UNPROCESSABLE_TARGET). A name that does not
 * resolve yet (DNS not set up, or a resolver hiccup) is not a refusal: the endpoint is written,
 * its ping fails (PENDING), and every ping and delivery checks the target again.
 */
async function checkNewTarget(url: string, guard: TargetGuardOptions): Promise<string> {
  const parsed = checkTargetUrl(url, guard);
  try {
    await assertPublicAddress(parsed, guard);
  } catch (err) {
    if (!(err instanceof SluiceError && err.extra.reason === 'unresolvable')) throw err;
  }
  // Stored and shown in the one form every later check and request reads.
  return parsed.href;
}

/** An endpoint's delivery policy fields as stored: only those given, an absent `ordering` as `none`. */
function deliveryPolicy(
  p: Pick<EndpointPatch, 'rate_limit_per_second' | 'max_in_flight' | 'ordering'>,
): Partial<EndpointRecord> {
  const out: Partial<EndpointRecord> = {};
  if (p.rate_limit_per_second !== undefined) out.rate_limit_per_second = p.rate_limit_per_second;
  if (p.max_in_flight !== undefined) out.max_in_flight = p.max_in_flight;
  if (p.ordering !== undefined) out.ordering = p.ordering;
  return out;
}

/** The fields an update may change (the contract's EndpointUpdate); absent ones keep their value. */
export interface EndpointPatch {
  url?: string;
  events?: string[];
  metadata?: Record<string, unknown> | null;
  description?: string | null;
  /** The tenant's pause. */
  disabled?: boolean;
  rate_limit_per_second?: number | null;
  max_in_flight?: number | null;
  ordering?: Ordering;
  signing?: SigningMode;
  /** A new filter; null removes it. */
  filter?: string | null;
}

const pauseWord = (disabled: boolean | undefined) => (disabled ? 'disabled (paused)' : 'disabled (resumed)');

const PATCH_FIELDS = [
  'url',
  'events',
  'metadata',
  'description',
  'disabled',
  'rate_limit_per_second',
  'max_in_flight',
  'ordering',
  'signing',
  'filter',
] as const;

/**
 * Changes the fields `patch` names, by compare-and-set under the endpoint's queue like every write,
 * so an update racing a rotation (or Sluice's health writes) is made again on top of it: both take
 * effect, the secret stays whatever the rotation made it. Audited as `endpoint.updated`.
 *
 * A `url` other than the one the request found is checked like a registration's and pinged first
 * (signed with the endpoint's secrets, which it keeps); the URL is written with the state its ping
 * earned, as for a new endpoint: ACTIVE (verified now; a DISABLED endpoint too, audited
 * `endpoint.enabled`) or PENDING (not verified; its deliveries wait). `ping` is null when no ping
 * was sent (no new URL).
 */
export async function updateEndpoint(
  ctx: EndpointDeps,
  rec: EndpointRecord,
  patch: EndpointPatch,
  actor: string,
): Promise<{ record: EndpointRecord; ping: AttemptOutcome | null }> {
  checkFilter(patch.filter);
  const asked = patch.url === undefined ? undefined : normalTargetUrl(patch.url);
  let url = asked !== undefined && asked !== rec.url ? asked : undefined;
  let ping: AttemptOutcome | null = null;
  if (url !== undefined) {
    const guard = targetGuardOptions(ctx.config);
    url = await checkNewTarget(url, guard);
    const secrets = ctx.endpoints.signingSecrets(rec.id, ctx.clock.now());
    if (secrets === undefined) throw notFound(rec.id);
    ping = await sendPing({ ...rec, url }, secrets, sendOptions(ctx));
  }
  const fields = PATCH_FIELDS.filter((f) => (f === 'url' ? url !== undefined : patch[f] !== undefined));
  const outcome =
    ping === null
      ? ''
      : ping.ok
        ? '; the new URL answered the ping: ACTIVE'
        : `; the ping to the new URL failed (${failureClass(ping)}): PENDING`;
  const record = await serialised(ctx, rec.id, async () => {
    const current = ctx.endpoints.get(rec.id);
    if (!current) throw notFound(rec.id);
    if (fields.length === 0) return current; // only the URL it has: nothing to change
    await appendAudit(ctx, {
      tenant_id: rec.tenant_id,
      actor,
      action: 'endpoint.updated',
      subject: rec.id,
      reason: `changed ${fields.map((f) => (f === 'disabled' ? pauseWord(patch.disabled) : f)).join(', ')}${outcome}`,
    });
    if (ping?.ok) await auditEnabled(ctx, current, actor, 'its new URL answered the ping');
    return commit(ctx, rec.id, (cur) => {
      const now = ctx.clock.now();
      const next: EndpointRecord = { ...cur, updated_at: Math.max(now, cur.updated_at + 1) };
      if (patch.events !== undefined) next.events = patch.events;
      if (patch.metadata !== undefined) next.metadata = patch.metadata;
      if (patch.description !== undefined) next.description = patch.description;
      if (patch.disabled !== undefined) next.paused = patch.disabled;
      Object.assign(next, deliveryPolicy(patch), signingChange(ctx.config, cur, patch.signing));
      if (patch.filter !== undefined && patch.filter !== (cur.filter ?? null)) {
        next.filter = patch.filter;
        next.filter_errors = null; // the count is of the filter in force
      }
      return url !== undefined && ping !== null ? { ...next, url, ...pinged(ping.ok, now) } : next;
    });
  });
  if (!record) throw notFound(rec.id);
  return { record, ping };
}

/**
 * A change of `signing`: the mode, and a key pair for an endpoint made before key pairs were (its
 * public key is then found at the endpoint's JWKS).
 */
function signingChange(
  config: Readonly<Config>,
  cur: EndpointRecord,
  signing: SigningMode | undefined,
): Partial<EndpointRecord> {
  if (signing === undefined) return {};
  if (signing === 'hmac' || cur.signing_key_sealed) return { signing };
  const pair = newSigningKeyPair();
  return {
    signing,
    signing_key_sealed: seal(config.masterKey, pair.privateKey),
    signing_public_key: pair.publicKey,
  };
}

/** How long a test send's attempt may take (real time), as a delivery's; the answer comes within 12 s. */
export const TEST_SEND_TIMEOUT_MS = 10_000;
/** How much of the receiver's body a test send answers with. */
export const TEST_SEND_BODY_BYTES = 1024;

/** What a test send asks for (the contract's EndpointTestSend). */
export interface TestSend {
  type?: string;
  data?: unknown;
}

/** The contract's EndpointTestResult. */
export interface TestSendResult {
  ok: boolean;
  status: number | null;
  latency_ms: number;
  body: string | null;
  error: string | null;
}

/** What a test send reads of the process's context. */
export type TestSendDeps = Pick<Context, 'clock' | 'config' | 'endpoints'> & AuditDeps;

/**
 * Sends one signed event to the endpoint now, whatever its state: a `ping` (data `{endpoint_id}`)
 * unless `type` names a type a tenant may publish. Outside the queue: no delivery, no attempt
 * record, no retry, no change to the endpoint. Audited (`endpoint.test_sent`) before it is sent.
 */
export async function sendTestEvent(
  ctx: TestSendDeps,
  rec: EndpointRecord,
  input: TestSend,
  actor: string,
): Promise<TestSendResult> {
  const type = input.type ?? 'ping';
  // The contract refuses these already; a receiver trusts Sluice's own kinds as Sluice's word.
  if (type !== 'ping' && !isPublishableType(type))
    throw invalidRequest([{ path: '$.type', message: 'is reserved or not an event type' }]);
  const secrets = ctx.endpoints.signingSecrets(rec.id, ctx.clock.now());
  if (secrets === undefined) throw notFound(rec.id);
  const now = ctx.clock.now();
  const data = input.data !== undefined ? input.data : type === 'ping' ? { endpoint_id: rec.id } : null;
  const event: EventRecord = { id: newId('evt'), type, tenant_id: rec.tenant_id, data, created_at: now };
  await appendAudit(ctx, {
    tenant_id: rec.tenant_id,
    actor,
    action: 'endpoint.test_sent',
    subject: rec.id,
    reason: `a signed ${type} event ${event.id}`,
  });
  const sent = await sendEvent(rec, secrets, event, {
    ...sendOptions(ctx),
    timeoutMs: TEST_SEND_TIMEOUT_MS,
    keepBody: TEST_SEND_BODY_BYTES,
  });
  return {
    ok: sent.ok,
    status: sent.status,
    latency_ms: Math.max(0, Math.round(sent.durationMs)),
    body: sent.body ? sent.body.toString('utf8') : null,
    error: sent.error,
  };
}

/** 409 ENDPOINT_LIMIT: the tenant has as many endpoints as it may. */
function endpointLimit(limit: number): SluiceError {
  return new SluiceError(
    'ENDPOINT_LIMIT',
    `this tenant already has ${limit} webhook endpoints, the most allowed; delete one before registering another`,
    { max_endpoints: limit },
  );
}

/**
 * Re-sends the ping; a 2xx makes the endpoint ACTIVE (a DISABLED one too: that is how it is
 * re-enabled, audited as `endpoint.enabled`). A failed ping leaves the state as it was: an ACTIVE
 * endpoint is not held back by one failed manual check (its deliveries retry anyway).
 */
export async function verifyEndpoint(ctx: EndpointDeps, rec: EndpointRecord, actor: string): Promise<EndpointOutcome> {
  const secrets = ctx.endpoints.signingSecrets(rec.id, ctx.clock.now());
  if (secrets === undefined) throw notFound(rec.id);
  const ping = await sendPing(rec, secrets, sendOptions(ctx));
  if (!ping.ok) return { record: ctx.endpoints.get(rec.id) ?? rec, ping };
  return { record: await markVerified(ctx, rec.id, rec.url, actor), ping };
}

export const MAX_SECRET_OVERLAP_MS = 7 * 24 * 3600_000;

/**
 * Issues a new secret; the old one keeps signing beside it for `overlapMs` (a rotation during an
 * overlap drops the older of the two at once: two secrets sign at most). Audited.
 */
export async function rotateSecret(
  ctx: EndpointDeps,
  rec: EndpointRecord,
  actor: string,
  overlapMs: number,
): Promise<{ record: EndpointRecord; secret: string; publicKey: string }> {
  // `rec` is the endpoint as the request found it: the rotation replaces that secret or none. A
  // rotation that another one (of this node or another) beat would drop the winner's secret at
  // once (two secrets sign at most) after the winner's caller was told it signs: 409 instead.
  const replaces = rec.secret_sealed;
  const unchanged = (cur: EndpointRecord) => {
    if (cur.secret_sealed !== replaces) throw rotationConflict(rec.id);
  };
  return serialised(ctx, rec.id, async () => {
    const current = ctx.endpoints.get(rec.id);
    if (!current) throw notFound(rec.id);
    unchanged(current);
    await appendAudit(ctx, {
      tenant_id: rec.tenant_id,
      actor,
      action: 'endpoint.secret_rotated',
      subject: rec.id,
      reason: `previous secret signs for ${Math.round(overlapMs / 1000)} s more`,
    });
    const secret = newEndpointSecret();
    const sealed = seal(ctx.config.masterKey, secret);
    // The key pair turns over with the secret, under the same overlap (an endpoint without one gets one).
    const pair = newSigningKeyPair();
    const sealedKey = seal(ctx.config.masterKey, pair.privateKey);
    const record = await commit(ctx, rec.id, (cur) => {
      unchanged(cur);
      const now = ctx.clock.now();
      const keep = overlapMs > 0;
      return {
        ...cur,
        secret_sealed: sealed,
        previous_secret_sealed: keep ? cur.secret_sealed : null,
        previous_secret_until: keep ? now + overlapMs : null,
        signing_key_sealed: sealedKey,
        signing_public_key: pair.publicKey,
        previous_signing_key_sealed: keep ? (cur.signing_key_sealed ?? null) : null,
        previous_signing_public_key: keep ? (cur.signing_public_key ?? null) : null,
        updated_at: Math.max(now, cur.updated_at + 1),
      };
    }).catch(async (err: unknown) => {
      // Another node's rotation won after this one was audited: the log says it came to nothing.
      if (err instanceof SluiceError && err.code === 'CONFLICT')
        await appendAudit(ctx, {
          tenant_id: rec.tenant_id,
          actor,
          action: 'endpoint.secret_rotation_refused',
          subject: rec.id,
          reason: 'another rotation of the endpoint was applied first; this one changed nothing (409)',
        });
      throw err;
    });
    if (!record) throw notFound(rec.id);
    return { record, secret, publicKey: pair.publicKey };
  });
}

function rotationConflict(id: string): SluiceError {
  return new SluiceError(
    'CONFLICT',
    `the secret of webhook endpoint ${id} was rotated by another request since this one read it; ` +
      'that rotation stands and its secret signs. Rotate again to replace it',
  );
}

/** Who disables endpoints on their receivers' answers (the audit log's actor). */
export const DISPATCHER_ACTOR = 'sluice-dispatcher';

/** What disabling an endpoint reads of the process's context: its writes', and publishing's. */
export type DisableDeps = CommitDeps & AuditDeps & PublishDeps;

/**
 * Moves an endpoint to DISABLED: audited, written, and an `endpoint.disabled` event published to
 * the tenant's other endpoints (the disabled one is matched by nothing any more). Its deliveries
 * still queued go to the DLQ as they come up (the dispatcher's precheck). A no-op when the
 * endpoint is gone or already DISABLED; two dispatchers racing publish one event (its id is
 * derived from the endpoint and its last verification).
 */
export async function disableEndpoint(
  ctx: DisableDeps,
  id: string,
  reason: string,
  actor = DISPATCHER_ACTOR,
  url?: string,
): Promise<EndpointRecord | undefined> {
  // `url`: the URL whose answers led here; a URL changed since then is not judged by them.
  const stale = (cur: EndpointRecord) => url !== undefined && cur.url !== url;
  const done = await serialised(ctx, id, async () => {
    const current = ctx.endpoints.get(id);
    if (!current || current.state === 'DISABLED' || stale(current)) return { record: current, from: undefined };
    await appendAudit(ctx, { tenant_id: current.tenant_id, actor, action: 'endpoint.disabled', subject: id, reason });
    let from: EndpointRecord | undefined;
    const record = await commit(ctx, id, (cur) => {
      from = cur.state === 'DISABLED' || stale(cur) ? undefined : cur;
      if (!from) return null; // another node disabled it first: it sends the event
      const now = ctx.clock.now();
      return {
        ...cur,
        state: 'DISABLED',
        disabled_reason: reason,
        disabled_at: now,
        // Random, so no publisher can know it beforehand and send a decoy under it that a receiver
        // deduplicating on ids would take for the notice; kept here, so it is one id for the one
        // writer whose disabling took effect (another writer's commit finds it DISABLED: no notice).
        disabled_event_id: newId('evt'),
        failing_since: null,
        updated_at: Math.max(now, cur.updated_at + 1),
      };
    });
    return { record, from };
  });
  const { record, from } = done;
  if (!record || !from) return record;
  await publishEvent(ctx, {
    tenant_id: from.tenant_id,
    type: 'endpoint.disabled',
    id: record.disabled_event_id ?? newId('evt'),
    // Sluice's own namespace: no publisher can claim this id first and so suppress the event.
    origin: 'sluice',
    data: {
      endpoint_id: id,
      url: from.url,
      reason,
      disabled_at: new Date(record.disabled_at ?? ctx.clock.now()).toISOString(),
    },
  });
  return record;
}

/** What the dispatcher's writes of an endpoint's health read of the process's context. */
export type HealthWriteDeps = CommitDeps & Pick<Context, 'clock'>;

/**
 * Writes since when every attempt at the endpoint failed (null: one succeeded). Only for an ACTIVE
 * endpoint still at the URL the attempts went to, and only when the record says otherwise. The
 * dispatcher calls it rarely (see dispatcher/health.ts): a checkpoint once an outage has lasted, a
 * clear once it ends.
 */
export async function recordFailingSince(
  ctx: HealthWriteDeps,
  id: string,
  since: number | null,
  url?: string,
): Promise<void> {
  // `url`: the URL the attempts went to; a URL changed since then starts with a clean record.
  const unchanged = (cur: EndpointRecord | undefined) =>
    cur?.state !== 'ACTIVE' || (url !== undefined && cur.url !== url) || (cur.failing_since ?? null) === since;
  if (unchanged(ctx.endpoints.get(id))) return;
  // Read-modify-write of the latest record: only the health field changes.
  await serialised(ctx, id, () =>
    commit(ctx, id, (cur) =>
      unchanged(cur)
        ? null
        : { ...cur, failing_since: since, updated_at: Math.max(ctx.clock.now(), cur.updated_at + 1) },
    ),
  );
}

/**
 * Adds what a fan-out saw of the endpoint's filter failing (`count` more failures, the newest
 * `last`) to its record, only while `filter` is still the one in force (a filter changed since
 * starts from none). The fan-out calls it rarely: see dispatcher/filter-errors.ts.
 */
export async function recordFilterErrors(
  ctx: HealthWriteDeps,
  id: string,
  filter: string,
  count: number,
  last: { at: number; error: string },
): Promise<void> {
  const stale = (cur: EndpointRecord | undefined) => cur === undefined || (cur.filter ?? null) !== filter;
  if (stale(ctx.endpoints.get(id))) return;
  await serialised(ctx, id, () =>
    commit(ctx, id, (cur) => {
      if (stale(cur)) return null;
      const held = cur.filter_errors;
      const newest = held && held.last_at > last.at ? held : { last_at: last.at, last_error: last.error };
      return {
        ...cur,
        filter_errors: { count: (held?.count ?? 0) + count, last_at: newest.last_at, last_error: newest.last_error },
        updated_at: Math.max(ctx.clock.now(), cur.updated_at + 1),
      };
    }),
  );
}

/** What deleting an endpoint reads of the process's context. */
export type DeleteDeps = Pick<Context, 'endpoints' | 'topics'> & AuditDeps & WriteStateDeps;

export async function deleteEndpoint(ctx: DeleteDeps, rec: EndpointRecord, actor: string): Promise<void> {
  await serialised(ctx, rec.id, async () => {
    await appendAudit(ctx, { tenant_id: rec.tenant_id, actor, action: 'endpoint.deleted', subject: rec.id });
    await writeState(
      ctx,
      ctx.topics.endpoints,
      rec.id,
      null,
      () => ctx.endpoints.get(rec.id) === undefined,
      'endpoint tombstone',
    );
  });
}

/**
 * Makes the endpoint ACTIVE after a 2xx ping (a DISABLED one too: audited `endpoint.enabled`).
 * Reads the current record under the endpoint's queue: a delete while the ping was out is not undone.
 */
/**
 * What a ping's outcome makes of an endpoint: ACTIVE and verified now, or PENDING and not verified
 * (as a new one); either way an outage it was in and a disabling are over.
 */
function pinged(
  ok: boolean,
  now: number,
): Pick<
  EndpointRecord,
  'state' | 'verified_at' | 'failing_since' | 'disabled_reason' | 'disabled_at' | 'disabled_event_id'
> {
  return {
    state: ok ? 'ACTIVE' : 'PENDING',
    verified_at: ok ? now : null,
    failing_since: null,
    disabled_reason: null,
    disabled_at: null,
    disabled_event_id: null,
  };
}

/** A DISABLED endpoint that a ping brought back is audited `endpoint.enabled`; any other, nothing. */
async function auditEnabled(ctx: AuditDeps, current: EndpointRecord, actor: string, reason: string): Promise<void> {
  if (current.state !== 'DISABLED') return;
  await appendAudit(ctx, {
    tenant_id: current.tenant_id,
    actor,
    action: 'endpoint.enabled',
    subject: current.id,
    reason,
  });
}

/**
 * `url` is the URL the ping went to: its answer says nothing of another, so when the endpoint's URL
 * changed while the ping was out (a PATCH), nothing is written and the current record is answered.
 */
async function markVerified(
  ctx: CommitDeps & AuditDeps & Pick<Context, 'clock'>,
  id: string,
  url: string,
  actor?: string,
): Promise<EndpointRecord> {
  const record = await serialised(ctx, id, async () => {
    const current = ctx.endpoints.get(id);
    if (!current) throw notFound(id);
    if (current.url !== url) return current;
    if (actor !== undefined) await auditEnabled(ctx, current, actor, 'verified again');
    return commit(ctx, id, (cur) => {
      if (cur.url !== url) return null;
      const now = ctx.clock.now();
      return { ...cur, ...pinged(true, now), updated_at: Math.max(now, cur.updated_at + 1) };
    });
  });
  if (!record) throw notFound(id);
  return record;
}

/** This process's queues of work per endpoint (and per tenant, for creations): see `serialised`. */
const queues = new WeakMap<object, Map<string, Promise<void>>>();

/**
 * Runs `work` once the work queued before it under `key` has finished (succeeded or failed), so
 * the writes of one endpoint in this process run one at a time, each reading the record the one
 * before it left in the view. Per context (`ctx` is only the key of its queues): two nodes in one
 * process are two writers, as in two.
 */
export function serialised<T>(ctx: object, key: string, work: () => Promise<T>): Promise<T> {
  const byKey = queues.get(ctx) ?? new Map<string, Promise<void>>();
  queues.set(ctx, byKey);
  const run = (byKey.get(key) ?? Promise.resolve()).then(work);
  const settled = run.then(
    () => {},
    () => {},
  );
  byKey.set(key, settled);
  void settled.then(() => {
    if (byKey.get(key) === settled) byKey.delete(key);
  });
  return run;
}

/**
 * How long a write that other nodes' writes keep beating is made again before it answers 503 (real
 * time). Each node writes an endpoint one write at a time, so another node's run of writes ends.
 */
export const COMMIT_TIMEOUT_MS = 10_000;

/** What the compare-and-set writes of an endpoint read of the process's context. */
export type CommitDeps = Pick<Context, 'changes' | 'endpoints' | 'producer' | 'topics'>;

/**
 * Read-modify-write of one endpoint by compare-and-set: `change` makes the next record from the
 * one the view holds (null: nothing to write; it may throw, e.g. 409), which goes out one version
 * above it. When another node's write of the same version was applied first, ours is refused by
 * every view, and `change` runs again on the newer record. Answers the record written, the current
 * one when `change` wrote nothing, or undefined when the endpoint is gone. Call it under the
 * endpoint's queue (`serialised`): this process then never races itself.
 */
async function commit(
  ctx: CommitDeps,
  id: string,
  change: (current: EndpointRecord) => EndpointRecord | null,
): Promise<EndpointRecord | undefined> {
  let refused = false;
  const deadline = Date.now() + COMMIT_TIMEOUT_MS;
  try {
    for (let round = 1; ; round++) {
      const current = ctx.endpoints.get(id);
      if (!current) return undefined;
      const next = change(current);
      if (next === null) return current;
      const written = await writeVersion(ctx, current, next);
      if (written) {
        refused = false;
        return written;
      }
      refused = true;
      if (Date.now() >= deadline)
        throw unavailable(`webhook endpoint ${id} is being written by other nodes at once; retry shortly`);
      // A moment's random pause: two nodes that keep sending at the same instant stop tying.
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * Math.min(round, 10)));
    }
  } finally {
    if (refused) await resendCurrent(ctx, id);
  }
}

/**
 * Sends `next` one version above `base` (undefined: a new endpoint, version 1) and waits until this
 * node's view has read it: answers the record as written when the view applied it, null when the
 * view refused it (another write of that version got there first). Never waits for the record to
 * still be there: a later write may already have replaced it.
 */
async function writeVersion(
  ctx: CommitDeps,
  base: EndpointRecord | undefined,
  next: EndpointRecord,
): Promise<EndpointRecord | null> {
  const rec: EndpointRecord = { ...next, version: (base?.version ?? 0) + 1, write_id: randomUUID() };
  const writeId = rec.write_id!;
  ctx.endpoints.expect(writeId);
  try {
    await ctx.producer.sendJson(ctx.topics.endpoints, rec.id, rec);
    await waitFor(ctx.changes, () => ctx.endpoints.settled(writeId) !== undefined, 10_000, 'endpoint record');
    return ctx.endpoints.settled(writeId) ? rec : null;
  } finally {
    ctx.endpoints.forget(writeId);
  }
}

/**
 * After a refused write, sends the record every view applied again, unchanged (the same version and
 * write id: views take it as a re-send). The topic is compacted, and compaction keeps only a key's
 * last record: a view rebuilt from scratch must not find a refused one there and start from it.
 * Best effort (a crash before it leaves that until the endpoint's next write).
 */
async function resendCurrent(ctx: Pick<Context, 'endpoints' | 'producer' | 'topics'>, id: string): Promise<void> {
  const current = ctx.endpoints.get(id);
  if (current) await ctx.producer.sendJson(ctx.topics.endpoints, id, current).catch(() => {});
}

function notFound(id: string): SluiceError {
  return new SluiceError('NOT_FOUND', `no webhook endpoint ${id}`);
}
