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
  ): Promise<{ status: number; body: any; type: string | null; headers: Headers }> {
    const res = await fetch(`${this.base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${await this.bearer()}`,
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return {
      status: res.status,
      body: text ? JSON.parse(text) : null,
      type: res.headers.get('content-type'),
      headers: res.headers,
    };
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
  scopes: ['webhooks:read', 'webhooks:write', 'events:publish'],
});
sluice.addClient({
  clientId: 'cl_other',
  clientSecret: 'other-secret',
  tenantId: 'globex',
  scopes: ['webhooks:read', 'webhooks:write'],
});
sluice.addClient({
  clientId: 'cl_types',
  clientSecret: 'types-secret',
  tenantId: 'initech',
  scopes: ['webhooks:read', 'events:publish'],
});
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

/** Registers an endpoint for acme and returns its id. */
async function endpointOf(app: WebhookAdmin, extra: Record<string, unknown> = {}): Promise<string> {
  const created = await app.call('POST', '/v1/webhooks/endpoints', {
    url: 'https://hooks.acme.test/sluice',
    events: ['pipeline.failed'],
    ...extra,
  });
  if (created.status !== 201) throw new Error(`registration: ${created.status} ${JSON.stringify(created.body)}`);
  return created.body.id;
}

/** The paths of a 400 problem's errors[]. */
const faultPaths = (res: { body: { errors?: { path: string }[] } }) => (res.body.errors ?? []).map((e) => e.path);

t.test('an endpoint shows its delivery policy: defaults, and what the registration set', async (t) => {
  const app = new WebhookAdmin(BASE, 'cl_app', 'app-secret');
  const plain = await app.call('GET', `/v1/webhooks/endpoints/${await endpointOf(app)}`);
  t.match(plain.body, { disabled: false, rate_limit_per_second: null, max_in_flight: null, ordering: 'none' });
  const created = await app.call('POST', '/v1/webhooks/endpoints', {
    url: 'https://hooks.acme.test/ordered',
    events: ['pipeline.failed'],
    rate_limit_per_second: 20,
    max_in_flight: 2,
    ordering: 'key',
  });
  t.equal(created.status, 201);
  t.match(created.body, { disabled: false, rate_limit_per_second: 20, max_in_flight: 2, ordering: 'key' });
  const bad = await app.call('POST', '/v1/webhooks/endpoints', {
    url: 'https://hooks.acme.test/x',
    events: ['pipeline.failed'],
    rate_limit_per_second: 0,
    max_in_flight: 1001,
    ordering: 'fifo',
  });
  t.equal(bad.status, 400);
  t.same(faultPaths(bad).sort(), ['$.max_in_flight', '$.ordering', '$.rate_limit_per_second']);
});

t.test('PATCH pauses, limits and orders an endpoint; the view reflects each change', async (t) => {
  const app = new WebhookAdmin(BASE, 'cl_app', 'app-secret');
  const id = await endpointOf(app);
  const path = `/v1/webhooks/endpoints/${id}`;
  const steps: [Record<string, unknown>, Record<string, unknown>][] = [
    [{ disabled: true }, { disabled: true, state: 'ACTIVE' }],
    [{ rate_limit_per_second: 20 }, { disabled: true, rate_limit_per_second: 20 }],
    [{ max_in_flight: 2 }, { rate_limit_per_second: 20, max_in_flight: 2 }],
    [{ ordering: 'key' }, { max_in_flight: 2, ordering: 'key' }],
    [
      { rate_limit_per_second: 10000, max_in_flight: 1000 },
      { rate_limit_per_second: 10000, max_in_flight: 1000 },
    ],
    [{ disabled: false, rate_limit_per_second: null, max_in_flight: null, ordering: 'none' }, { disabled: false }],
  ];
  for (const [change, expected] of steps) {
    const res = await app.call('PATCH', path, change);
    t.equal(res.status, 200, `PATCH ${JSON.stringify(change)}`);
    t.match(res.body, { ...change, ...expected }, 'the answer shows the change');
    t.notOk('secret' in res.body);
    t.notOk(res.headers.has('sluice-ping-result'), 'no ping without a new url');
    t.match((await app.call('GET', path)).body, { ...change, ...expected }, 'and so does a read');
  }
  const described = await app.call('PATCH', path, { description: 'orders' });
  t.match(described.body, { description: 'orders', rate_limit_per_second: null, ordering: 'none' });
});

