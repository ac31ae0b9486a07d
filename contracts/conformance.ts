/**
 * Compile-time guard that the body types the code uses agree with the contract's schemas
 * (contracts/generated/types.ts, generated from openapi.yaml). `tsc --noEmit` in `npm test`
 * fails when either side drifts.
 */
import type { components } from './generated/types.ts';
import type { IssuedToken } from '../core/tokens/token-service.ts';
import type { DlqEntry, EventRecord, WebhookBody, EndpointState } from '../core/webhooks/records.ts';
import type { EndpointView } from '../core/webhooks/endpoint-service.ts';
import type { FieldError } from '../core/errors.ts';
import type { AuditEntry } from '../core/audit/entry.ts';
import type { KNOWN_EVENT_KINDS } from '../core/webhooks/records.ts';

type S = components['schemas'];

/** True when A and B have the same keys and each can be assigned to the other where the contract is wider. */
type SameKeys<A, B> = [keyof A] extends [keyof B] ? ([keyof B] extends [keyof A] ? true : false) : false;
type Assignable<From, To> = [From] extends [To] ? true : false;

export const CONFORMANCE: Record<string, true> = {
  // The code's token body is narrower in the contract (expires_in is the constant 900).
  tokenKeys: true as SameKeys<IssuedToken, S['TokenResponse']>,
  tokenNarrows: true as Assignable<S['TokenResponse'], IssuedToken>,
  webhookBody: true as Assignable<WebhookBody, S['WebhookBody']>,
  webhookBodyKeys: true as SameKeys<WebhookBody, S['WebhookBody']>,
  dlqEntry: true as Assignable<DlqEntry, S['DlqEntry']>,
  dlqEntryKeys: true as SameKeys<DlqEntry, S['DlqEntry']>,
  eventRecord: true as Assignable<EventRecord, S['EventRecord']>,
  endpointView: true as Assignable<EndpointView, S['Endpoint']>,
  endpointViewKeys: true as SameKeys<EndpointView, S['Endpoint']>,
  endpointState: true as Assignable<EndpointState, S['EndpointState']> & Assignable<S['EndpointState'], EndpointState>,
  fieldError: true as Assignable<FieldError, S['FieldError']>,
  auditEntry: true as Assignable<AuditEntry, S['AuditEntry']>,
  auditEntryKeys: true as SameKeys<AuditEntry, S['AuditEntry']>,
  // Every entry links to one before it (64 zeros for a tenant's first): prev_hash is never null.
  auditPrevHash: true as Assignable<S['AuditEntry']['prev_hash'], AuditEntry['prev_hash']>,
  eventKinds: true as Assignable<(typeof KNOWN_EVENT_KINDS)[number], S['EventKind']> &
    Assignable<S['EventKind'], (typeof KNOWN_EVENT_KINDS)[number]>,
};
