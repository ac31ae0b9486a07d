/**
 * The route table: every route an ingress serves, auth and data plane included, in the order the
 * router tries them. A capability adds its factory here, once.
 *
 * The ordering rule: the router (ingress/router.ts) takes the first route whose pattern matches,
 * and a wildcard pattern (`/prefix/*`) also matches `/prefix` and everything below it. So a
 * wildcard comes after every route it covers: `/console` before `/console/*`, and the data plane,
 * whose patterns are all wildcards, last.
 *
 *   const routes = routeTable(ctx, trustedProxies, { attempts, eventTypes, eventTypesCaughtUp, contract, checks });
 */
import type { Context } from '../../core/context.ts';
import type { RevokeDeps } from '../../core/clients/revocation.ts';
import type { ReplayDeps } from '../../core/webhooks/dlq-replay.ts';
import type { PublishDeps } from '../../core/webhooks/publish.ts';
import type { RecoveryDeps } from '../../core/webhooks/recovery.ts';
import type { CidrSet } from '../../core/net/cidr.ts';
import type { AttemptHistory } from '../../core/webhooks/attempt-history.ts';
import type { EventTypeCounts } from '../../core/webhooks/event-type-counts.ts';
import type { RequestChecks, Route } from '../types.ts';
import { auditRoutes } from './audit.ts';
import { type AuthRouteDeps, authRoutes } from './auth.ts';
import { type ClientRouteDeps, clientRoutes } from './clients.ts';
import { consoleRoutes } from './console.ts';
import { dataPlaneRoutes } from './data-plane.ts';
import { openapiRoutes } from './openapi.ts';
import { revocationRoutes } from './revocations.ts';
import { type AttemptRouteDeps, webhookAttemptRoutes } from './webhook-attempts.ts';
import { webhookClientCertificateRoutes } from './webhook-client-certificate.ts';
import { webhookDlqRoutes } from './webhook-dlq.ts';
import { webhookRecoveryRoutes } from './webhook-recovery.ts';
import { type EndpointRouteDeps, webhookEndpointRoutes } from './webhook-endpoints.ts';
import { type EndpointJwksRouteDeps, webhookEndpointJwksRoutes } from './webhook-endpoint-jwks.ts';
import { webhookEventTypeRoutes } from './webhook-event-types.ts';
import { webhookFilterRoutes } from './webhook-filters.ts';
import { webhookEventRoutes } from './webhook-events.ts';

/**
 * What the routes need beyond the context, handed in by cli/assemble.ts: the views only an
 * ingress node keeps, and the contract with its compiled request checks (ingress/ does not import
 * contracts/).
 */
export interface RouteInputs {
  attempts: AttemptHistory;
  eventTypes: EventTypeCounts;
  /** Resolves once this process's event type view has read its topic to the end (core/kafka/catch-up.ts). */
  eventTypesCaughtUp: () => Promise<void>;
  /** The parsed OpenAPI document, served as it is. */
  contract: unknown;
  checks: RequestChecks;
}

/** What the routes read of the process's context: the union of what each capability's routes read. */
export type RouteDeps = Pick<Context, 'auditView' | 'clock' | 'config' | 'metrics'> &
  AuthRouteDeps &
  EndpointRouteDeps &
  EndpointJwksRouteDeps &
  PublishDeps &
  ReplayDeps &
  RevokeDeps &
  ClientRouteDeps &
  AttemptRouteDeps &
  RecoveryDeps;

export function routeTable(ctx: RouteDeps, trustedProxies: CidrSet, inputs: RouteInputs): Route[] {
  return [
    // The token endpoint, JWKS and metadata: no bearer token.
    ...authRoutes(ctx, ctx.metrics, trustedProxies),
    ...webhookEndpointRoutes(ctx),
    ...webhookEndpointJwksRoutes(ctx),
    ...webhookFilterRoutes(ctx.clock),
    ...webhookEventRoutes(ctx, inputs.checks),
    ...webhookDlqRoutes(ctx),
    ...revocationRoutes(ctx),
    ...clientRoutes(ctx),
    ...auditRoutes(ctx.auditView),
    ...openapiRoutes(inputs.contract),
    ...webhookAttemptRoutes(ctx, inputs.attempts),
    ...webhookRecoveryRoutes(ctx, inputs.attempts),
    ...webhookEventTypeRoutes(inputs.eventTypes, inputs.eventTypesCaughtUp),
    ...webhookClientCertificateRoutes(ctx.config.deliveryClientCertificate),
    ...consoleRoutes(),
    // Wildcards only, so last.
    ...dataPlaneRoutes(ctx.config),
  ];
}