t.test(
  'a refused PATCH gets the service answer: 400 with errors[] naming the field, 404 for another tenant',
  async (t) => {
    const app = new WebhookAdmin(BASE, 'cl_app', 'app-secret');
    const id = await endpointOf(app);
    const path = `/v1/webhooks/endpoints/${id}`;
    const cases: [unknown, string][] = [
      [{}, '$'],
      [{ secret: 'whsec_x' }, '$.secret'],
      [{ paused: true }, '$.paused'],
      [{ disabled: 'yes' }, '$.disabled'],
      [{ rate_limit_per_second: 0 }, '$.rate_limit_per_second'],
      [{ rate_limit_per_second: 10001 }, '$.rate_limit_per_second'],
      [{ rate_limit_per_second: 1.5 }, '$.rate_limit_per_second'],
      [{ max_in_flight: 0 }, '$.max_in_flight'],
      [{ max_in_flight: 1001 }, '$.max_in_flight'],
      [{ ordering: 'fifo' }, '$.ordering'],
    ];
    for (const [change, at] of cases) {
      const res = await app.call('PATCH', path, change);
      t.equal(res.status, 400, `PATCH ${JSON.stringify(change)} → 400`);
      t.equal(res.type, 'application/problem+json');
      t.equal(res.body.code, 'INVALID_REQUEST');
      t.same(faultPaths(res), [at]);
    }
    t.match((await app.call('GET', path)).body, { disabled: false, rate_limit_per_second: null, ordering: 'none' });
    const other = new WebhookAdmin(BASE, 'cl_other', 'other-secret');
    const foreign = await other.call('PATCH', path, { disabled: true });
    t.equal(foreign.status, 404, "another tenant's endpoint is not found");
    t.equal(foreign.body.code, 'NOT_FOUND');
    t.equal((await app.call('GET', path)).body.disabled, false, 'and is left as it was');
    const readOnly = new WebhookAdmin(BASE, 'cl_app', 'app-secret', 'webhooks:read');
    t.equal((await readOnly.call('PATCH', path, { disabled: true })).body.missing_scope, 'webhooks:write');
  },
);

t.test('a new url is pinged: ACTIVE on a 2xx, PENDING otherwise, told in the Sluice-Ping-* headers', async (t) => {
  const app = new WebhookAdmin(BASE, 'cl_app', 'app-secret');
  const path = `/v1/webhooks/endpoints/${await endpointOf(app)}`;
  const moved = await app.call('PATCH', path, { url: 'https://hooks.acme.test/v2' });
  t.equal(moved.status, 200);
  t.equal(moved.headers.get('sluice-ping-result'), 'ok');
  t.match(moved.body, { url: 'https://hooks.acme.test/v2', state: 'ACTIVE' });
  const answer = sluice.targetAnswer;
  sluice.targetAnswer = () => ({ ok: false, status: 503, latency_ms: 3, body: 'down', error: 'HTTP 503' });
  t.teardown(() => {
    sluice.targetAnswer = answer;
  });
  const failing = await app.call('PATCH', path, { url: 'https://hooks.acme.test/v3' });
  t.equal(failing.headers.get('sluice-ping-result'), 'failed');
  t.equal(failing.headers.get('sluice-ping-status'), '503');
  t.match(failing.body, { state: 'PENDING', verified_at: null });
});

