/**
 * The records of webhook delivery as they travel through Kafka. Shared by the ingress (which
 * writes endpoints and events and reads the DLQ view) and the dispatcher (which delivers).
 */

/**
 * PENDING: not verified yet; ACTIVE: delivering; DISABLED: its receiver answered 410 or failed every attempt for days.
 */
export type EndpointState = 'PENDING' | 'ACTIVE' | 'DISABLED';

export type Ordering = 'none' | 'key';

/** `signing` of an endpoint: which signatures its deliveries carry (issue 35). */
export type SigningMode = 'hmac' | 'ed25519' | 'both';

/** `sluice.endpoints`, key = id (compacted; a tombstone deletes). */
export interface EndpointRecord {
  id: string; // ep_…
  tenant_id: string;
  url: string;
  /** Event kinds, or ['*'] for all. */
  events: string[];
  metadata: Record<string, unknown> | null;
  /** A note for people; absent from records written before it existed (null). */
  description?: string | null;
  /**
   * The per-endpoint HMAC secret, sealed with the master key
   * (core/secrets.ts seal/unseal): the dispatcher needs it in clear to sign.
   */
  secret_sealed: string;
  state: EndpointState;
  created_at: number; // ms
  updated_at: number; // ms
  verified_at: number | null; // ms
  /** After a rotation: the previous secret, sealed, still signing beside the new one until `previous_secret_until`. */
  previous_secret_sealed?: string | null;
  previous_secret_until?: number | null; // ms
  /** Which signatures deliveries carry (core/webhooks/signing-keys.ts); absent: `hmac`. */
  signing?: SigningMode;
  /** The ed25519 private key `whsk_…`, sealed like `secret_sealed`; absent from records made before issue 35. */
  signing_key_sealed?: string | null;
  /** Its public key, `whpk_…` (public: published at the endpoint's JWKS). */
  signing_public_key?: string | null;
  /** After a rotation: the previous key pair, signing beside the new one until `previous_secret_until`. */
  previous_signing_key_sealed?: string | null;
  previous_signing_public_key?: string | null;
  /** Since when every attempt at this endpoint failed (ms); null after a success. */
  failing_since?: number | null;
  /** Paused by its tenant (`disabled: true`): nothing is attempted, its deliveries wait on the hold rung. */
  paused?: boolean;
  /** Deliveries a second from the whole cluster; null/absent: no limit. */
  rate_limit_per_second?: number | null;
  /** Requests open at once, cluster-wide; null/absent: the dispatcher's own adaptive limit. */
  max_in_flight?: number | null;
  /** `key`: events sharing an ordering key arrive in publish order; absent: `none`. */
  ordering?: Ordering;
  /** A CEL expression over the event (core/webhooks/filters): it is delivered only when true; null/absent: none. */
  filter?: string | null;
  /** Evaluations of the current filter that failed (no match), as the fan-outs reported them; null: none. */
  filter_errors?: FilterErrors | null;
  /** Why and when it became DISABLED. */
  disabled_reason?: string | null;
  disabled_at?: number | null; // ms
  /** The id of the `endpoint.disabled` notice of this disabling: random, chosen by the writer that disabled it. */
  disabled_event_id?: string | null;
  /**
   * One more than the version of the record this one was made from (1: created). The view applies
   * a record only on top of the version it was made from (compare-and-set, EndpointRegistry.apply);
   * absent from records written before versions, which apply as they did (last write wins).
   */
  version?: number;
  /** A nonce per write: how its writer learns whether the view applied its record or refused it. */
  write_id?: string;
}

/** What the fan-outs reported of an endpoint's filter failing: how often, and the newest failure. */
export interface FilterErrors {
  count: number;
  last_at: number; // ms
  last_error: string;
}

/** `sluice.events`, key = tenant_id: an event published for a tenant. */
export interface EventRecord {
  id: string; // evt_… or the publisher's own id
  tenant_id: string;
  type: string;
  data: unknown;
  created_at: number; // ms
  /**
   * How far the publishing node had read `sluice.endpoints` (its next offset) when it matched the
   * event: the fan-out waits until its own view has read as far, so an endpoint registered before
   * the publish is never missed by a dispatcher whose view lags. Absent from direct producers.
   */
  endpoints_at?: number;
  /** The publisher's ordering key: endpoints with `ordering: key` get a key's events in order. */
  ordering_key?: string;
}

/** `sluice.deliveries` and `sluice.retry.<rung>`, key = delivery_id: one (event, endpoint) pair. */
export interface DeliveryRecord {
  delivery_id: string; // dlv_…
  endpoint_id: string;
  tenant_id: string;
  event: EventRecord;
  /** The attempt this record asks for (1-based). */
  attempt: number;
  /** When attempt 1 ran (ms), null before it. */
  first_attempt_at: number | null;
  /** Not before this time (ms); the retry rungs hold a record until it is due. */
  due_at: number;
  last_status: number | null;
  last_error: string | null;
  last_attempt_at: number | null;
  /**
   * How far the fan-out's view had read `sluice.endpoints`: a lagging
   * dispatcher waits for it before calling the endpoint gone.
   */
  endpoints_at?: number;
  /** The recovery job that re-sent it (core/webhooks/recovery.ts): its attempts count in the job's progress. */
  recovery?: string;
}

/** `sluice.dlq`, key = tenant_id: a dead-lettered delivery, as `GET /v1/webhooks/dlq` lists it. */
export interface DlqEntry {
  id: string; // dlq_…
  event_id: string;
  endpoint_id: string;
  tenant_id: string;
  event_type: string;
  attempts: number;
  last_status: number | null;
  last_error: string | null;
  first_attempt_at: string; // ISO 8601
  last_attempt_at: string;
  dead_lettered_at: string;
  expires_at: string;
  payload: EventRecord;
}

/** Also on `sluice.dlq`: marks an entry as replayed (gone from the list). */
export interface DlqReplayMarker {
  kind: 'replayed';
  id: string;
  tenant_id: string;
  replayed_at: string;
}

/**
 * The JSON body every delivery carries; `timestamp` (unix seconds)
 * equals the X-Service-Timestamp header, so the signature pins it.
 */
export interface WebhookBody {
  id: string;
  type: string;
  tenant_id: string;
  created_at: string; // ISO 8601
  timestamp: number; // unix seconds, equals X-Service-Timestamp
  data: unknown;
}

export const KNOWN_EVENT_KINDS = [
  'ping',
  'inference.completed',
  'inference.failed',
  'pipeline.started',
  'pipeline.completed',
  'pipeline.failed',
  'telemetry.exported',
  'credential.rotated',
  'credential.revoked',
  'endpoint.disabled',
] as const;
