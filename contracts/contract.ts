/**
 * The contract as data: loads contracts/openapi.yaml and lists its operations with their
 * scopes, request bodies and documented responses ($refs to components resolved).
 *
 *   const doc = loadContract();
 *   for (const op of listOperations(doc)) console.log(op.method, op.path, op.scopes);
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { lazyModule } from '../core/lazy-module.ts';
import { projectPath } from '../core/paths.ts';

/** yaml (72 modules) is loaded only when the YAML is parsed: a process that finds the JSON never needs it. */
const yaml = lazyModule<typeof import('yaml')>('yaml');
const parse = (text: string): unknown => yaml().parse(text);

export const CONTRACT_PATH = projectPath('contracts/openapi.yaml');
/**
 * The contract as JSON, with the digest of the YAML it was made from: `npm run build:server`
 * writes it (contracts/contract-json.ts). Parsing the YAML costs about half a CPU-second, paid by
 * every ingress at start; reading this costs a few milliseconds. The YAML stays the source: a copy
 * whose digest differs is ignored.
 */
export const CONTRACT_JSON_PATH = projectPath('build/contracts/openapi.json');

/** A parsed OpenAPI or JSON document: members are read loosely, as the walkers check shapes themselves. */
// biome-ignore lint/suspicious/noExplicitAny: an untyped JSON document
export type Json = Record<string, any>;

export interface MediaType {
  schema?: Json;
}

export interface HeaderSpec {
  required?: boolean;
  schema?: Json;
}

export interface ResponseSpec {
  description: string;
  headers?: Record<string, HeaderSpec>;
  content?: Record<string, MediaType>;
}

export interface Operation {
  operationId: string;
  method: string; // upper case
  path: string; // /v1/webhooks/endpoints/{endpoint_id}
  /** Scopes the operation needs; null when it takes no token. */
  scopes: string[] | null;
  requestBody: { required: boolean; content: Record<string, MediaType> } | null;
  responses: Record<string, ResponseSpec>;
  parameters: Json[];
}

export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

/** The contract, a fresh copy at each call (callers may change theirs). */
export function loadContract(path = CONTRACT_PATH, compiledPath = CONTRACT_JSON_PATH): Json {
  const text = readFileSync(path, 'utf8');
  const compiled = readCompiled(digestOf(text), compiledPath);
  return compiled ?? (parse(text) as Json);
}

/** Writes the JSON form of the contract at `path` (the build step). */
export function writeContractJson(path = CONTRACT_PATH, out = CONTRACT_JSON_PATH): void {
  const text = readFileSync(path, 'utf8');
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(`${out}.tmp`, JSON.stringify({ digest: digestOf(text), document: parse(text) }));
  renameSync(`${out}.tmp`, out);
}

const digestOf = (text: string): string => createHash('sha256').update(text).digest('hex');

function readCompiled(digest: string, from: string): Json | null {
  let stored: { digest?: unknown; document?: Json };
  try {
    stored = JSON.parse(readFileSync(from, 'utf8'));
  } catch {
    return null; // not built, or a partial file: the YAML is read
  }
  return stored.digest === digest && stored.document ? stored.document : null;
}

/** Follows a local `$ref` (`#/components/...`) until the object is not a reference. */
export function deref<T = Json>(doc: Json, value: unknown): T {
  let v = value as Json | undefined;
  for (let hops = 0; v && typeof v === 'object' && typeof v.$ref === 'string'; hops++) {
    if (hops > 20) throw new Error(`$ref loop at ${v.$ref}`);
    v = pointer(doc, v.$ref);
  }
  return v as T;
}

/** The node at a local `$ref`, read loosely like the document. */
export function pointer(doc: Json, ref: string): Json {
  if (!ref.startsWith('#/')) throw new Error(`only local $refs are supported, got ${ref}`);
  let v: unknown = doc;
  for (const raw of ref.slice(2).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    v = (v as Json | undefined)?.[key];
    if (v === undefined) throw new Error(`cannot resolve ${ref}`);
  }
  return v as Json;
}

export function listOperations(doc: Json): Operation[] {
  const out: Operation[] = [];
  for (const [path, rawItem] of Object.entries<Json>(doc.paths ?? {})) {
    const item = deref(doc, rawItem);
    for (const m of HTTP_METHODS) {
      const op = item[m];
      if (!op) continue;
      const security: Json[] = op.security ?? doc.security ?? [];
      const scopes = security.length === 0 ? null : security.flatMap((s) => Object.values<string[]>(s).flat());
      const rb = op.requestBody ? deref(doc, op.requestBody) : null;
      const responses: Record<string, ResponseSpec> = {};
      for (const [status, r] of Object.entries(op.responses ?? {})) {
        const resp = deref<ResponseSpec>(doc, r);
        const headers: Record<string, HeaderSpec> = {};
        for (const [h, spec] of Object.entries(resp.headers ?? {})) headers[h] = deref<HeaderSpec>(doc, spec);
        responses[status] = { ...resp, headers };
      }
      out.push({
        operationId: op.operationId,
        method: m.toUpperCase(),
        path,
        scopes,
        requestBody: rb ? { required: rb.required === true, content: rb.content ?? {} } : null,
        responses,
        parameters: [...(item.parameters ?? []), ...(op.parameters ?? [])].map((p: Json) => deref(doc, p)),
      });
    }
  }
  return out;
}

/** The documented methods of a path (for the 405 check's Allow header). */
export function methodsOf(doc: Json, path: string): string[] {
  const item = deref(doc, doc.paths?.[path] ?? {});
  return HTTP_METHODS.filter((m) => item[m]).map((m) => m.toUpperCase());
}

/** A documented response component by name (e.g. MethodNotAllowed), headers resolved. */
export function responseComponent(doc: Json, name: string): ResponseSpec {
  const resp = deref<ResponseSpec>(doc, { $ref: `#/components/responses/${name}` });
  const headers: Record<string, HeaderSpec> = {};
  for (const [h, spec] of Object.entries(resp.headers ?? {})) headers[h] = deref<HeaderSpec>(doc, spec);
  return { ...resp, headers };
}
