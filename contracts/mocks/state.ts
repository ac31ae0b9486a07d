/**
 * The in-memory Sluice the msw handlers answer from: clients, issued tokens, endpoints, DLQ entries,
 * the events published through it (for `GET /v1/webhooks/event-types`) and the test sends made.
 */
import { randomBytes } from 'node:crypto';
import type { components } from '../generated/types.ts';

type S = components['schemas'];

export interface MockClient {
  clientId: string;
  clientSecret: string;
  tenantId: string;
  scopes: string[];
}

/** An event published through the mocks (or recorded by a test, as if produced straight to Kafka). */
export interface MockEvent {
  tenantId: string;
  id: string;
  type: string;
  data: unknown;
  orderingKey: string | null;
  /** When it was published (ms). */
  at: number;
}

/** A test send (`POST /v1/webhooks/endpoints/{id}/test`) the mocks answered. */
export interface MockTestSend {
  endpointId: string;
  type: string;
  data: unknown;
  at: number;
}

/** What a target answers the mock's ping or test send (the EndpointTestResult the test send returns). */
export type TargetAnswer = S['EndpointTestResult'];

const DAY_MS = 24 * 3600_000;
/** How long `GET /v1/webhooks/event-types` looks back, and a publisher's id is remembered. */
const EVENT_TYPES_WINDOW_DAYS = 7;
const ID_MEMORY_MS = DAY_MS;
/** Test sends of one endpoint: this many at once, then one more every TEST_SEND_EVERY_MS (the service's budget). */
export const TEST_SEND_BURST = 3;
export const TEST_SEND_EVERY_MS = 5000;

export class MockSluice {
  readonly clients = new Map<string, MockClient>();
  readonly tokens = new Map<string, { client: MockClient; scopes: string[] }>();
  readonly endpoints = new Map<string, S['Endpoint'] & { tenant_id: string }>();
  readonly dlq: S['DlqEntry'][] = [];
  /** The `whpk_` public key of each endpoint that signs with ed25519, by endpoint id (its JWKS). */
  readonly signingKeys = new Map<string, string>();
  /** Recovery jobs (POST .../recover), with the tenant; a job completes at once in the mock. */
  readonly recoveries = new Map<string, S['RecoveryJob'] & { tenant_id: string }>();
  /** Every event published (a repeated `id` within 24 h once), oldest first. */
  readonly events: MockEvent[] = [];
  readonly testSends: MockTestSend[] = [];
  /** The mock's clock (ms): replace it to move time (the 7-day window, the test-send budget). */
  now: () => number = () => Date.now();
  /**
   * What the target at `url` answers a ping (registration, a new `url`) or a test send of `type`.
   * Replace it to simulate a failing receiver: a ping not `ok` leaves the endpoint PENDING.
   */
  targetAnswer: (url: string, type: string) => TargetAnswer = () => ({
    ok: true,
    status: 200,
    latency_ms: 1,
    body: '',
    error: null,
  });
  private readonly testSendBudget = new Map<string, { tokens: number; at: number }>();

  addClient(c: MockClient): MockClient {
    this.clients.set(c.clientId, c);
    return c;
  }

  /** A token whose scope set a test can also hand-craft (e.g. to provoke a 403). */
  mintToken(client: MockClient, scopes = client.scopes): string {
    const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const header = part({ alg: 'ES256', typ: 'at+jwt', kid: 'mock' });
    const claims = part({ client_id: client.clientId, tenant_id: client.tenantId, scope: scopes.join(' ') });
    const token = `${header}.${claims}.${randomBytes(16).toString('base64url')}`;
    this.tokens.set(token, { client, scopes });
    return token;
  }

  /**
   * Records a published event, as the service's fan-out counts it: a repeat of a tenant's `id`
   * within 24 h is the same event (not counted again). Also for events a test produces "straight
   * to Kafka". Returns the event's id and whether it was a repeat.
   */
  recordEvent(
    tenantId: string,
    event: { type: string; data?: unknown; id?: string | null; ordering_key?: string | null },
    at = this.now(),
  ): { id: string; repeated: boolean } {
    if (typeof event.id === 'string') {
      const id = event.id;
      const earlier = this.events.find((e) => e.tenantId === tenantId && e.id === id && at - e.at < ID_MEMORY_MS);
      if (earlier) return { id, repeated: true };
    }
    const id = typeof event.id === 'string' ? event.id : `evt_${randomBytes(8).toString('hex')}`;
    const orderingKey = event.ordering_key ?? null;
    this.events.push({ tenantId, id, type: event.type, data: event.data ?? null, orderingKey, at });
    return { id, repeated: false };
  }

  /** `GET /v1/webhooks/event-types`: the tenant's types of the last 7 days, by name (the handler pages them). */
  eventTypes(tenantId: string, now = this.now()): Omit<S['EventTypeList'], 'next_cursor'> {
    const since = now - EVENT_TYPES_WINDOW_DAYS * DAY_MS;
    const byType = new Map<string, { count: number; last: number }>();
    for (const e of this.events) {
      if (e.tenantId !== tenantId || e.at <= since || e.at > now) continue;
      const t = byType.get(e.type) ?? { count: 0, last: 0 };
      t.count++;
      t.last = Math.max(t.last, e.at);
      byType.set(e.type, t);
    }
    const data = [...byType]
      .sort(([ta], [tb]) => (ta < tb ? -1 : 1))
      .slice(0, 10_000)
      .map(([type, t]) => ({ type, count: t.count, last_published_at: new Date(t.last).toISOString() }));
    return { window_days: EVENT_TYPES_WINDOW_DAYS, data };
  }

  /** Takes one test send of the endpoint's budget: null when allowed, else the whole seconds to wait. */
  takeTestSend(endpointId: string, now = this.now()): number | null {
    const perMs = 1 / TEST_SEND_EVERY_MS;
    const b = this.testSendBudget.get(endpointId) ?? { tokens: TEST_SEND_BURST, at: now };
    b.tokens = Math.min(TEST_SEND_BURST, b.tokens + (now - b.at) * perMs);
    b.at = now;
    this.testSendBudget.set(endpointId, b);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return null;
    }
    return Math.max(1, Math.ceil((1 - b.tokens) / perMs / 1000));
  }

  /** Seeds `count` DLQ entries for a tenant, oldest first. */
  seedDlq(tenantId: string, count: number, endpointId = 'ep_mock', eventType = 'pipeline.failed'): S['DlqEntry'][] {
    const base = Date.parse('2025-01-01T00:00:00Z');
    const added: S['DlqEntry'][] = [];
    for (let i = 0; i < count; i++) {
      const first = base + i * 60_000;
      const dead = first + 68 * 3600_000;
      const iso = (ms: number) => new Date(ms).toISOString();
      const entry: S['DlqEntry'] = {
        id: `dlq_mock_${String(this.dlq.length).padStart(6, '0')}`,
        event_id: `evt_mock_${i}`,
        endpoint_id: endpointId,
        tenant_id: tenantId,
        event_type: eventType,
        attempts: 17,
        last_status: 503,
        last_error: null,
        first_attempt_at: iso(first),
        last_attempt_at: iso(dead),
        dead_lettered_at: iso(dead),
        expires_at: iso(dead + 7 * 24 * 3600_000),
        payload: { id: `evt_mock_${i}`, tenant_id: tenantId, type: eventType, data: { n: i }, created_at: first },
      };
      this.dlq.push(entry);
      added.push(entry);
    }
    return added;
  }
}
