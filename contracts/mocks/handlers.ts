/**
 * msw (v2) handlers that behave like Sluice, built from the contract: token issuance, endpoint
 * registration and reads, publishing (single and batch), DLQ listing with paging, and the 401/403 problem bodies.
 * Every answer is validated against contracts/openapi.yaml before it is returned, so a mock cannot drift from
 * the contract without a test noticing.
 *
 *   const sluice = new MockSluice();
 *   sluice.addClient({ clientId: 'cl_1', clientSecret: 's', tenantId: 'acme', scopes: ['webhooks:read'] });
 *   const server = setupServer(...sluiceHandlers(sluice, { baseUrl: 'https://sluice.test' }));
 *   server.listen({ onUnhandledRequest: 'error' });
 */
import { randomBytes } from 'node:crypto';
import { http, HttpResponse } from 'msw';
import { SluiceBaseError } from '../../core/errors.ts';
import { loadContract, type Json } from '../contract.ts';
import { ContractSchemas } from '../schemas.ts';
import type { MockSluice } from './state.ts';

export class MockContractError extends SluiceBaseError<'MOCK_BREAKS_CONTRACT'> {
  constructor(what: string, errors: string[]) {
    super('MOCK_BREAKS_CONTRACT', `the mock's ${what} breaks the contract: ${errors.join('; ')}`);
  }
}

export interface HandlerOptions {
  baseUrl: string;
}

const doc = loadContract();
const schemas = new ContractSchemas(doc);

function reply(
  schema: string,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
  type = 'application/json',
) {
  const errors = schemas.errors(schema, body);
  if (errors.length) throw new MockContractError(`${status} ${schema.split('/').pop()}`, errors);
  return HttpResponse.json(body as Json, { status, headers: { 'content-type': type, ...headers } });
}

function problem(
  status: number,
  code: string,
  title: string,
  detail: string,
  path: string,
  extra: Json = {},
  headers: Record<string, string> = {},
) {
  const schema =
    { 400: 'ValidationProblem', 401: 'TokenProblem', 403: 'ScopeProblem', 404: 'NotFoundProblem' }[status] ?? 'Problem';
  const body = {
    type: `https://sluice.dev/problems/${code.toLowerCase().replace(/_/g, '-')}`,
    title,
    status,
    detail,
    code,
    instance: path,
    ...extra,
  };
  return reply(`#/components/schemas/${schema}`, status, body, headers, 'application/problem+json');
}

type Authorized = { tenantId: string; scopes: string[] } | Response;

function authorize(sluice: MockSluice, request: Request, scope: string): Authorized {
  const path = new URL(request.url).pathname;
  const header = request.headers.get('authorization');
  if (!header)
    return problem(
      401,
      'TOKEN_MISSING',
      'Bearer token missing',
      'this route needs an Authorization: Bearer <access token> header',
      path,
      {},
      { 'www-authenticate': 'Bearer realm="sluice"' },
    );
  const issued = sluice.tokens.get(header.replace(/^Bearer /i, ''));
  if (!issued)
    return problem(
      401,
      'TOKEN_INVALID',
      'Bearer token invalid',
      'the access token is invalid',
      path,
      {},
      { 'www-authenticate': 'Bearer error="invalid_token"' },
    );
  if (!issued.scopes.includes(scope)) {
    return problem(
      403,
      'SCOPE_VIOLATION',
      'Scope violation',
      `this route needs the scope "${scope}", which the token does not carry`,
      path,
      { missing_scope: scope, granted_scopes: issued.scopes },
      {
        'www-authenticate': `Bearer error="insufficient_scope", scope="${scope}"`,
      },
    );
  }
  return { tenantId: issued.client.tenantId, scopes: issued.scopes };
}

async function readJson(request: Request): Promise<Json | undefined> {
  try {
    return JSON.parse(await request.text()) as Json;
  } catch {
    return undefined;
  }
}

type MockEndpoint = NonNullable<ReturnType<MockSluice['endpoints']['get']>>;

/** The tenant's endpoint, or the 404 for an id that is not one (another tenant's included). */
function tenantEndpoint(sluice: MockSluice, request: Request, id: string, tenantId: string): MockEndpoint | Response {
  const e = sluice.endpoints.get(id);
  if (e && e.tenant_id === tenantId) return e;
  return problem(404, 'NOT_FOUND', 'Not found', `no webhook endpoint ${id}`, new URL(request.url).pathname);
}