t.test("a test send answers with the target's answer, is recorded, and is rate limited per endpoint", async (t) => {
  const app = new WebhookAdmin(BASE, 'cl_app', 'app-secret');
  const id = await endpointOf(app);
  const path = `/v1/webhooks/endpoints/${id}/test`;
  const ping = await app.call('POST', path);
  t.equal(ping.status, 200);
  t.same(ping.body, { ok: true, status: 200, latency_ms: 1, body: '', error: null });
  t.equal(ping.headers.get('cache-control'), 'no-store');
  const typed = await app.call('POST', path, { type: 'pipeline.failed', data: { run: 7 } });
  t.equal(typed.status, 200);
  const sent = sluice.testSends.filter((s) => s.endpointId === id);
  t.same(
    sent.map((s) => [s.type, s.data]),
    [
      ['ping', { endpoint_id: id }],
      ['pipeline.failed', { run: 7 }],
    ],
  );
  t.equal((await app.call('POST', path, { type: 'credential.rotated' })).status, 400, 'a reserved type');
  t.equal((await app.call('POST', path, { type: 'ping', extra: 1 })).status, 400, 'an unknown field');
  // The burst of 3 is spent (the refused ones took none): one more waits.
  await app.call('POST', path);
  const limited = await app.call('POST', path);
  t.equal(limited.status, 429);
  t.equal(limited.body.code, 'RATE_LIMITED');
  t.ok(Number(limited.headers.get('retry-after')) >= 1, 'with Retry-After');
  const clock = sluice.now;
  const later = Date.now() + 5_000;
  sluice.now = () => later;
  t.teardown(() => {
    sluice.now = clock;
  });
  t.equal((await app.call('POST', path)).status, 200, 'one more every 5 s');
  t.equal((await app.call('POST', '/v1/webhooks/endpoints/ep_missing/test')).status, 404);
});

t.test('ordering_key: 1..128 UTF-8 bytes on a publish and on each batch item', async (t) => {
  const app = new WebhookAdmin(BASE, 'cl_app', 'app-secret');
  const publish = (key: unknown) =>
    app.call('POST', '/v1/webhooks/events', { type: 'pipeline.failed', data: {}, ordering_key: key });
  const max = 'é'.repeat(64); // 64 characters, 128 bytes
  const ok = await publish(max);
  t.equal(ok.status, 202, 'a 128-byte key');
  t.equal(sluice.events.find((e) => e.id === ok.body.id)?.orderingKey, max, 'recorded with its key');
  t.equal((await publish(null)).status, 202, 'null: no key');
  for (const [key, what] of [
    [`${max}a`, '129 bytes'],
    ['é'.repeat(65), '65 characters, 130 bytes'],
    ['', 'empty'],
    [12, 'not a string'],
  ] as const) {
    const res = await publish(key);
    t.equal(res.status, 400, `${what} → 400`);
    t.same(faultPaths(res), ['$.ordering_key']);
  }
  const batch = await app.call('POST', '/v1/webhooks/events/batch', {
    events: [
      { type: 'pipeline.failed', data: 1, ordering_key: 'order-1' },
      { type: 'pipeline.failed', data: 2, ordering_key: 'x'.repeat(129) },
    ],
  });
  t.equal(batch.status, 202);
  t.match(batch.body, { accepted: 1, rejected: 1 });
  t.same(faultPaths({ body: batch.body.results[1].error }), ['$.events[1].ordering_key'], 'the item refused alone');
});

