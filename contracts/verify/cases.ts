/**
 * Crafted bad inputs every operation gets, derived from the contract: missing, malformed and
 * tampered tokens (401), a token without the operation's scope (403), a public read sent with a
 * token (the same documented answer: headers too), a method the path does not document (405 with
 * Allow), and for JSON bodies malformed JSON, wrong types, unknown fields (400), an oversize body
 * (413) and a wrong Content-Type (415).
 */
import { deref, methodsOf, responseComponent, type Json, type Operation } from '../contract.ts';
import { bearer, closedByPeer, send } from './http.ts';
import type { Exchange } from './http.ts';
import { concretePath, type Session } from './session.ts';

const problemCode = (code: string) => (ex: Exchange) =>
  (ex.json as Json | undefined)?.code === code
    ? []
    : [`expected code ${code}, got ${(ex.json as Json | undefined)?.code}`];

/** The probe that tells a documented-but-missing route (404 from the router, 405 on its path) from a real one. */
export async function isImplemented(s: Session, op: Operation): Promise<{ implemented: boolean; status: number }> {
  const res = await fetch(`${s.opts.baseUrl}${concretePath(op, s)}`, { method: op.method, redirect: 'manual' });
  await res.arrayBuffer();
  if (res.status === 404 && (op.scopes !== null || !op.responses['404'])) return { implemented: false, status: 404 };
  if (res.status === 405) return { implemented: false, status: 405 };
  return { implemented: true, status: res.status };
}

export async function authCases(s: Session, op: Operation): Promise<void> {
  if (op.scopes === null) return;
  const path = concretePath(op, s);
  const base = { method: op.method, path };
  await s.probe(op, 'no token → 401 TOKEN_MISSING', base, { status: [401], then: problemCode('TOKEN_MISSING') });
  await s.probe(
    op,
    'malformed token → 401 TOKEN_INVALID',
    { ...base, headers: bearer('not-a-jwt') },
    { status: [401], then: problemCode('TOKEN_INVALID') },
  );
  const good = await s.token();
  const tampered = good.slice(0, -4) + (good.endsWith('AAAA') ? 'BBBB' : 'AAAA');
  await s.probe(
    op,
    'tampered signature → 401 TOKEN_INVALID',
    { ...base, headers: bearer(tampered) },
    { status: [401], then: problemCode('TOKEN_INVALID') },
  );
  const needed = op.scopes[0];
  const other = s.grantedScopes.find((g) => !op.scopes!.includes(g));
  if (!other) {
    s.record(
      op,
      'wrong scope → 403 SCOPE_VIOLATION',
      'skip',
      'the client holds no scope other than the one this operation needs',
    );
    return;
  }
  const narrow = await s.token(other);
  await s.probe(
    op,
    'wrong scope → 403 SCOPE_VIOLATION',
    { ...base, headers: bearer(narrow) },
    {
      status: [403],
      then: (ex) => {
        const body = ex.json as Json;
        const faults: string[] = [];
        if (body.missing_scope !== needed)
          faults.push(`missing_scope is "${body.missing_scope}", the contract says "${needed}"`);
        if (!Array.isArray(body.granted_scopes) || body.granted_scopes.join(' ') !== other)
          faults.push(`granted_scopes is ${JSON.stringify(body.granted_scopes)}, the token carries ["${other}"]`);
        const challenge = ex.headers.get('www-authenticate') ?? '';
        if (!challenge.includes(`scope="${needed}"`))
          faults.push(`WWW-Authenticate does not name scope "${needed}": ${challenge}`);
        return faults;
      },
    },
  );
}

/**
 * A public read (no scope) answers a caller that sends its token along as it answers anyone: the
 * status it gave without one, and a response the contract documents, headers included (a JWKS
 * turned `no-store` by the token broke its `max-age` Cache-Control).
 */
export async function publicCases(s: Session, op: Operation): Promise<void> {
  if (op.scopes !== null || op.method !== 'GET') return;
  const path = concretePath(op, s);
  const anonymous = await send(s.opts.baseUrl, { method: op.method, path });
  await s.probe(
    op,
    `with a bearer token → ${anonymous.status}, as without`,
    { method: op.method, path, headers: bearer(await s.token()) },
    { status: [anonymous.status] },
  );
}

const PROBE_METHODS = ['PUT', 'PATCH', 'DELETE', 'POST', 'GET'];

export async function methodCase(s: Session, op: Operation, donePaths: Set<string>): Promise<void> {
  if (donePaths.has(op.path)) return;
  donePaths.add(op.path);
  const documented = methodsOf(s.doc, op.path);
  const wrong = PROBE_METHODS.find((m) => !documented.includes(m));
  if (!wrong) return; // the data-plane families take every method
  const allow = new Set([...documented, ...(documented.includes('GET') ? ['HEAD'] : [])]);
  await s.probe(
    op,
    `${wrong} → 405 with Allow`,
    { method: wrong, path: concretePath(op, s) },
    {
      status: [405],
      documented: { '405': responseComponent(s.doc, 'MethodNotAllowed') },
      then: (ex) => {
        const got = new Set(
          (ex.headers.get('allow') ?? '')
            .split(',')
            .map((m) => m.trim())
            .filter(Boolean),
        );
        const missing = [...allow].filter((m) => !got.has(m));
        const extra = [...got].filter((m) => !allow.has(m));
        return [
          ...(missing.length ? [`Allow lacks documented ${missing.join(', ')}`] : []),
          ...(extra.length ? [`Allow names undocumented ${extra.join(', ')}`] : []),
        ];
      },
    },
  );
}