/** The answer to one accepted publish: the caller's id or a new one, and the endpoints it matches. */
function published(sluice: MockSluice, tenantId: string, event: Json): { id: string; matched_endpoints: number } {
  const matched = [...sluice.endpoints.values()].filter(
    (e) => e.tenant_id === tenantId && (e.events.includes('*') || e.events.includes(event.type)),
  ).length;
  return {
    id: typeof event.id === 'string' ? event.id : `evt_${randomBytes(8).toString('hex')}`,
    matched_endpoints: matched,
  };
}

async function readForm(request: Request): Promise<Json | null> {
  const type = request.headers.get('content-type') ?? '';
  const text = await request.text();
  try {
    return type.includes('x-www-form-urlencoded') ? Object.fromEntries(new URLSearchParams(text)) : JSON.parse(text);
  } catch {
    return null;
  }
}

function oauthError(status: number, error: string, description: string) {
  const headers: Record<string, string> = { 'cache-control': 'no-store' };
  if (status === 401) headers['www-authenticate'] = 'Basic realm="sluice"';
  return reply('#/components/schemas/OAuthError', status, { error, error_description: description }, headers);
}

function page<T>(items: T[], url: URL, path: string): { data: T[]; next_cursor: string | null } | Response {
  const raw = url.searchParams.get('limit');
  const limit = raw === null ? 100 : Number(raw);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
    return problem(400, 'INVALID_REQUEST', 'Invalid request', 'limit must be 1..1000', path, {
      errors: [{ path: 'query.limit', message: 'must be an integer between 1 and 1000' }],
    });
  const cursor = url.searchParams.get('cursor');
  const start = cursor ? Number(Buffer.from(cursor, 'base64url').toString()) : 0;
  const data = items.slice(start, start + limit);
  const next = start + limit < items.length ? Buffer.from(String(start + limit)).toString('base64url') : null;
  return { data, next_cursor: next };
}

