/**
 * A sample consumer test: an application's Sluice client tested against the msw mocks built from
 * the contract, with no Sluice running. Unhandled requests fail loudly.
 */
import t from 'tap';
import { setupServer } from 'msw/node';
import { MockSluice, sluiceHandlers } from '../../contracts/mocks/index.ts';

const BASE = 'https://sluice.test';

/** The consumer under test: what an application would write to talk to Sluice. */
class WebhookAdmin {
  private token: string | null = null;
  constructor(
    private readonly base: string,
    private readonly clientId: string,
    private readonly clientSecret: string,
    private readonly scope?: string,
  ) {}

  private async bearer(): Promise<string> {
    if (this.token) return this.token;
    const res = await fetch(`${this.base}/v1/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: this.clientId,
        client_secret: this.clientSecret,
        ...(this.scope ? { scope: this.scope } : {}),
      }),
    });
    if (!res.ok) throw new Error(`token: ${res.status} ${((await res.json()) as { error: string }).error}`);
    this.token = ((await res.json()) as { access_token: string }).access_token;
    return this.token;
  }

  async call(
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; body: any; type: string | null }> {
    const res = await fetch(`${this.base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${await this.bearer()}`,
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null, type: res.headers.get('content-type') };
  }

  /** Reads the whole DLQ, following next_cursor. */
  async allDeadLetters(pageSize: number): Promise<{ ids: string[]; pages: number }> {
    const ids: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const q: string = `?limit=${pageSize}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
      const res = await this.call('GET', `/v1/webhooks/dlq${q}`);
      if (res.status !== 200) throw new Error(`dlq: ${res.status}`);
      ids.push(...res.body.data.map((e: { id: string }) => e.id));
      cursor = res.body.next_cursor;
      pages++;
    } while (cursor);
    return { ids, pages };
  }
}

const sluice = new MockSluice();
sluice.addClient({
  clientId: 'cl_app',
  clientSecret: 'app-secret',
  tenantId: 'acme',
  scopes: ['webhooks:read', 'webhooks:write'],
});
sluice.addClient({ clientId: 'cl_other', clientSecret: 'other-secret', tenantId: 'globex', scopes: ['webhooks:read'] });
sluice.seedDlq('acme', 25);
sluice.seedDlq('globex', 3);

const server = setupServer(...sluiceHandlers(sluice, { baseUrl: BASE }));
server.listen({ onUnhandledRequest: 'error' });
t.teardown(() => server.close());

t.test('registers an endpoint, reads it back and deletes it', async (t) => {
  const app = new WebhookAdmin(BASE, 'cl_app', 'app-secret');
  const created = await app.call('POST', '/v1/webhooks/endpoints', {
    url: 'https://hooks.acme.test/sluice',
    events: ['pipeline.failed'],
  });
  t.equal(created.status, 201);
  t.type(created.body.secret, 'string');
  const read = await app.call('GET', `/v1/webhooks/endpoints/${created.body.id}`);
  t.equal(read.status, 200);
  t.notOk('secret' in read.body, 'the secret is shown once');
  t.equal((await app.call('DELETE', `/v1/webhooks/endpoints/${created.body.id}`)).status, 204);
  t.equal((await app.call('GET', `/v1/webhooks/endpoints/${created.body.id}`)).status, 404);
});

t.test('a bad registration gets the 400 problem body with errors[]', async (t) => {
  const app = new WebhookAdmin(BASE, 'cl_app', 'app-secret');
  const res = await app.call('POST', '/v1/webhooks/endpoints', {
    url: 'https://hooks.acme.test',
    events: [],
    extra: 1,
  });
  t.equal(res.status, 400);
  t.equal(res.type, 'application/problem+json');
  t.equal(res.body.code, 'INVALID_REQUEST');
  t.ok(res.body.errors.length >= 1);
});

t.test('pages through the DLQ of its own tenant only', async (t) => {
  const app = new WebhookAdmin(BASE, 'cl_app', 'app-secret');
  const { ids, pages } = await app.allDeadLetters(10);
  t.equal(ids.length, 25);
  t.equal(pages, 3);
  t.equal(new Set(ids).size, 25, 'no entry twice');
  const other = await new WebhookAdmin(BASE, 'cl_other', 'other-secret').allDeadLetters(100);
  t.equal(other.ids.length, 3);
});

t.test('a narrowed token gets 403 SCOPE_VIOLATION naming the missing scope', async (t) => {
  const readOnly = new WebhookAdmin(BASE, 'cl_app', 'app-secret', 'webhooks:read');
  const res = await readOnly.call('POST', '/v1/webhooks/endpoints', {
    url: 'https://hooks.acme.test',
    events: ['ping'],
  });
  t.equal(res.status, 403);
  t.equal(res.body.code, 'SCOPE_VIOLATION');
  t.equal(res.body.missing_scope, 'webhooks:write');
  t.same(res.body.granted_scopes, ['webhooks:read']);
});

t.test('no token and bad credentials: 401 in both shapes', async (t) => {
  const res = await fetch(`${BASE}/v1/webhooks/dlq`);
  t.equal(res.status, 401);
  t.match(res.headers.get('www-authenticate'), /^Bearer/);
  t.equal(((await res.json()) as { code: string }).code, 'TOKEN_MISSING');
  await t.rejects(new WebhookAdmin(BASE, 'cl_app', 'wrong').allDeadLetters(10), /token: 401 invalid_client/);
});

t.test('a request the mocks do not handle fails loudly', async (t) => {
  await t.rejects(fetch(`${BASE}/v1/not-mocked`));
});