/**
 * Once per run, on the first path: a method no route knows (QUERY) → 501 NOT_IMPLEMENTED. The bare
 * uWebSockets.js 20.30 listener closes such a connection unanswered (only the front door answers
 * it): that is a skip naming why, not a pass.
 */
export async function unknownMethodCase(s: Session, op: Operation, donePaths: Set<string>): Promise<void> {
  if (donePaths.size !== 1 || !donePaths.has(op.path)) return;
  const check = 'QUERY (a method no route knows) → 501';
  const req = { method: 'QUERY', path: concretePath(op, s) };
  try {
    await send(s.opts.baseUrl, req, 5000);
  } catch (err) {
    if (!closedByPeer(err)) throw err;
    const why =
      'closed unanswered: a bare uWS 20.30 listener answers no method beyond its nine; the front door answers 501';
    return s.record(op, check, 'skip', why);
  }
  await s.probe(op, check, req, {
    status: [501],
    documented: { '501': responseComponent(s.doc, 'NotImplemented') },
    then: problemCode('NOT_IMPLEMENTED'),
  });
}

/** A value that breaks `schema`'s type (or const/enum). */
function wrongValue(doc: Json, raw: Json): unknown {
  const schema = deref(doc, raw);
  if ('const' in schema) return typeof schema.const === 'string' ? 12345 : 'wrong';
  if (Array.isArray(schema.allOf)) {
    for (const part of schema.allOf) {
      const v = wrongValue(doc, part);
      if (v !== undefined) return v;
    }
  }
  if (Array.isArray(schema.anyOf)) {
    // A value of a type no branch takes (`anyOf: [EventType, null]`: a number).
    const branches = schema.anyOf.map((b: Json) => deref(doc, b));
    const candidates = branches.map((b: Json) => wrongValue(doc, b)).filter((v: unknown) => v !== undefined);
    return candidates.find((v: unknown) => branches.every((b: Json) => !takesTypeOf(b, v)));
  }
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  if (type === 'string' || schema.enum) return 12345;
  if (type === 'array') return 'not-an-array';
  if (type === 'object') return 'not-an-object';
  if (type === 'integer' || type === 'number') return 'not-a-number';
  if (type === 'boolean') return 'not-a-boolean';
  return undefined;
}

/** Whether a branch with a `type` could take a value of `v`'s JSON type (no `type`: assume it could). */
function takesTypeOf(schema: Json, v: unknown): boolean {
  if (schema.type === undefined) return true;
  const kind = v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v === 'number' ? 'number' : typeof v;
  const types: string[] = Array.isArray(schema.type) ? schema.type : [schema.type];
  return types.includes(kind) || (kind === 'number' && types.includes('integer') && Number.isInteger(v));
}

export async function bodyCases(s: Session, op: Operation, validBody: Json | undefined): Promise<void> {
  const media = op.requestBody?.content['application/json'];
  if (!media?.schema || validBody === undefined) return;
  const schema = deref(s.doc, media.schema);
  const path = concretePath(op, s);
  const headers = op.scopes === null ? {} : bearer(await s.token(op.scopes[0]));
  const json = { ...headers, 'content-type': 'application/json' };
  const oauth = op.scopes === null;
  await s.probe(
    op,
    'malformed JSON → 400',
    { method: op.method, path, headers: json, body: '{"unterminated": ' },
    { status: [400] },
  );
  const wrong: Json = { ...validBody };
  for (const [name, prop] of Object.entries<Json>(schema.properties ?? {})) {
    const v = wrongValue(s.doc, prop);
    if (v !== undefined && ((schema.required ?? []).includes(name) || name in validBody)) wrong[name] = v;
  }
  await s.probe(
    op,
    'wrong types → 400',
    { method: op.method, path, headers: json, body: JSON.stringify(wrong) },
    {
      status: [400],
      then: (ex) =>
        oauth || (Array.isArray((ex.json as Json)?.errors) && (ex.json as Json).errors.length > 0)
          ? []
          : ['no errors[] naming the fields'],
    },
  );
  if (schema.additionalProperties === false) {
    await s.probe(
      op,
      'unknown field → 400',
      { method: op.method, path, headers: json, body: JSON.stringify({ ...validBody, unexpected_field: true }) },
      { status: [400] },
    );
  }
  const pad = 'x'.repeat(s.maxBodyBytes + 1);
  await s.probe(
    op,
    `oversize body (${s.maxBodyBytes + 1} bytes) → 413`,
    { method: op.method, path, headers: json, body: JSON.stringify({ pad }) },
    { status: [413] },
  );
  await s.probe(
    op,
    'Content-Type text/plain → 415',
    { method: op.method, path, headers: { ...headers, 'content-type': 'text/plain' }, body: JSON.stringify(validBody) },
    { status: [415] },
  );
}