t.test(
  'GET /v1/webhooks/event-types counts what the tenant published in the last 7 days, by name, paged',
  async (t) => {
    const pub = new WebhookAdmin(BASE, 'cl_types', 'types-secret');
    const empty = await pub.call('GET', '/v1/webhooks/event-types');
    t.equal(empty.status, 200);
    t.same(empty.body, { window_days: 7, data: [], next_cursor: null });
    const publish = (type: string, id?: string) =>
      pub.call('POST', '/v1/webhooks/events', { type, data: null, ...(id ? { id } : {}) });
    for (const type of ['pipeline.failed', 'inference.completed', 'pipeline.failed']) await publish(type);
    await publish('pipeline.failed', 'order-42');
    await publish('pipeline.failed', 'order-42'); // a repeat within 24 h is the same event
    await pub.call('POST', '/v1/webhooks/events/batch', {
      events: [
        { type: 'inference.completed', data: 1 },
        { type: 'ping', data: 2 },
      ],
    });
    // Produced straight to Kafka: counted too; eight days ago: out of the window.
    sluice.recordEvent('initech', { type: 'billing.invoiced' });
    sluice.recordEvent('initech', { type: 'billing.refunded' }, Date.now() - 8 * 24 * 3600_000);
    const res = await pub.call('GET', '/v1/webhooks/event-types');
    t.equal(res.status, 200);
    t.equal(res.body.window_days, 7);
    t.same(
      res.body.data.map((d: { type: string; count: number }) => [d.type, d.count]),
      [
        ['billing.invoiced', 1],
        ['inference.completed', 2],
        ['pipeline.failed', 3],
      ],
    );
    const first = await pub.call('GET', '/v1/webhooks/event-types?limit=2');
    t.same(
      first.body.data.map((d: { type: string }) => d.type),
      ['billing.invoiced', 'inference.completed'],
    );
    const rest = await pub.call('GET', `/v1/webhooks/event-types?limit=2&cursor=${first.body.next_cursor}`);
    t.same(
      [rest.body.data.map((d: { type: string }) => d.type), rest.body.next_cursor],
      [['pipeline.failed'], null],
      'next_cursor: the rest',
    );
    t.equal((await pub.call('GET', '/v1/webhooks/event-types?limit=1001')).status, 400, 'limit past 1,000: 400');
    t.ok(
      res.body.data.every((d: { last_published_at: string }) => Date.now() - Date.parse(d.last_published_at) < 60_000),
    );
    const other = await new WebhookAdmin(BASE, 'cl_other', 'other-secret').call('GET', '/v1/webhooks/event-types');
    t.same(other.body.data, [], "another tenant's types are not shown");
    const unscoped = await new WebhookAdmin(BASE, 'cl_types', 'types-secret', 'events:publish').call(
      'GET',
      '/v1/webhooks/event-types',
    );
    t.equal(unscoped.status, 403);
    t.equal(unscoped.body.missing_scope, 'webhooks:read');
  },
);

t.test(
  'a filter: refused with its position when it does not compile, counted in matched_endpoints, tried',
  async (t) => {
    const app = new WebhookAdmin(BASE, 'cl_app', 'app-secret');
    const bad = await app.call('POST', '/v1/webhooks/endpoints', {
      url: 'https://hooks.acme.test/big',
      events: ['order.created'],
      filter: 'data.total >',
    });
    t.equal(bad.status, 400);
    t.equal(bad.body.errors[0].path, '$.filter');
    t.match(bad.body.filter_error, { line: 1 });
    const big = await app.call('POST', '/v1/webhooks/endpoints', {
      url: 'https://hooks.acme.test/big',
      events: ['order.created'],
      filter: 'data.total > 100',
    });
    t.equal(big.status, 201);
    t.same([big.body.filter, big.body.filter_errors], ['data.total > 100', null]);
    const small = await app.call('POST', '/v1/webhooks/events', { type: 'order.created', data: { total: 50 } });
    const large = await app.call('POST', '/v1/webhooks/events', { type: 'order.created', data: { total: 150 } });
    t.equal(
      large.body.matched_endpoints - small.body.matched_endpoints,
      1,
      'the filtered endpoint counts for 150 only',
    );
    const tried = await app.call('POST', '/v1/webhooks/filters/test', {
      filter: 'data.total > 100',
      event: { type: 'order.created', data: { total: 150 } },
    });
    t.same([tried.status, tried.body], [200, { matched: true, error: null }]);
    const cleared = await app.call('PATCH', `/v1/webhooks/endpoints/${big.body.id}`, { filter: null });
    t.same([cleared.status, cleared.body.filter], [200, null]);
    t.equal((await app.call('DELETE', `/v1/webhooks/endpoints/${big.body.id}`)).status, 204);
  },
);

