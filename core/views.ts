/**
 * The views a process keeps, declared per kind of process (a view set) and built here only.
 * Every process keeps the token views (signing keys, the cluster's issuer, clients, revocations):
 * they are small and every token check reads them. The others are opened by the sets that read them:
 *
 *   node   an ingress or dispatcher node: all of them
 *   admin  `sluice admin`: the audit chain (its actions are audited); never the webhook views, so an
 *          operator creating a client does not build a DLQ of millions first
 *   dlq    `sluice dlq`: the DLQ, the endpoints and the audit chain (a replay is audited)
 *
 * A view a set leaves out is a stand-in that throws on any use, naming the view and the set.
 */
import type { Clock } from './clock.ts';
import { SluiceError } from './errors.ts';
import type { StateView } from './kafka/state-consumer.ts';
import type { TopicNames } from './topics.ts';
import { KeyRing } from './tokens/key-ring.ts';
import { IssuerView } from './tokens/cluster-issuer.ts';
import { ClientRegistry } from './clients/client-registry.ts';
import { RevocationList } from './clients/revocation-list.ts';
import { EndpointRegistry } from './webhooks/endpoint-registry.ts';
import { DlqView } from './webhooks/dlq-view.ts';
import { EventIdView } from './webhooks/idempotency.ts';
import { AuditView } from './audit/audit-view.ts';
import { RecoveryView } from './webhooks/recovery-jobs.ts';

export type ViewSet = 'node' | 'admin' | 'dlq';

/** The views a set may leave out. */
export type OptionalView = 'endpoints' | 'dlq' | 'audit' | 'eventIds' | 'recoveries';

export const VIEW_SETS: Readonly<Record<ViewSet, readonly OptionalView[]>> = {
  node: ['endpoints', 'dlq', 'audit', 'eventIds', 'recoveries'],
  admin: ['audit'],
  dlq: ['endpoints', 'dlq', 'audit'],
};

export interface Views {
  set: ViewSet;
  keys: KeyRing;
  issuers: IssuerView;
  clients: ClientRegistry;
  revocations: RevocationList;
  /** Webhook endpoints (`sluice.endpoints`). */
  endpoints: EndpointRegistry;
  /** Dead-lettered deliveries (`sluice.dlq`) minus replayed and expired ones. */
  dlq: DlqView;
  /** The audit chain (`sluice.audit`): its tail, entries by id and by tenant. */
  audit: AuditView;
  /** Idempotency claims of published event ids (on `sluice.control`). */
  eventIds: EventIdView;
  /** Recovery jobs (`sluice.recoveries`): their state and progress, for any node to answer. */
  recoveries: RecoveryView;
  /** The opened views, for the state consumer. */
  opened: StateView[];
  has(view: OptionalView): boolean;
}

export function buildViews(set: ViewSet, topics: TopicNames, masterKey: Buffer, clock: Clock): Views {
  const wanted = VIEW_SETS[set];
  const opened: StateView[] = [];
  const open = <T extends StateView>(view: T): T => {
    opened.push(view);
    return view;
  };
  const optional = <T extends StateView>(name: OptionalView, what: string, make: () => T): T =>
    wanted.includes(name) ? open(make()) : notOpened<T>(what, set);
  return {
    set,
    keys: open(new KeyRing(topics.keys, masterKey)),
    issuers: open(new IssuerView(topics.keys)),
    clients: open(new ClientRegistry(topics.clients, masterKey)),
    revocations: open(new RevocationList(topics.revocations, clock)),
    endpoints: optional('endpoints', 'the endpoints view', () => new EndpointRegistry(topics.endpoints, masterKey)),
    dlq: optional('dlq', 'the DLQ view', () => new DlqView(topics.dlq, clock)),
    audit: optional('audit', 'the audit view', () => new AuditView(topics.audit)),
    eventIds: optional('eventIds', 'the event-id view', () => new EventIdView(topics.control)),
    recoveries: optional('recoveries', 'the recovery jobs view', () => new RecoveryView(topics.recoveries)),
    opened,
    has: (name) => wanted.includes(name),
  };
}

/** Stands in for something this process did not open: any use is a programming error, said plainly. */
export function notOpened<T extends object>(what: string, set: ViewSet): T {
  return new Proxy({} as T, {
    get(_target, prop) {
      if (prop === 'then' || typeof prop === 'symbol') return undefined;
      const msg = `${what} is not open in this process (view set '${set}'): cannot use .${String(prop)}`;
      throw new SluiceError('INTERNAL', msg);
    },
  });
}