export function sluiceHandlers(sluice: MockSluice, opts: HandlerOptions) {
  const base = opts.baseUrl.replace(/\/+$/, '');
  return [
    http.post(`${base}/v1/auth/token`, async ({ request }) => {
      const body = await readForm(request);
      if (!body || typeof body !== 'object')
        return oauthError(400, 'invalid_request', 'the body must be JSON or a form');
      if (body.grant_type !== 'client_credentials')
        return oauthError(
          400,
          body.grant_type ? 'unsupported_grant_type' : 'invalid_request',
          'use grant_type=client_credentials',
        );
      const client = sluice.clients.get(body.client_id);
      if (!client || client.clientSecret !== body.client_secret)
        return oauthError(401, 'invalid_client', 'client authentication failed');
      let scopes = client.scopes;
      if (typeof body.scope === 'string') {
        scopes = body.scope.split(' ').filter(Boolean);
        if (scopes.some((s: string) => !client.scopes.includes(s)))
          return oauthError(400, 'invalid_scope', 'scope not granted to this client');
      }
      const access_token = sluice.mintToken(client, scopes);
      return reply(
        '#/components/schemas/TokenResponse',
        200,
        { access_token, token_type: 'Bearer', expires_in: 900, scope: scopes.join(' ') },
        { 'cache-control': 'no-store', pragma: 'no-cache' },
      );
    }),

    http.post(`${base}/v1/webhooks/endpoints`, async ({ request }) => {
      const path = new URL(request.url).pathname;
      const auth = authorize(sluice, request, 'webhooks:write');
      if (auth instanceof Response) return auth;
      let body: unknown;
      try {
        body = JSON.parse(await request.text());
      } catch {
        return problem(400, 'INVALID_REQUEST', 'Invalid request', 'malformed JSON', path, {
          errors: [{ path: '$', message: 'malformed JSON' }],
        });
      }
      const faults = schemas.errors('#/components/schemas/EndpointCreate', body);
      if (faults.length)
        return problem(400, 'INVALID_REQUEST', 'Invalid request', faults.join('; '), path, {
          errors: faults.map((f) => ({
            path: `$${f
              .split(' ')[0]
              .replace(/^\(root\)$/, '')
              .replace(/\//g, '.')}`,
            message: f,
          })),
        });
      const b = body as { url: string; events: string[]; metadata?: Json; description?: string | null };
      const now = new Date().toISOString();
      const endpoint = {
        id: `ep_${randomBytes(8).toString('hex')}`,
        url: b.url,
        events: b.events,
        metadata: b.metadata ?? null,
        description: b.description ?? null,
        state: 'ACTIVE' as const,
        created_at: now,
        updated_at: now,
        verified_at: now,
        previous_secret_expires_at: null,
        disabled_reason: null,
        disabled_at: null,
      };
      sluice.endpoints.set(endpoint.id, { ...endpoint, tenant_id: auth.tenantId });
      return reply(
        '#/components/schemas/EndpointCreated',
        201,
        { ...endpoint, secret: `whsec_${randomBytes(32).toString('base64')}` },
        { location: `/v1/webhooks/endpoints/${endpoint.id}` },
      );
    }),

    http.post(`${base}/v1/webhooks/events`, async ({ request }) => {
      const path = new URL(request.url).pathname;
      const auth = authorize(sluice, request, 'events:publish');
      if (auth instanceof Response) return auth;
      const body = await readJson(request);
      if (body === undefined)
        return problem(400, 'INVALID_REQUEST', 'Invalid request', 'malformed JSON', path, {
          errors: [{ path: '$', message: 'malformed JSON' }],
        });
      const faults = schemas.errors('#/components/schemas/EventPublish', body);
      if (faults.length)
        return problem(400, 'INVALID_REQUEST', 'Invalid request', faults.join('; '), path, {
          errors: faults.map((f) => ({ path: '$', message: f })),
        });
      return reply('#/components/schemas/EventAccepted', 202, published(sluice, auth.tenantId, body as Json));
    }),

    http.post(`${base}/v1/webhooks/events/batch`, async ({ request }) => {
      const path = new URL(request.url).pathname;
      const auth = authorize(sluice, request, 'events:publish');
      if (auth instanceof Response) return auth;
      const body = await readJson(request);
      const shape = body === undefined ? ['malformed JSON'] : schemas.errors('#/components/schemas/EventBatch', body);
      if (shape.length)
        return problem(400, 'INVALID_REQUEST', 'Invalid request', shape.join('; '), path, {
          errors: shape.map((f) => ({ path: '$', message: f })),
        });
      const results = (body as { events: Json[] }).events.map((item, index) => {
        const faults = schemas.errors('#/components/schemas/EventPublish', item);
        if (faults.length)
          return {
            index,
            error: {
              code: 'INVALID_REQUEST',
              status: 400,
              detail: faults.join('; '),
              errors: faults.map((f) => ({ path: `$.events[${index}]`, message: f })),
            },
          };
        return { index, ...published(sluice, auth.tenantId, item) };
      });
      const accepted = results.filter((r) => !('error' in r)).length;
      if (accepted === 0)
        return problem(400, 'INVALID_REQUEST', 'Invalid request', 'every event of the batch is invalid', path, {
          errors: results.flatMap((r) => (r.error ? r.error.errors : [])),
        });
      return reply('#/components/schemas/EventBatchAccepted', 202, {
        accepted,
        rejected: results.length - accepted,
        results,
      });
    }),

    http.get(`${base}/v1/webhooks/endpoints`, ({ request }) => {
      const url = new URL(request.url);
      const auth = authorize(sluice, request, 'webhooks:read');
      if (auth instanceof Response) return auth;
      const own = [...sluice.endpoints.values()]
        .filter((e) => e.tenant_id === auth.tenantId)
        .map(({ tenant_id: _, ...e }) => e);
      const p = page(own, url, url.pathname);
      return p instanceof Response ? p : reply('#/components/schemas/EndpointPage', 200, p);
    }),

    http.get(`${base}/v1/webhooks/endpoints/:id`, ({ request, params }) => {
      const auth = authorize(sluice, request, 'webhooks:read');
      if (auth instanceof Response) return auth;
      const e = tenantEndpoint(sluice, request, String(params.id), auth.tenantId);
      if (e instanceof Response) return e;
      const { tenant_id: _, ...view } = e;
      return reply('#/components/schemas/Endpoint', 200, view);
    }),

    http.delete(`${base}/v1/webhooks/endpoints/:id`, ({ request, params }) => {
      const auth = authorize(sluice, request, 'webhooks:write');
      if (auth instanceof Response) return auth;
      const e = tenantEndpoint(sluice, request, String(params.id), auth.tenantId);
      if (e instanceof Response) return e;
      sluice.endpoints.delete(e.id);
      return new HttpResponse(null, { status: 204 });
    }),

    http.get(`${base}/v1/webhooks/dlq`, ({ request }) => {
      const url = new URL(request.url);
      const auth = authorize(sluice, request, 'webhooks:read');
      if (auth instanceof Response) return auth;
      const endpointId = url.searchParams.get('endpoint_id');
      const eventType = url.searchParams.get('event_type');
      const entries = sluice.dlq.filter(
        (e) =>
          e.tenant_id === auth.tenantId &&
          (!endpointId || e.endpoint_id === endpointId) &&
          (!eventType || e.event_type === eventType),
      );
      const p = page(entries, url, url.pathname);
      return p instanceof Response ? p : reply('#/components/schemas/DlqPage', 200, p);
    }),
  ];
}
