/**
 * msw (v2) handlers that behave like Sluice, built from the contract: token issuance, endpoint
 * registration, reads, updates (PATCH: the tenant's pause, delivery limits, ordering, filter) and test sends,
 * trying a filter on a sample event,
 * publishing (single and batch, `ordering_key` included), the event types published, DLQ listing with
 * paging, an endpoint's JWKS, recovery of a window (a job that completes at once), and the 401/403
 * problem bodies. Request bodies are checked by the service's own checks
 * (contracts/requests.ts), so a refused one gets the service's 400 (or 413) with the same `errors[]`.
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
import { ERRORS, invalidRequest, SluiceBaseError, SluiceError } from '../../core/errors.ts';
import { parseJsonBody } from '../../core/json.ts';
import { loadContract, type Json } from '../contract.ts';
import { compileRequestChecks } from '../requests.ts';
import type { components } from '../generated/types.ts';
import { ContractSchemas } from '../schemas.ts';
import { TEST_SEND_EVERY_MS, type MockSluice } from './state.ts';
import { checkFilter, eventBudget, filterInput, tryFilter } from '../../core/webhooks/filters/endpoint-filter.ts';
import { filterVerdict } from '../../core/webhooks/filters/filter-cache.ts';
import { validateWindow } from '../../core/webhooks/recovery-jobs.ts';
import { endpointJwks } from '../../core/webhooks/endpoint-jwks.ts';
import { newSigningKeyPair } from '../../core/webhooks/signing-keys.ts';
import type { EndpointRecord } from '../../core/webhooks/records.ts';

export class MockContractError extends SluiceBaseError<'MOCK_BREAKS_CONTRACT'> {
  constructor(what: string, errors: string[]) {
    super('MOCK_BREAKS_CONTRACT', `the mock's ${what} breaks the contract: ${errors.join('; ')}`);
  }
}

export interface HandlerOptions {
  baseUrl: string;
}

type S = components['schemas'];

const doc = loadContract();
const schemas = new ContractSchemas(doc);
const checks = compileRequestChecks(doc);

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

/** A SluiceError as the service answers it (problem+json, its extra members). */
function sluiceProblem(err: SluiceError, path: string, headers: Record<string, string> = {}) {
  return problem(err.status, err.code, ERRORS[err.code].title, err.message, path, err.extra, headers);
}

/** The service's refusal of request faults (ingress/problem.ts faultError): 400 with errors[], or 413. */
function faultError(faults: { path: string; message: string; maxBytes?: number }[]): SluiceError | null {
  if (faults.length === 0) return null;
  const fields = faults.filter((f) => f.maxBytes === undefined);
  if (fields.length > 0) return invalidRequest(fields.map(({ path, message }) => ({ path, message })));
  const { path, message, maxBytes } = faults[0];
  return new SluiceError('PAYLOAD_TOO_LARGE', `${path} ${message}`, { max_bytes: maxBytes });
}

/**
 * The request's JSON body as the service reads and checks it for the operation at `method pattern`:
 * `{ value }` (undefined when none was sent), or the problem answer (malformed JSON, a contract fault).
 */
async function checkedBody(request: Request, method: string, pattern: string): Promise<{ value: unknown } | Response> {
  const path = new URL(request.url).pathname;
  const text = await request.text();
  let value: unknown;
  try {
    value = text === '' ? undefined : parseJsonBody(text);
  } catch (err) {
    if (err instanceof SluiceError) return sluiceProblem(err, path);
    throw err;
  }
  const check = checks(method, pattern);
  if (!check) throw new Error(`the contract has no ${method} ${pattern}`);
  const err = faultError(check.body(value));
  return err ? sluiceProblem(err, path) : { value };
}

