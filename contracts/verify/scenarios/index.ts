/**
 * What each operation does right: generated valid inputs are accepted, read-after-create works,
 * delete leads to 404, paging and filters answer in shape. Keyed by operationId, one file per tag
 * of the contract (the webhooks tag by what it acts on); an operation of the contract without a
 * scenario is itself a failure, so the verifier grows with the contract.
 */
import { ATTEMPT_SCENARIOS } from './webhook-attempts.ts';
import { AUDIT_SCENARIOS } from './audit.ts';
import { AUTH_SCENARIOS } from './auth.ts';
import type { Scenario } from './common.ts';
import { DATA_PLANE_SCENARIOS } from './data-plane.ts';
import { DLQ_SCENARIOS } from './webhook-dlq.ts';
import { ENDPOINT_SCENARIOS } from './webhook-endpoints.ts';
import { EVENT_SCENARIOS } from './webhook-events.ts';
import { META_SCENARIOS } from './meta.ts';

export { validBody, type Scenario } from './common.ts';

export const SCENARIOS: Record<string, Scenario> = {
  ...META_SCENARIOS,
  ...AUTH_SCENARIOS,
  ...ENDPOINT_SCENARIOS,
  ...EVENT_SCENARIOS,
  ...ATTEMPT_SCENARIOS,
  ...DLQ_SCENARIOS,
  ...AUDIT_SCENARIOS,
  ...DATA_PLANE_SCENARIOS,
};

/** The order that lets later scenarios use what earlier ones created; the rest follow in contract order. */
export const ORDER = [
  'getContract',
  'issueToken',
  'getJwks',
  'getAuthorizationServerMetadata',
  'createEndpoint',
  'listEndpoints',
  'getEndpoint',
  'verifyEndpoint',
  'updateEndpoint',
  'getEndpointJwks',
  'testWebhookFilter',
  'testEndpoint',
  'rotateEndpointSecret',
  'publishEvent',
  'listEndpointAttempts',
  'getWebhookStats',
  'publishEventBatch',
  'listEventTypes',
  'listDlq',
  'replayDlqEntry',
  'replayDlq',
  'recoverEndpoint',
  'getRecovery',
  'deleteEndpoint',
  'getClientSecret',
  'listAuditEntries',
  'revokeClient',
];