t.test("an ed25519 endpoint's JWKS is public; an hmac endpoint's is the same 404 as an unknown id", async (t) => {
  const app = new WebhookAdmin(BASE, 'cl_app', 'app-secret');
  const signed = await app.call('POST', '/v1/webhooks/endpoints', {
    url: 'https://hooks.acme.test/v1a',
    events: ['pipeline.failed'],
    signing: 'ed25519',
  });
  t.equal(signed.status, 201);
  const jwks = await fetch(`${BASE}/v1/webhooks/endpoints/${signed.body.id}/jwks`);
  t.equal(jwks.status, 200, 'no token needed');
  t.match(jwks.headers.get('cache-control'), /max-age=\d+/);
  const body = (await jwks.json()) as { keys: { kty: string; crv: string; x: string }[] };
  t.match(body.keys, [{ kty: 'OKP', crv: 'Ed25519', use: 'sig', alg: 'EdDSA' }]);
  t.equal(
    Buffer.from(body.keys[0].x, 'base64url').toString('base64'),
    signed.body.signing_public_key.slice('whpk_'.length),
    'the key is the one the registration answered',
  );
  const hmac = await app.call('POST', '/v1/webhooks/endpoints', {
    url: 'https://hooks.acme.test/hmac',
    events: ['pipeline.failed'],
  });
  t.equal((await fetch(`${BASE}/v1/webhooks/endpoints/${hmac.body.id}/jwks`)).status, 404);
  t.equal((await fetch(`${BASE}/v1/webhooks/endpoints/ep_unknown/jwks`)).status, 404);
});

t.test('recovers a window of an endpoint: a job whose progress reads back, its own tenant only', async (t) => {
  const app = new WebhookAdmin(BASE, 'cl_app', 'app-secret');
  const ep = await app.call('POST', '/v1/webhooks/endpoints', {
    url: 'https://hooks.acme.test/recover',
    events: ['pipeline.failed'],
  });
  // Four dead letters of the endpoint: three last attempted an hour ago, one two days ago.
  const now = Date.now();
  const iso = (ms: number) => new Date(ms).toISOString();
  for (const [i, e] of sluice.seedDlq('acme', 4, ep.body.id).entries()) {
    const at = now - (i === 3 ? 48 : 1) * 3600_000;
    Object.assign(e, { last_attempt_at: iso(at), dead_lettered_at: iso(at), expires_at: iso(at + 7 * 86400_000) });
  }
  const started = await app.call('POST', `/v1/webhooks/endpoints/${ep.body.id}/recover`, {
    since: iso(now - 2 * 3600_000),
  });
  t.equal(started.status, 202);
  t.match(started.body, { endpoint_id: ep.body.id, found: 3, sent: 3 });
  const read = await app.call('GET', `/v1/webhooks/endpoints/${ep.body.id}/recover/${started.body.id}`);
  t.equal(read.status, 200);
  t.match(read.body, { id: started.body.id, state: 'completed', delivered: 3, failed: 0 });
  const other = new WebhookAdmin(BASE, 'cl_other', 'other-secret');
  t.equal((await other.call('GET', `/v1/webhooks/endpoints/${ep.body.id}/recover/${started.body.id}`)).status, 404);
  const bad = await app.call('POST', `/v1/webhooks/endpoints/${ep.body.id}/recover`, {
    since: iso(now - 3600_000),
    until: iso(now - 7200_000),
  });
  t.equal(bad.status, 400);
  t.equal(bad.body.errors[0].path, '$.until');
  const old = await app.call('POST', `/v1/webhooks/endpoints/${ep.body.id}/recover`, {
    since: iso(now - 8 * 86400_000),
  });
  t.equal(old.status, 400);
  t.equal(old.body.errors[0].path, '$.since');
});
