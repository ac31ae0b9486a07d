/**
 * The request checks of every operation, compiled from the contract once at start-up: path
 * parameters, query parameters and JSON bodies are validated by ajv as contracts/openapi.yaml
 * states them, and ajv's errors become the service's field faults (`$.events[0]`, `query.limit`,
 * `path.id`), which the ingress answers as 400 INVALID_REQUEST (or 413).
 *
 *   const checks = compileRequestChecks(loadContract());
 *   checks('POST', '/v1/webhooks/endpoints')?.body({ url: 42 }); // faults at $.url and $.events
 *
 * What JSON Schema cannot say is said with vendor keywords, so each limit is written once:
 * `x-max-json-bytes` (a value's size as JSON; a field fault), `x-max-payload-bytes` (the same,
 * answered 413) and, on a request body's media type, `x-max-body-bytes` (the raw body, 413).
 */
import { createHash } from 'node:crypto';
import type { ErrorObject, SchemaValidateFunction, ValidateFunction } from 'ajv';
import type { RequestCheck, RequestChecks, RequestFault } from '../ingress/types.ts';
import { deref, listOperations, type Json, type Operation } from './contract.ts';
import { contractAjv, rebase, type Ajv } from './schemas.ts';

interface Compiled {
  maxBodyBytes?: number;
  /** In the order they appear in the path. */
  pathParams: { validate: ValidateFunction }[];
  query: { names: string[]; validate: ValidateFunction; integers: Set<string>; defaults: [string, unknown][] } | null;
  body: (body: unknown) => RequestFault[];
}

const NO_FAULTS: RequestFault[] = [];

export function compileRequestChecks(doc: Json): RequestChecks {
  const ajv = requestAjv(doc);
  const operations = new Map(listOperations(doc).map((op) => [`${op.method} ${skeleton(op.path)}`, op]));
  const compiled = new Map<string, Compiled>();
  // Only the operations a route asks for are compiled (the data plane's 40 are never checked).
  return (method, pattern) => {
    const key = `${method} ${skeleton(pattern)}`;
    const op = operations.get(key);
    if (!op) return undefined;
    let c = compiled.get(key);
    if (!c) {
      c = compileOperation(ajv, doc, op);
      compiled.set(key, c);
    }
    return forRoute(
      c,
      [...pattern.matchAll(/:(\w+)/g)].map((m) => m[1]),
    );
  };
}

/**
 * ajv as the hand-written checks behaved: every fault (bounded later by invalidRequest), own
 * members only (a `__proto__` member never supplies a required field), and `uri` as the WHATWG
 * URL parser the service fetches with: the target guard, not the schema, judges the scheme and
 * the host (422). Lengths are JSON Schema's, in characters (code points), not UTF-16 units.
 */
function requestAjv(doc: Json): Ajv {
  const ajv = contractAjv(doc, { ownProperties: true, verbose: true });
  ajv.addFormat('uri', (s: string) => URL.canParse(s));
  for (const keyword of ['x-max-json-bytes', 'x-max-payload-bytes']) {
    const check: SchemaValidateFunction = (limit: number, data: unknown) => {
      const bytes = Buffer.byteLength(JSON.stringify(data) ?? '');
      if (bytes <= limit) return true;
      check.errors = [{ keyword, params: { limit, bytes }, message: `must be at most ${limit} bytes as JSON` }];
      return false;
    };
    ajv.addKeyword({ keyword, schemaType: 'number', errors: true, validate: check });
  }
  // A string's length in UTF-8 bytes (a Kafka key's size), not in characters.
  const utf8: SchemaValidateFunction = (limit: number, data: unknown) => {
    if (typeof data !== 'string' || Buffer.byteLength(data) <= limit) return true;
    utf8.errors = [
      { keyword: 'x-max-utf8-bytes', params: { limit }, message: `must be at most ${limit} bytes as UTF-8` },
    ];
    return false;
  };
  ajv.addKeyword({ keyword: 'x-max-utf8-bytes', schemaType: 'number', errors: true, validate: utf8 });
  return ajv;
}

