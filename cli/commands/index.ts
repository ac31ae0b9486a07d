/**
 * The CLI's commands: each one's summary, and its module, loaded only when it runs. A process loads
 * what its command needs: `sluice kafka` and the primary of `sluice start` none of the app's
 * request path, `sluice admin` no HTTP server.
 */
import type { Command } from '../command.ts';

export type { Command } from '../command.ts';

export interface CommandEntry {
  summary: string;
  load(): Promise<Command>;
}

export const COMMANDS: Record<string, CommandEntry> = {
  start: {
    summary: 'run ingress + dispatcher on every core (local Kafka included when KAFKA_BROKERS is unset)',
    load: async () => (await import('./start.ts')).start,
  },
  ingress: {
    summary: 'run an ingress node (needs KAFKA_BROKERS)',
    load: async () => (await import('./ingress.ts')).ingress,
  },
  dispatcher: {
    summary: 'run a webhook dispatcher group member (needs KAFKA_BROKERS)',
    load: async () => (await import('./dispatcher.ts')).dispatcher,
  },
  kafka: {
    summary: 'run the local Kafka broker in the foreground',
    load: async () => (await import('./kafka.ts')).kafka,
  },
  admin: {
    summary: 'operator actions: create-client, list-clients, roles, revoke, reenable, client-secret',
    load: async () => (await import('./admin.ts')).admin,
  },
  audit: {
    summary: 'verify the hash chain of the compliance log',
    load: async () => (await import('./audit.ts')).audit,
  },
  contract: {
    summary: 'contract tooling: verify a live Sluice, run a webhook conformance receiver',
    load: async () => (await import('./contract.ts')).contract,
  },
  dlq: {
    summary: "list or replay a tenant's dead-lettered webhook deliveries",
    load: async () => (await import('./dlq.ts')).dlq,
  },
  'front-door': {
    summary: 'print an HAProxy 2.6 configuration: TLS, mTLS and strict framing before Sluice',
    load: async () => (await import('./front-door.ts')).frontDoor,
  },
};