/** The Sluice-Ping-* headers of a ping's outcome. */
function pingHeaders(ping: { ok: boolean; status: number | null; error: string | null }): Record<string, string> {
  const headers: Record<string, string> = { 'sluice-ping-result': ping.ok ? 'ok' : 'failed' };
  if (ping.status !== null) headers['sluice-ping-status'] = String(ping.status);
  if (ping.error) headers['sluice-ping-error'] = ping.error.replace(/[^\x20-\x7e]/g, '?').slice(0, 200);
  return headers;
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

type MockEndpoint = NonNullable<ReturnType<MockSluice['endpoints']['get']>>;

/** The tenant's endpoint, or the 404 for an id that is not one (another tenant's included). */
function tenantEndpoint(sluice: MockSluice, request: Request, id: string, tenantId: string): MockEndpoint | Response {
  const e = sluice.endpoints.get(id);
  if (e && e.tenant_id === tenantId) return e;
  return problem(404, 'NOT_FOUND', 'Not found', `no webhook endpoint ${id}`, new URL(request.url).pathname);
}

/**
 * The answer to one accepted publish: the caller's id or a new one, and the endpoints it matches.
 * The event is recorded (with its `ordering_key`) for `sluice.events` and the event types.
 */
function published(sluice: MockSluice, tenantId: string, event: Json): { id: string; matched_endpoints: number } {
  const { id } = sluice.recordEvent(tenantId, event as { type: string });
  // As the service: the endpoints whose types and filter (Sluice's own evaluation) take the event.
  const input = () =>
    filterInput({ id, tenant_id: tenantId, type: event.type, data: event.data, created_at: sluice.now() });
  const budget = eventBudget();
  const matched = [...sluice.endpoints.values()].filter(
    (e) =>
      e.tenant_id === tenantId &&
      (e.events.includes('*') || e.events.includes(event.type)) &&
      filterVerdict(e, input, budget).matched,
  ).length;
  return { id, matched_endpoints: matched };
}

/** The service's 400 for a filter that does not compile, or null. */
function filterFault(filter: string | null | undefined, path: string): Response | null {
  try {
    checkFilter(filter);
    return null;
  } catch (err) {
    if (err instanceof SluiceError) return sluiceProblem(err, path);
    throw err;
  }
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
      const auth = authorize(sluice, request, 'webhooks:write');
      if (auth instanceof Response) return auth;
      const body = await checkedBody(request, 'POST', '/v1/webhooks/endpoints');
      if (body instanceof Response) return body;
      const b = body.value as S['EndpointCreate'];
      const refused = filterFault(b.filter, new URL(request.url).pathname);
      if (refused) return refused;
      const now = new Date(sluice.now()).toISOString();
      // The registration ping: a 2xx makes the endpoint ACTIVE, anything else leaves it PENDING.
      const ping = sluice.targetAnswer(b.url, 'ping');
      const endpoint = {
        id: `ep_${randomBytes(8).toString('hex')}`,
        url: b.url,
        events: b.events,
        metadata: b.metadata ?? null,
        description: b.description ?? null,
        state: ping.ok ? ('ACTIVE' as const) : ('PENDING' as const),
        created_at: now,
        updated_at: now,
        verified_at: ping.ok ? now : null,
        previous_secret_expires_at: null,
        disabled_reason: null,
        disabled_at: null,
        disabled: false,
        rate_limit_per_second: b.rate_limit_per_second ?? null,
        max_in_flight: b.max_in_flight ?? null,
        ordering: b.ordering ?? 'none',
        signing: b.signing ?? 'hmac',
        filter: b.filter ?? null,
        filter_errors: null,
      };
      sluice.endpoints.set(endpoint.id, { ...endpoint, tenant_id: auth.tenantId });
      // A real key pair, so the endpoint's JWKS (GET .../jwks) is a key a receiver can use.
      const publicKey = newSigningKeyPair().publicKey;
      sluice.signingKeys.set(endpoint.id, publicKey);
      return reply(
        '#/components/schemas/EndpointCreated',
        201,
        {
          ...endpoint,
          secret: `whsec_${randomBytes(32).toString('base64')}`,
          signing_public_key: publicKey,
        },
        { location: `/v1/webhooks/endpoints/${endpoint.id}`, 'cache-control': 'no-store', ...pingHeaders(ping) },
      );
    }),

    http.post(`${base}/v1/webhooks/events`, async ({ request }) => {
      const auth = authorize(sluice, request, 'events:publish');
      if (auth instanceof Response) return auth;
      const body = await checkedBody(request, 'POST', '/v1/webhooks/events');
      if (body instanceof Response) return body;
      return reply('#/components/schemas/EventAccepted', 202, published(sluice, auth.tenantId, body.value as Json));
    }),

    http.post(`${base}/v1/webhooks/events/batch`, async ({ request }) => {
      const path = new URL(request.url).pathname;
      const auth = authorize(sluice, request, 'events:publish');
      if (auth instanceof Response) return auth;
      const body = await checkedBody(request, 'POST', '/v1/webhooks/events/batch');
      if (body instanceof Response) return body;
      // Each item is checked alone by the single publish's checks, its faults moved under $.events[index].
      const item = checks('POST', '/v1/webhooks/events')!;
      const refusals = (body.value as { events: Json[] }).events.map((event, index) => {
        const err = faultError(item.body(event));
        if (err?.code !== 'INVALID_REQUEST') return err;
        const errors = (err.extra.errors as { path: string; message: string }[]).map((e) => ({
          path: `$.events[${index}]${e.path.slice(1)}`,
          message: e.message,
        }));
        return invalidRequest(errors);
      });
      if (refusals.every((r): r is SluiceError => r !== null)) {
        if (refusals.every((r) => r.code === 'PAYLOAD_TOO_LARGE')) return sluiceProblem(refusals[0]!, path);
        const errors = refusals.flatMap((r, index) =>
          Array.isArray(r.extra.errors)
            ? (r.extra.errors as { path: string; message: string }[])
            : [{ path: `$.events[${index}]`, message: r.message }],
        );
        return sluiceProblem(invalidRequest(errors), path);
      }
      const results = (body.value as { events: Json[] }).events.map((event, index) => {
        const err = refusals[index];
        if (err === null) return { index, ...published(sluice, auth.tenantId, event) };
        const { errors } = err.extra as { errors?: unknown };
        return {
          index,
          error: { code: err.code, status: err.status, detail: err.message, ...(errors ? { errors } : {}) },
        };
      });
      const accepted = results.filter((r) => !('error' in r)).length;
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

    http.patch(`${base}/v1/webhooks/endpoints/:id`, async ({ request, params }) => {
      const auth = authorize(sluice, request, 'webhooks:write');
      if (auth instanceof Response) return auth;
      // As the service: the body is checked (400/413) before the endpoint is looked up (404).
      const body = await checkedBody(request, 'PATCH', '/v1/webhooks/endpoints/{endpoint_id}');
      if (body instanceof Response) return body;
      const patch = body.value as S['EndpointUpdate'];
      const refused = filterFault(patch.filter, new URL(request.url).pathname);
      if (refused) return refused;
      const e = tenantEndpoint(sluice, request, String(params.id), auth.tenantId);
      if (e instanceof Response) return e;
      const now = new Date(sluice.now()).toISOString();
      const next: MockEndpoint = { ...e, updated_at: now };
      if (patch.events !== undefined) next.events = patch.events;
      if (patch.metadata !== undefined) next.metadata = patch.metadata;
      if (patch.description !== undefined) next.description = patch.description;
      if (patch.disabled !== undefined) next.disabled = patch.disabled;
      if (patch.rate_limit_per_second !== undefined) next.rate_limit_per_second = patch.rate_limit_per_second;
      if (patch.max_in_flight !== undefined) next.max_in_flight = patch.max_in_flight;
      if (patch.ordering !== undefined) next.ordering = patch.ordering;
      if (patch.signing !== undefined) next.signing = patch.signing;
      if (patch.filter !== undefined && patch.filter !== e.filter) {
        next.filter = patch.filter;
        next.filter_errors = null;
      }
      // A new url is pinged at once: a 2xx makes the endpoint ACTIVE (a DISABLED one too), else PENDING.
      let headers: Record<string, string> = {};
      if (patch.url !== undefined && patch.url !== e.url) {
        const ping = sluice.targetAnswer(patch.url, 'ping');
        headers = pingHeaders(ping);
        Object.assign(next, {
          url: patch.url,
          state: ping.ok ? 'ACTIVE' : 'PENDING',
          verified_at: ping.ok ? now : null,
          disabled_reason: null,
          disabled_at: null,
        });
      }
      sluice.endpoints.set(next.id, next);
      const { tenant_id: _, ...view } = next;
      return reply('#/components/schemas/Endpoint', 200, view, headers);
    }),

    http.post(`${base}/v1/webhooks/endpoints/:id/test`, async ({ request, params }) => {
      const path = new URL(request.url).pathname;
      const auth = authorize(sluice, request, 'webhooks:write');
      if (auth instanceof Response) return auth;
      const body = await checkedBody(request, 'POST', '/v1/webhooks/endpoints/{endpoint_id}/test');
      if (body instanceof Response) return body;
      const e = tenantEndpoint(sluice, request, String(params.id), auth.tenantId);
      if (e instanceof Response) return e;
      const wait = sluice.takeTestSend(e.id);
      if (wait !== null) {
        const every = TEST_SEND_EVERY_MS / 1000;
        const detail = `endpoint ${e.id} was sent 3 tests lately (one more every ${every} s); retry after ${wait} s`;
        return sluiceProblem(
          new SluiceError('RATE_LIMITED', detail, { retry_after: wait }, { retryAfterSeconds: wait }),
          path,
          { 'retry-after': String(wait) },
        );
      }
      const input = (body.value ?? {}) as S['EndpointTestSend'];
      const type = input.type ?? 'ping';
      const data = input.data !== undefined ? input.data : type === 'ping' ? { endpoint_id: e.id } : null;
      sluice.testSends.push({ endpointId: e.id, type, data, at: sluice.now() });
      return reply('#/components/schemas/EndpointTestResult', 200, sluice.targetAnswer(e.url, type), {
        'cache-control': 'no-store',
      });
    }),

    http.post(`${base}/v1/webhooks/filters/test`, async ({ request }) => {
      const path = new URL(request.url).pathname;
      const auth = authorize(sluice, request, 'webhooks:write');
      if (auth instanceof Response) return auth;
      const body = await checkedBody(request, 'POST', '/v1/webhooks/filters/test');
      if (body instanceof Response) return body;
      const { filter, event } = body.value as S['FilterTest'];
      try {
        return reply(
          '#/components/schemas/FilterTestResult',
          200,
          tryFilter(filter, event, auth.tenantId, sluice.now()),
        );
      } catch (err) {
        if (err instanceof SluiceError) return sluiceProblem(err, path);
        throw err;
      }
    }),

    http.get(`${base}/v1/webhooks/event-types`, ({ request }) => {
      const auth = authorize(sluice, request, 'webhooks:read');
      if (auth instanceof Response) return auth;
      const types = sluice.eventTypes(auth.tenantId);
      const paged = page(types.data, new URL(request.url), '/v1/webhooks/event-types');
      if (paged instanceof Response) return paged;
      return reply('#/components/schemas/EventTypeList', 200, { window_days: types.window_days, ...paged });
    }),

    http.delete(`${base}/v1/webhooks/endpoints/:id`, ({ request, params }) => {
      const auth = authorize(sluice, request, 'webhooks:write');
      if (auth instanceof Response) return auth;
      const e = tenantEndpoint(sluice, request, String(params.id), auth.tenantId);
      if (e instanceof Response) return e;
      sluice.endpoints.delete(e.id);
      return new HttpResponse(null, { status: 204 });
    }),

    // Public, like the service's: no token; an unknown id and an `hmac` endpoint are the same 404.
    http.get(`${base}/v1/webhooks/endpoints/:id/jwks`, ({ request, params }) => {
      const e = sluice.endpoints.get(String(params.id));
      const key = e ? sluice.signingKeys.get(e.id) : undefined;
      const jwks =
        e && key
          ? endpointJwks({ signing: e.signing, signing_public_key: key } as EndpointRecord, sluice.now())
          : undefined;
      if (!jwks) return problem(404, 'NOT_FOUND', 'Not found', 'not found', new URL(request.url).pathname);
      return reply('#/components/schemas/EndpointJwks', 200, jwks, { 'cache-control': 'public, max-age=60' });
    }),

    // A recovery re-sends the tenant's DLQ entries of the endpoint whose last attempt lies in the
    // window: in the mock at once (they leave sluice.dlq, and count as sent and delivered).
    http.post(`${base}/v1/webhooks/endpoints/:id/recover`, async ({ request, params }) => {
      const path = new URL(request.url).pathname;
      const auth = authorize(sluice, request, 'webhooks:write');
      if (auth instanceof Response) return auth;
      const body = await checkedBody(request, 'POST', '/v1/webhooks/endpoints/{endpoint_id}/recover');
      if (body instanceof Response) return body;
      const e = tenantEndpoint(sluice, request, String(params.id), auth.tenantId);
      if (e instanceof Response) return e;
      const b = body.value as S['RecoveryRequest'];
      const now = sluice.now();
      const since = Date.parse(b.since);
      const until = b.until == null ? now : Date.parse(b.until);
      try {
        validateWindow(now, since, until, 7 * 24 * 3600_000);
      } catch (err) {
        if (err instanceof SluiceError) return sluiceProblem(err, path);
        throw err;
      }
      const picked = sluice.dlq.filter((d) => {
        const at = Date.parse(d.last_attempt_at);
        return d.tenant_id === auth.tenantId && d.endpoint_id === e.id && at >= since && at < until;
      });
      for (const d of picked) sluice.dlq.splice(sluice.dlq.indexOf(d), 1);
      const at = new Date(now).toISOString();
      const job = {
        id: `rcv_${randomBytes(12).toString('hex')}`,
        endpoint_id: e.id,
        since: new Date(since).toISOString(),
        until: new Date(until).toISOString(),
        state: 'completed' as const,
        found: picked.length,
        sent: picked.length,
        delivered: picked.length,
        failed: 0,
        rate_per_second: 50,
        created_at: at,
        updated_at: at,
        finished_at: at,
        error: null,
      };
      sluice.recoveries.set(job.id, { ...job, tenant_id: auth.tenantId });
      return reply('#/components/schemas/RecoveryJob', 202, job, {
        location: `/v1/webhooks/endpoints/${e.id}/recover/${job.id}`,
      });
    }),

    http.get(`${base}/v1/webhooks/endpoints/:id/recover/:job`, ({ request, params }) => {
      const auth = authorize(sluice, request, 'webhooks:read');
      if (auth instanceof Response) return auth;
      const e = tenantEndpoint(sluice, request, String(params.id), auth.tenantId);
      if (e instanceof Response) return e;
      const job = sluice.recoveries.get(String(params.job));
      if (!job || job.tenant_id !== auth.tenantId || job.endpoint_id !== e.id)
        return problem(404, 'NOT_FOUND', 'Not found', `no recovery ${params.job}`, new URL(request.url).pathname);
      const { tenant_id: _, ...view } = job;
      return reply('#/components/schemas/RecoveryJob', 200, view, { 'cache-control': 'no-store' });
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
