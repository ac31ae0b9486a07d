/** The in-memory Sluice the msw handlers answer from: clients, issued tokens, endpoints, DLQ entries. */
import { randomBytes } from 'node:crypto';
import type { components } from '../generated/types.ts';

type S = components['schemas'];

export interface MockClient {
  clientId: string;
  clientSecret: string;
  tenantId: string;
  scopes: string[];
}

export class MockSluice {
  readonly clients = new Map<string, MockClient>();
  readonly tokens = new Map<string, { client: MockClient; scopes: string[] }>();
  readonly endpoints = new Map<string, S['Endpoint'] & { tenant_id: string }>();
  readonly dlq: S['DlqEntry'][] = [];

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