/** `/v1/x/{id}/y` and `/v1/x/:id/y` both as `/v1/x/{}/y`. */
function skeleton(path: string): string {
  return path.replace(/\{[^}]+\}|:\w+/g, '{}');
}

function compileOperation(ajv: Ajv, doc: Json, op: Operation): Compiled {
  const compile = (schema: Json) => {
    // Operations share parameter schemas (limit, cursor, ids): each distinct one is compiled once.
    const id = `request-${createHash('sha256').update(JSON.stringify(schema)).digest('hex').slice(0, 32)}`;
    return ajv.getSchema(id) ?? ajv.compile({ $id: id, ...rebase(schema) });
  };
  const names = [...op.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
  const pathParams = names.map((name) => {
    const p = op.parameters.find((x) => x.in === 'path' && x.name === name);
    return { validate: compile(p?.schema ?? {}) };
  });
  const declared = op.parameters.filter((p) => p.in === 'query');
  let query: Compiled['query'] = null;
  if (declared.length > 0) {
    const properties: Json = {};
    for (const p of declared) properties[p.name] = p.schema ?? {};
    const required = declared.filter((p) => p.required).map((p) => p.name);
    const typeOf = (p: Json) => deref(doc, p.schema ?? {}).type;
    query = {
      names: declared.map((p) => p.name),
      validate: compile({ type: 'object', properties, required }),
      integers: new Set(declared.filter((p) => typeOf(p) === 'integer').map((p) => p.name)),
      defaults: declared
        .filter((p) => deref(doc, p.schema ?? {}).default !== undefined)
        .map((p) => [p.name, deref(doc, p.schema).default]),
    };
  }
  const media = op.requestBody?.content['application/json'] as Json | undefined;
  let body: Compiled['body'];
  if (!op.requestBody) body = noBody;
  else if (!media?.schema) body = () => NO_FAULTS;
  else {
    const validate = compile(media.schema);
    const required = op.requestBody.required;
    body = (value) => {
      if (value === undefined) return required ? [{ path: '$', message: 'a JSON body is required' }] : NO_FAULTS;
      return validate(value) ? NO_FAULTS : faultsOf(validate.errors ?? [], '$', value);
    };
  }
  return { maxBodyBytes: media?.['x-max-body-bytes'], pathParams, query, body };
}

/** An operation without a request body takes none; `{}` is let through (clients that always send one). */
function noBody(value: unknown): RequestFault[] {
  const empty = value === undefined || (isObject(value) && Object.keys(value).length === 0);
  return empty ? NO_FAULTS : [{ path: '$', message: 'this operation takes no request body' }];
}

function forRoute(c: Compiled, routeNames: string[]): RequestCheck {
  return {
    maxBodyBytes: c.maxBodyBytes,
    path(params) {
      let faults = NO_FAULTS;
      c.pathParams.forEach(({ validate }, i) => {
        const name = routeNames[i];
        if (name === undefined || validate(params[name])) return;
        faults = [...faults, ...faultsOf(validate.errors ?? [], `path.${name}`, params[name])];
      });
      return faults;
    },
    query(search) {
      const q = c.query;
      if (q === null) return { values: {}, faults: NO_FAULTS };
      const values: Record<string, unknown> = {};
      for (const [name, value] of q.defaults) values[name] = value;
      for (const name of q.names) {
        const raw = search.get(name);
        if (raw === null) continue;
        // Only decimal digits are an integer: ajv's coercion would also take "1e2", "0x10" and " 5".
        values[name] = q.integers.has(name) && /^\d+$/.test(raw) ? Number(raw) : raw;
      }
      return { values, faults: q.validate(values) ? NO_FAULTS : faultsOf(q.validate.errors ?? [], 'query', values) };
    },
    body: c.body,
  };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * ajv's errors as field faults, in the shape the hand-written checks had: one fault per field
 * (its first), `required` and unknown members named at the member, a repeated item at its index,
 * and nothing inside a value whose own type or size is wrong (65 event kinds are one fault).
 */
export function faultsOf(errors: ErrorObject[], base: string, root: unknown): RequestFault[] {
  const all: { fault: RequestFault; hides: boolean }[] = [];
  for (const e of errors) {
    const fault = faultOf(e, base, root);
    if (fault) all.push({ fault, hides: e.keyword === 'type' || e.keyword === 'minItems' || e.keyword === 'maxItems' });
  }
  const hidden = all.filter((f) => f.hides).map((f) => f.fault.path);
  const inside = (path: string) => hidden.some((h) => path.startsWith(`${h}.`) || path.startsWith(`${h}[`));
  const seen = new Set<string>();
  const out: RequestFault[] = [];
  for (const { fault } of all) {
    if (seen.has(fault.path) || inside(fault.path)) continue;
    seen.add(fault.path);
    out.push(fault);
  }
  return out;
}

function faultOf(e: ErrorObject, base: string, root: unknown): RequestFault | null {
  const p = e.params as Json; // each keyword has its own params
  const at = (extra?: string | number) => pathOf(base, e.instancePath, root, extra);
  switch (e.keyword) {
    case 'anyOf':
    case 'oneOf':
    case 'allOf':
    case 'if':
      return null; // the failing branches' own errors say what is wrong
    case 'required':
      return { path: at(p.missingProperty), message: 'is required' };
    case 'additionalProperties':
      return { path: at(p.additionalProperty), message: 'is not a known field' };
    case 'unevaluatedProperties':
      return { path: at(p.unevaluatedProperty), message: 'is not a known field' };
    case 'uniqueItems':
      return { path: at(Math.max(p.i, p.j)), message: 'is listed twice' };
    case 'x-max-payload-bytes':
      return { path: at(), message: `is ${p.bytes} bytes as JSON; at most ${p.limit} may be`, maxBytes: p.limit };
    default:
      return { path: at(), message: messageOf(e) };
  }
}

const TYPE_WORDS: Record<string, string> = {
  object: 'a JSON object',
  array: 'an array',
  string: 'a string',
  integer: 'an integer',
  number: 'a number',
  boolean: 'a boolean',
  null: 'null',
};

function messageOf(e: ErrorObject): string {
  const p = e.params as Json; // each keyword has its own params
  switch (e.keyword) {
    case 'type':
      return `must be ${String(p.type)
        .split(',')
        .map((t) => TYPE_WORDS[t] ?? t)
        .join(' or ')}`;
    case 'minLength':
      return `must be at least ${p.limit} character(s)`;
    case 'maxLength':
      return `must be at most ${p.limit} characters`;
    case 'minItems':
      return `must have at least ${p.limit} item(s)`;
    case 'maxItems':
      return `must have at most ${p.limit} items`;
    case 'maxProperties':
      return `must have at most ${p.limit} members`;
    case 'minProperties':
      return `must have at least ${p.limit} member(s)`;
    case 'minimum':
      return `must be at least ${p.limit}`;
    case 'maximum':
      return `must be at most ${p.limit}`;
    case 'pattern':
      return `must match ${p.pattern}`;
    case 'format':
      return p.format === 'uri' ? 'must be an absolute URL' : `must be a ${p.format}`;
    case 'enum':
      return `must be one of: ${(p.allowedValues as unknown[]).join(', ')}`;
    case 'const':
      return `must be ${JSON.stringify(p.allowedValue)}`;
    case 'not':
      return (e.schema as Json | undefined)?.description ?? 'is not allowed';
    default:
      return e.message ?? 'is invalid';
  }
}

/** `$.events[0].type` from ajv's `/events/0/type`: `[i]` where the value is an array, `.name` elsewhere. */
function pathOf(base: string, pointer: string, root: unknown, extra?: string | number): string {
  let path = base;
  let value: unknown = root;
  const unescapeSegment = (s: string) => s.replace(/~1/g, '/').replace(/~0/g, '~');
  const segments = pointer === '' ? [] : pointer.slice(1).split('/').map(unescapeSegment);
  if (extra !== undefined) segments.push(String(extra));
  for (const s of segments) {
    path += Array.isArray(value) ? `[${s}]` : `.${s}`;
    value = isObject(value) || Array.isArray(value) ? (value as Record<string, unknown>)[s] : undefined;
  }
  return path;
}
