/**
 * Property-based fuzzing of every route over real HTTP: malformed, truncated, deep and huge JSON,
 * duplicate and prototype keys, wrong types for every field, unicode edge cases, odd paths, query
 * strings and headers, with and without a token. The invariants:
 *
 *   - no 5xx, except 502 UPSTREAM_UNAVAILABLE / 504 UPSTREAM_TIMEOUT of a data-plane family with
 *     no upstream configured, and 503 UNAVAILABLE;
 *   - every 4xx has a JSON body: problem+json, or the RFC 6749 shape on POST /v1/auth/token;
 *   - every request is answered (no hang, no connection closed without an answer);
 *   - no 2xx and no upstream answer beyond what the credentials allow: without a valid token
 *     (none, tampered, garbage...) only public routes succeed; a narrow token only where one of
 *     its scopes is needed; another tenant's token never on acme's resources or data, and the
 *     upstream always sees the token's tenant;
 *   - prototype keys (`__proto__`, `constructor`, `prototype`) never change behaviour and never
 *     pollute a prototype;
 *   - the node still answers plain requests afterwards.
 *
 * Deterministic by default (a fixed seed, 5,000 cases in the main property, about 6,000 in all);
 * FUZZ_SEED and FUZZ_RUNS override the seed and the number of cases of the main property,
 * FUZZ_SHRINK=1 shrinks a failure to a minimal case, FUZZ_COLLECT=1 runs on after a violation and
 * lists them all (with the requests before each) at the end.
 *
 *   KAFKA_BROKERS=127.0.0.1:9092 FUZZ_SEED=7 FUZZ_RUNS=10000 node_modules/.bin/tap test/fuzz/routes.test.ts
 *
 * Requests uWS itself refuses before any JavaScript runs (methods other than the standard ones,
 * header names with "_" or spaces, control characters in the request line or in header values,
 * more than 50 headers, HTTP/1.0, absolute-form targets) are not generated: uWS answers none of
 * them and Sluice never sees them.
 */
import t from 'tap';
import fc from 'fast-check';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { Client } from 'undici';
import { startTestNode, call } from '../helpers/sluice.ts';
import { rawHttp } from '../helpers/raw-http.ts';
import { loadContract, listOperations, deref, type Json } from '../../contracts/contract.ts';
import { canonicalPath } from '../../ingress/canonical-path.ts';

const SEED = Number(process.env.FUZZ_SEED ?? 20_251_122);
const RUNS = Number(process.env.FUZZ_RUNS ?? 5000);
const SHRINK = process.env.FUZZ_SHRINK === '1';
/** FUZZ_COLLECT=1: keep going after a violation and list them all at the end (for exploring). */
const COLLECT = process.env.FUZZ_COLLECT === '1';
const collected: string[] = [];
const previous: Case[] = [];
const MAX_BODY = 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// The node, an upstream for one data-plane family, and a webhook receiver (one server for both).

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
}
const upstreamSeen: Seen[] = [];
// Answers are marked, so the check can tell an upstream answer (passed through as it is) from Sluice's.
const receiver = createServer({ maxHeaderSize: 1 << 20 }, (req, res) => {
  if (req.url?.startsWith('/up/')) upstreamSeen.push({ method: req.method!, url: req.url, headers: req.headers });
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json', 'x-fuzz-upstream': '1' });
    res.end(JSON.stringify({ ok: true }));
  });
});
receiver.on('clientError', (_err, socket) =>
  socket.end(
    'HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nx-fuzz-upstream: 1\r\n' +
      'content-length: 2\r\nconnection: close\r\n\r\n{}',
  ),
);
await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
const receiverPort = (receiver.address() as AddressInfo).port;
const receiverUrl = `http://127.0.0.1:${receiverPort}/hook`;

const protoBefore = snapshotPrototypes();
const node = await startTestNode({
  SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
  SLUICE_RATE_LIMIT_PER_CLIENT: '10000000',
  SLUICE_RATE_LIMIT_BURST: '100000000',
  SLUICE_AUTH_FAILURE_RATE: '1000000',
  SLUICE_TOKEN_RATE_PER_MINUTE: '0',
  SLUICE_AUTH_FAILURE_BURST: '1000000',
  // One family with an upstream (its 502s are defects), two without (their 502s are documented).
  SLUICE_UPSTREAM_TELEMETRY: `http://127.0.0.1:${receiverPort}/up`,
});
const http = new Client(node.base, {
  pipelining: 1,
  headersTimeout: 15_000,
  bodyTimeout: 15_000,
  keepAliveTimeout: 4_000,
});
t.teardown(async () => {
  await http.close().catch(() => {});
  await node.close();
  receiver.close();
});
const port = node.ingress!.port;
const adminClient = await node.client('admin', 'acme');
const adminToken = await node.token(adminClient);
const narrowToken = await node.token(await node.client('inference-reader', 'acme'));
const otherTenantToken = await node.token(await node.client('admin', 'globex'));
// Fuzzed revocations may revoke this one; never the admin. The bystander is named only inside
// prototype keys, so it must never be revoked.
const victim = await node.client('webhook-publisher', 'acme');
const bystander = await node.client('webhook-publisher', 'acme');
// Endpoints for the routes that take an id (fuzzed DELETEs may remove some).
const endpointIds: string[] = [];
for (let i = 0; i < 3; i++) {
  const res = await call(node.base, 'POST', '/v1/webhooks/endpoints', {
    token: adminToken,
    body: { url: receiverUrl, events: ['inference.completed'] },
  });
  if (res.status !== 201) throw new Error(`cannot create a seed endpoint: ${res.status} ${res.text}`);
  endpointIds.push(res.json.id);
}
const endpointId = endpointIds[0];

// ---------------------------------------------------------------------------------------------
// Every route: the contract's operations plus the bare data-plane prefixes.

interface RouteInfo {
  method: string;
  /** `/v1/webhooks/endpoints/{endpoint_id}` style. */
  template: string;
  dataPlane: boolean;
  /** Field names of the JSON request body (nested ones too), for targeted mutations. */
  fields: string[];
  /** A valid body, as a JSON value, that mutations start from; undefined: no body. */
  template_body: unknown;
}

const contract = loadContract();
const DATA_PLANE = ['/v1/inference', '/v1/pipelines', '/v1/telemetry'];

function fieldNames(schema: Json | undefined, out = new Set<string>(), hops = 0): Set<string> {
  const s = deref(contract, schema);
  if (!s || typeof s !== 'object' || hops > 6) return out;
  for (const [k, v] of Object.entries<Json>(s.properties ?? {})) {
    out.add(k);
    fieldNames(v, out, hops + 1);
  }
  if (s.items) fieldNames(s.items, out, hops + 1);
  for (const k of ['allOf', 'anyOf', 'oneOf'] as const) for (const sub of s[k] ?? []) fieldNames(sub, out, hops + 1);
  return out;
}

const VALID_BODIES: Record<string, unknown> = {
  'POST /v1/auth/token': {
    grant_type: 'client_credentials',
    client_id: adminClient.client_id,
    client_secret: adminClient.client_secret,
  },
  'POST /v1/auth/revocations': { client_id: victim.client_id, reason: 'fuzz' },
  'POST /v1/webhooks/endpoints': {
    url: receiverUrl,
    events: ['inference.completed', 'pipeline.failed'],
    metadata: { team: 'fuzz', nested: { a: [1, 2] } },
  },
  'DELETE /v1/webhooks/endpoints/{endpoint_id}': {},
  'POST /v1/webhooks/endpoints/{endpoint_id}/verify': {},
  'POST /v1/webhooks/events': { type: 'inference.completed', data: { model: 'm-1', tokens: 3 }, id: 'evt-fuzz-1' },
  'POST /v1/webhooks/events/batch': {
    events: [
      { type: 'inference.completed', data: { n: 1 } },
      { type: 'pipeline.failed', data: null, id: 'b-1' },
    ],
  },
  'POST /v1/webhooks/dlq/replay': { ids: ['dlq_nope'] },
  'POST /v1/webhooks/endpoints/{endpoint_id}/recover': { since: new Date(Date.now() - 3600_000).toISOString() },
};

const ROUTES: RouteInfo[] = [];
for (const op of listOperations(contract)) {
  const key = `${op.method} ${op.path}`;
  const schema =
    op.requestBody?.content['application/json']?.schema ??
    op.requestBody?.content['application/x-www-form-urlencoded']?.schema;
  const fields = [...fieldNames(schema)];
  if (key === 'POST /v1/webhooks/events/batch')
    for (const f of fieldNames({ $ref: '#/components/schemas/EventPublish' })) fields.push(f);
  ROUTES.push({
    method: op.method,
    template: op.path,
    dataPlane: DATA_PLANE.some((p) => op.path.startsWith(p)),
    fields: [...new Set(fields)],
    template_body: VALID_BODIES[key],
  });
}
for (const prefix of DATA_PLANE) {
  for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'])
    ROUTES.push({ method, template: prefix, dataPlane: true, fields: [], template_body: undefined });
}

// ---------------------------------------------------------------------------------------------
// Building blocks.

const PROTO_KEYS = ['__proto__', 'constructor', 'prototype'];
const OBJECT_MEMBERS = [
  'toString',
  'valueOf',
  'hasOwnProperty',
  'isPrototypeOf',
  '__defineGetter__',
  '__lookupGetter__',
];
const EDGE_CHARS = [
  '\u0000',
  '\ud800',
  '\udbff',
  '\udc00',
  '\udfff',
  '\u202e',
  '\u200f',
  '\u200e',
  '\u2066',
  '\ufeff',
  '\uffff',
  '\ufffe',
  '\u2028',
  '\u2029',
  '\u0085',
  '\u001f',
  '\u007f',
  '\u00a0',
  '😀',
  '\u0301',
  'é',
  'ß',
  '"',
  '\\',
  '/',
  '\n',
  '\t',
  '%',
  '.',
  '&',
  '=',
  '+',
  '#',
  '?',
];

const edgeString: fc.Arbitrary<string> = fc.oneof(
  fc.string({ maxLength: 16 }),
  fc.string({ unit: 'binary', maxLength: 8 }),
  fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)), maxLength: 8 }),
  fc.array(fc.constantFrom(...EDGE_CHARS), { minLength: 1, maxLength: 6 }).map((a) => a.join('')),
  fc.constantFrom(...PROTO_KEYS, ...OBJECT_MEMBERS, '', ' ', 'null', 'undefined', 'NaN', '0', '-1', 'true', '[]', '{}'),
);

/** JSON text as a tree, so objects may hold duplicate keys and numbers keep their spelling. */
type J = string | { a: J[] } | { o: [string, J][] };

function emit(j: J): string {
  if (typeof j === 'string') return j;
  if ('a' in j) return `[${j.a.map(emit).join(',')}]`;
  return `{${j.o.map(([k, v]) => `${JSON.stringify(k)}:${emit(v)}`).join(',')}}`;
}

function toJ(v: unknown): J {
  if (Array.isArray(v)) return { a: v.map(toJ) };
  if (v !== null && typeof v === 'object') return { o: Object.entries(v).map(([k, x]) => [k, toJ(x)]) };
  return JSON.stringify(v ?? null);
}

const primitive: fc.Arbitrary<J> = fc.oneof(
  edgeString.map((s) => JSON.stringify(s)),
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => JSON.stringify(d)),
  fc.constantFrom(
    'true',
    'false',
    'null',
    '-0',
    '0.0',
    '1e308',
    '1e400',
    '-1e-400',
    '123456789012345678901234567890',
    '1E+2',
    '0.1e-7',
    '9007199254740993',
    '""',
  ),
);

function jsonTree(keys: fc.Arbitrary<string>, maxDepth = 4): fc.Arbitrary<J> {
  return fc.letrec<{ node: J }>((tie) => ({
    node: fc.oneof(
      { maxDepth, depthIdentifier: 'json' },
      primitive,
      fc.array(tie('node'), { maxLength: 5 }).map((a): J => ({ a })),
      fc.array(fc.tuple(keys, tie('node')), { maxLength: 5 }).map((o): J => ({ o })),
    ),
  })).node;
}

/** A value of a type a field does not expect (or a tricky one it might). */
const wrongValue: fc.Arbitrary<J> = fc.oneof(
  fc.constantFrom<J>(
    '0',
    '-1',
    '1.5',
    '1e308',
    'true',
    'false',
    'null',
    '""',
    '" "',
    '[]',
    '{}',
    '[1,"a",null]',
    '{"a":1}',
    '[[[]]]',
    '"123"',
    '123456789012345678901234567890',
    '[""]',
    '[null]',
    '[{}]',
    '["*","*"]',
  ),
  primitive,
  fc.integer({ min: 129, max: 5000 }).map((n) => JSON.stringify('x'.repeat(n))),
  fc.integer({ min: 60, max: 1100 }).map((n) => JSON.stringify(Array.from({ length: n }, (_, i) => `s${i}`))),
  jsonTree(fc.oneof(edgeString, fc.constantFrom(...PROTO_KEYS)), 3),
);

function pctEncode(s: string): string {
  return [...Buffer.from(s, 'utf8')]
    .map((b) =>
      /[A-Za-z0-9\-._~]/.test(String.fromCharCode(b))
        ? String.fromCharCode(b)
        : `%${b.toString(16).toUpperCase().padStart(2, '0')}`,
    )
    .join('');
}

// ---------------------------------------------------------------------------------------------
// Bodies.

interface Body {
  kind: string;
  bytes: Buffer;
  chunked?: boolean;
}

const text = (kind: string, s: string, chunked = false): Body => ({ kind, bytes: Buffer.from(s, 'utf8'), chunked });

interface Mutation {
  path: number[];
  op: 'set' | 'delete' | 'dup' | 'add' | 'proto' | 'proto-wrap';
  pick: number;
  key: string;
  value: J;
  /** For 'set' on a field with values of its own below: use one of those (index) instead. */
  tricky: number | null;
}

/**
 * Values of the right type that probe each field's rules. Never the admin's client id (a fuzzed
 * revocation would end the run) and no host name that needs DNS.
 */
const loopbackUrl = (path: string) => `http://127.0.0.1:${receiverPort}${path}`;
const TRICKY: Record<string, unknown[]> = {
  url: [
    'http://127.0.0.1:1/',
    `http://[::1]:${receiverPort}/hook`,
    'http://169.254.169.254/latest',
    'http://[::ffff:169.254.169.254]/',
    'https://user:pw@127.0.0.1/',
    'http://0x7f.1/',
    'http://127.1:1/',
    'file:///etc/passwd',
    'javascript:alert(1)',
    'http://127.0.0.1:99999/',
    'HTTP://127.0.0.1:1/',
    `http://localhost:${receiverPort}/hook`,
    'http://[fe80::1%25eth0]/',
    'http://%31%32%37.0.0.1:1/',
    'http:/127.0.0.1/',
    'http://',
    '//127.0.0.1/',
    loopbackUrl(`/hook?${'q'.repeat(1900)}`),
    loopbackUrl(`/${'a'.repeat(2100)}`),
    loopbackUrl('/hook#frag'),
    loopbackUrl('/\u0000'),
    'http://0.0.0.0:1/',
    'http://[::]:1/',
    'ftp://127.0.0.1/',
    'http://metadata.google.internal/',
    'http://100.100.100.200/',
  ],
  events: [
    [],
    ['*'],
    ['*', '*'],
    ['inference.completed', 'inference.completed'],
    ['ping'],
    ['nope.nope'],
    ['INFERENCE.COMPLETED'],
    Array.from({ length: 65 }, (_, i) => `k.e${i}`),
    Array.from({ length: 64 }, () => '*'),
    ['x'.repeat(129)],
    [''],
    ['*', 'inference.completed'],
  ],
  metadata: [
    null,
    {},
    { __proto__: null, a: 1 },
    { a: 'x'.repeat(5000) },
    Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, i])),
    { constructor: { prototype: { polluted: 1 } } },
  ],
  type: [
    'ping',
    'a.b',
    'A.B',
    'a.b.c',
    'a',
    `${'a'.repeat(32)}.${'b'.repeat(32)}`,
    `${'a'.repeat(33)}.b`,
    'inference.completed',
    'x'.repeat(66),
    'a_.b_',
    '1a.b',
    'a.',
    '.b',
    'credential.revoked',
  ],
  id: [
    'evt-fuzz-1',
    'evt-fuzz-1',
    '',
    '-x',
    'x'.repeat(128),
    'x'.repeat(129),
    'a:b.c-d_e',
    'ü',
    'a b',
    '__proto__',
    'constructor',
  ],
  data: [null, 0, '', [], {}, 'x'.repeat(262_000), { nested: { deeper: [1, { __proto__: null }] } }],
  grant_type: ['client_credentials', 'CLIENT_CREDENTIALS', 'password', 'authorization_code', '', 'client_credentials '],
  client_id: [victim.client_id, 'cl_nope', '', 'x'.repeat(201), 'x'.repeat(200)],
  client_secret: [victim.client_secret, adminClient.client_secret.slice(0, -1), '', 'x'.repeat(10_000)],
  scope: [
    'audit:read',
    'audit:read audit:read',
    'x:y',
    ' ',
    '',
    'audit:read  webhooks:read',
    'AUDIT:READ',
    'audit:read\twebhooks:read',
    'credentials:read-any credentials:revoke',
  ],
  reason: ['', ' ', 'x'.repeat(1000), 'x'.repeat(1001), '\u0000'],
  ids: [
    [],
    [''],
    ['x'.repeat(128)],
    ['x'.repeat(129)],
    ['a', 'a'],
    Array.from({ length: 1001 }, (_, i) => `d${i}`),
    Array.from({ length: 1000 }, (_, i) => `d${i}`),
  ],
  endpoint_id: ['', 'x'.repeat(128), 'x'.repeat(129), endpointId, '__proto__'],
  event_type: ['', 'a.b', 'ping', 'A.B', 'x'.repeat(66)],
};

/** Applies a mutation at the node reached by following `path` (indexes modulo the children). */
function mutate(j: J, m: Mutation, template: J, depth = 0): J {
  if (typeof j === 'string') return m.op === 'delete' ? j : m.value;
  const kids: J[] = 'a' in j ? j.a : j.o.map(([, v]) => v);
  if (depth < m.path.length && kids.length > 0) {
    const i = m.path[depth] % kids.length;
    const kid = kids[i];
    if (typeof kid !== 'string') {
      const next = mutate(kid, m, template, depth + 1);
      return 'a' in j
        ? { a: j.a.map((x, k) => (k === i ? next : x)) }
        : { o: j.o.map(([k, v], n) => [k, n === i ? next : v]) };
    }
  }
  if ('a' in j) {
    const i = j.a.length === 0 ? 0 : m.pick % j.a.length;
    if (m.op === 'delete') return { a: j.a.filter((_, k) => k !== i) };
    if (m.op === 'set' && j.a.length > 0) return { a: j.a.map((x, k) => (k === i ? m.value : x)) };
    return { a: [...j.a, m.value] };
  }
  const i = j.o.length === 0 ? 0 : m.pick % j.o.length;
  switch (m.op) {
    case 'delete':
      return { o: j.o.filter((_, k) => k !== i) };
    case 'set': {
      if (j.o.length === 0) return { o: [[m.key, m.value]] };
      const tricky = m.tricky === null ? undefined : TRICKY[j.o[i][0]];
      const value = tricky?.length ? toJ(tricky[m.tricky! % tricky.length]) : m.value;
      return { o: j.o.map(([k, v], n) => [k, n === i ? value : v]) };
    }
    case 'dup':
      return j.o.length === 0
        ? {
            o: [
              [m.key, m.value],
              [m.key, m.value],
            ],
          }
        : m.pick % 2
          ? { o: [...j.o, [j.o[i][0], m.value]] }
          : { o: [[j.o[i][0], m.value], ...j.o] };
    case 'add':
      return { o: [...j.o, [m.key, m.value]] };
    case 'proto':
      // A prototype key holding the valid body: must never count as the body's own fields.
      return { o: [...j.o, [PROTO_KEYS[m.pick % PROTO_KEYS.length], m.pick % 3 === 0 ? template : m.value]] };
    case 'proto-wrap':
      return { o: [[PROTO_KEYS[m.pick % PROTO_KEYS.length], j]] };
  }
}

const GARBAGE = [
  '{',
  '}',
  '[',
  ']',
  ',',
  ':',
  '"',
  '\\',
  '\\x',
  '\\u12',
  '\\ud800',
  '\u0000',
  'NaN',
  'Infinity',
  '-Infinity',
  'undefined',
  "'",
  '//c',
  '/*c*/',
  '\ufeff',
  '01',
  '-',
  '+1',
  '.5',
  '1.',
  'tru',
  'nul',
  '\t',
  '\u00a0',
  '\u2028',
  ',,',
  '{"a"',
  '"\n"',
  '\u0001',
  '}}}}',
  ']]]]',
];

function deepText(depth: number, kind: 'arr' | 'obj' | 'mixed' | 'proto', closed: boolean): string {
  const open = (i: number) =>
    kind === 'arr' || (kind === 'mixed' && i % 2) ? '[' : kind === 'proto' ? `{"${PROTO_KEYS[i % 3]}":` : '{"a":';
  const close = (i: number) => (kind === 'arr' || (kind === 'mixed' && i % 2) ? ']' : '}');
  let s = '';
  for (let i = 0; i < depth; i++) s += open(i);
  s += '1';
  if (closed) for (let i = depth - 1; i >= 0; i--) s += close(i);
  return s;
}

function bodyArb(route: RouteInfo): fc.Arbitrary<Body> {
  const template = route.template_body === undefined ? ({ o: [] } as J) : toJ(route.template_body);
  const keys = fc.oneof(fc.constantFrom(...(route.fields.length ? route.fields : ['a']), ...PROTO_KEYS), edgeString);
  const mutation: fc.Arbitrary<Mutation> = fc.record({
    path: fc.array(fc.nat(), { maxLength: 3 }),
    op: fc.constantFrom('set', 'set', 'set', 'delete', 'dup', 'add', 'proto', 'proto-wrap'),
    pick: fc.nat(),
    key: keys,
    value: wrongValue,
    tricky: fc.option(fc.nat(), { freq: 2 }),
  });
  const validText = fc.oneof(fc.constant(emit(template)), jsonTree(keys).map(emit));
  return fc.oneof(
    // Wrong types, missing, duplicate, unknown and prototype keys around a valid body.
    {
      weight: 8,
      arbitrary: fc
        .array(mutation, { minLength: 1, maxLength: 3 })
        .map((ms) => text('mutated', emit(ms.reduce((j, m) => mutate(j, m, template), template)))),
    },
    // The valid body itself (the deeper code paths run).
    { weight: 2, arbitrary: fc.constant(text('valid', emit(template))) },
    // Random JSON values with keys the route knows.
    { weight: 3, arbitrary: jsonTree(keys).map((j) => text('random-json', emit(j))) },
    // Malformed and truncated JSON.
    {
      weight: 5,
      arbitrary: fc
        .record({
          base: validText,
          op: fc.constantFrom('truncate', 'insert', 'delete', 'replace', 'append', 'prepend'),
          pos: fc.nat(),
          len: fc.integer({ min: 1, max: 8 }),
          g: fc.oneof(fc.constantFrom(...GARBAGE), edgeString),
        })
        .map(({ base, op, pos, len, g }) => {
          const p = base.length === 0 ? 0 : pos % base.length;
          const s =
            op === 'truncate'
              ? base.slice(0, p)
              : op === 'insert'
                ? base.slice(0, p) + g + base.slice(p)
                : op === 'delete'
                  ? base.slice(0, p) + base.slice(p + len)
                  : op === 'replace'
                    ? base.slice(0, p) + g + base.slice(p + g.length)
                    : op === 'append'
                      ? base + g
                      : g + base;
          return text(`malformed-${op}`, s);
        }),
    },
    // Deep nesting: bare or inside a field of the valid body, at the limit (64) or far beyond.
    {
      weight: 3,
      arbitrary: fc
        .record({
          depth: fc.oneof(fc.integer({ min: 60, max: 70 }), fc.integer({ min: 60, max: 10_000 })),
          kind: fc.constantFrom<'arr' | 'obj' | 'mixed' | 'proto'>('arr', 'obj', 'mixed', 'proto'),
          closed: fc.boolean(),
          embed: fc.boolean(),
          pick: fc.nat(),
        })
        .map(({ depth, kind, closed, embed, pick }) => {
          const deep = deepText(depth, kind, closed);
          if (!embed || typeof template === 'string' || !('o' in template) || template.o.length === 0)
            return text('deep', deep);
          const i = pick % template.o.length;
          return text(
            'deep-field',
            emit({ o: template.o.map(([k, v], n) => [k, n === i ? '\u0001DEEP\u0001' : v]) }).replace(
              '\u0001DEEP\u0001',
              deep,
            ),
          );
        }),
    },
    // Huge strings and arrays, within and beyond the 1 MiB body limit, sometimes chunked.
    {
      weight: 1,
      arbitrary: fc
        .record({
          size: fc.constantFrom(
            1000,
            70_000,
            262_145,
            MAX_BODY - 200,
            MAX_BODY - 1,
            MAX_BODY + 1,
            1_500_000,
            2_200_000,
          ),
          kind: fc.constantFrom('string', 'array', 'keys', 'field'),
          chunked: fc.boolean(),
          pick: fc.nat(),
        })
        .map(({ size, kind, chunked, pick }) => {
          let s: string;
          if (kind === 'string') s = JSON.stringify('a'.repeat(size));
          else if (kind === 'array') s = `[${'0,'.repeat(Math.floor(size / 2))}0]`;
          else if (kind === 'keys')
            s = `{${Array.from({ length: Math.floor(size / 12) }, (_, i) => `"k${i}":0`).join(',')}}`;
          else {
            const o =
              typeof template !== 'string' && 'o' in template && template.o.length > 0
                ? template.o
                : [['data', '0'] as [string, J]];
            const i = pick % o.length;
            s = emit({
              o: o.map(([k, v], n) => [
                k,
                n === i
                  ? pick % 2
                    ? JSON.stringify('é'.repeat(size / 2))
                    : `[${'"x",'.repeat(Math.floor(size / 4))}"x"]`
                  : v,
              ]),
            });
          }
          return text(`huge-${kind}`, s, chunked);
        }),
    },
    // Bytes that are not UTF-8 (or not text), and bodies with nothing in them.
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }).map((b) => ({ kind: 'bytes', bytes: Buffer.from(b) })) },
    {
      weight: 1,
      arbitrary: fc
        .record({
          prefix: fc.constantFrom('{"type":"', '{"url":"', '{"grant_type":"', '["', '{"'),
          bytes: fc.uint8Array({ minLength: 1, maxLength: 8 }),
        })
        .map(({ prefix, bytes }) => ({
          kind: 'bad-utf8',
          bytes: Buffer.concat([
            Buffer.from(prefix),
            Buffer.from([0xed, 0xa0, 0x80]),
            Buffer.from(bytes),
            Buffer.from('":1}'),
          ]),
        })),
    },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom('', ' ', '\r\n', '\ufeff{}', 'null', '0', '""', '[]', '{}', '\u0000')
        .map((s) => text('empty-ish', s)),
    },
    // Form bodies: duplicate, prototype and percent-garbage keys.
    {
      weight: 2,
      arbitrary: fc
        .array(
          fc.tuple(
            fc.oneof(keys, fc.constantFrom('grant_type', 'client_id', 'client_secret', 'scope')),
            fc.oneof(
              edgeString,
              fc.constantFrom('client_credentials', adminClient.client_id, adminClient.client_secret),
            ),
            fc.constantFrom('encode', 'raw', 'bare'),
          ),
          { maxLength: 6 },
        )
        .map((pairs) =>
          text(
            'form',
            pairs
              .map(([k, v, how]) =>
                how === 'encode' ? `${pctEncode(k)}=${pctEncode(v)}` : how === 'raw' ? `${k}=${v}` : k,
              )
              .join('&'),
          ),
        ),
    },
  );
}

// ---------------------------------------------------------------------------------------------
// Paths, query strings and headers.

const REAL_IDS = [adminClient.client_id, victim.client_id, ...endpointIds, 'dlq_nope', 'ep_nope'];
const SEGMENT_TRAPS = [
  '.',
  '..',
  '%2e',
  '%2E%2e',
  '.%2e',
  '%2f',
  '%2F',
  '%5c',
  '\\',
  '%00',
  '%',
  '%zz',
  '%1',
  '%%',
  '%C3',
  '%C3%28',
  '%ED%A0%80',
  '%EF%BF%BF',
  ';',
  ';x=1',
  '~',
  '%7E',
  '%65xport',
  'export',
  'EXPORT',
  '*',
  ':id',
  '{endpoint_id}',
  '#',
  '%23',
  '%3F',
  '@',
  "!$&'()*+,;=",
  '%20',
  '+',
  '%2B',
  '%u0041',
  '..%2f..',
  'a%00b',
];

const segment: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...REAL_IDS) },
  { weight: 2, arbitrary: fc.string({ minLength: 1, maxLength: 20 }).map(pctEncode) },
  { weight: 3, arbitrary: fc.constantFrom(...SEGMENT_TRAPS) },
  { weight: 2, arbitrary: edgeString.map(pctEncode) },
  // raw: unicode in the request line
  { weight: 1, arbitrary: edgeString.filter((s) => !/[\u0000-\u0020\u007f/?]/.test(s)) },
  { weight: 1, arbitrary: fc.constantFrom(...PROTO_KEYS, ...OBJECT_MEMBERS) },
  { weight: 1, arbitrary: fc.integer({ min: 200, max: 9000 }).map((n) => 'a'.repeat(n)) },
);

function pathArb(route: RouteInfo): fc.Arbitrary<string> {
  const params = route.template.match(/\{[^}]+\}/g) ?? [];
  const filled = fc
    .array(fc.array(segment, { minLength: 1, maxLength: route.dataPlane ? 4 : 1 }), {
      minLength: params.length,
      maxLength: params.length,
    })
    .map((values) => {
      let i = 0;
      return route.template.replace(/\{[^}]+\}/g, () => values[i++].join('/'));
    });
  return fc.oneof(
    { weight: 6, arbitrary: route.template.includes('{') ? filled : fc.constant(route.template) },
    {
      weight: 4,
      arbitrary: fc
        .record({
          base: route.template.includes('{') ? filled : fc.constant(route.template),
          op: fc.constantFrom(
            'double-slash',
            'trailing',
            'dots',
            'prefix-dots',
            'encoded-slash',
            'long',
            'upper',
            'append',
            'percent-garbage',
            'unicode',
            'empty-end',
          ),
          pick: fc.nat(),
          seg: segment,
          n: fc.integer({ min: 2, max: 3000 }),
        })
        .map(({ base, op, pick, seg, n }) => {
          const parts = base.split('/');
          const at = 1 + (pick % Math.max(1, parts.length - 1));
          switch (op) {
            case 'double-slash':
              return [...parts.slice(0, at), '', ...parts.slice(at)].join('/');
            case 'trailing':
              return `${base}/`;
            case 'dots':
              return [...parts.slice(0, at), pick % 2 ? '.' : '..', ...parts.slice(at)].join('/');
            case 'prefix-dots':
              return `/..${base}`;
            case 'encoded-slash': {
              const i = Math.max(2, at);
              return [
                ...parts.slice(0, i - 1),
                parts.slice(i - 1, i + 1).join(pick % 2 ? '%2F' : '%5C'),
                ...parts.slice(i + 1),
              ].join('/');
            }
            case 'long':
              return `${base}${`/${seg}`.repeat(Math.min(n, Math.floor(60_000 / (seg.length + 1))))}`;
            case 'upper':
              return base.toUpperCase();
            case 'append':
              return `${base}/${seg}`;
            case 'percent-garbage':
              return [
                ...parts.slice(0, at),
                `${parts[at] ?? ''}${['%', '%G', '%1', '%%41'][pick % 4]}`,
                ...parts.slice(at + 1),
              ].join('/');
            case 'unicode':
              return [
                ...parts.slice(0, at),
                ['ü', '😀', '\u202e', '\ufeff', 'ı', 'ſ'][pick % 6] + (parts[at] ?? ''),
                ...parts.slice(at + 1),
              ].join('/');
            case 'empty-end':
              return `${base}//`;
          }
          return base;
        }),
    },
  );
}

const QUERY_VALUES = [
  '0',
  '1',
  '1000',
  '1001',
  '-1',
  '1.5',
  '1e3',
  '0x10',
  ' 5',
  '5 ',
  '+5',
  '\u0663',
  '',
  'NaN',
  'Infinity',
  '999999999999999999999',
  '00001',
  '1.abc',
  '0.',
  '123456789012345.x',
  '1234567890123456',
  `1.${'a'.repeat(129)}`,
  '9'.repeat(400),
  '1732245000000.dlq_ab12',
  '1.__proto__',
  '%',
  '%zz',
  'a=b',
  'inference.completed',
  'ping',
  'A.B',
  '*',
];
const queryPair = fc.tuple(
  fc.oneof(
    fc.constantFrom(
      'limit',
      'cursor',
      'endpoint_id',
      'event_type',
      '__proto__',
      'constructor',
      'toString',
      'limit[]',
      'cursor[0]',
      'LIMIT',
      '',
    ),
    edgeString.map(pctEncode),
  ),
  // Unencoded values too, but never a space or a control character: uWS drops such a request line.
  fc.oneof(
    fc.constantFrom(...QUERY_VALUES).map(pctEncode),
    fc.constantFrom(...QUERY_VALUES.filter((v) => !/[\u0000-\u0020\u007f]/.test(v))),
    edgeString.map(pctEncode),
  ),
  fc.constantFrom('=', '', '=='),
);
const queryArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constant('') },
  {
    weight: 5,
    arbitrary: fc
      .array(queryPair, { minLength: 1, maxLength: 6 })
      .map((ps) => ps.map(([k, v, eq]) => (eq === '' ? k : `${k}${eq}${v}`)).join('&')),
  },
  {
    weight: 1,
    arbitrary: fc
      .record({
        k: fc.constantFrom('limit', 'cursor', 'endpoint_id', 'event_type', 'x'),
        n: fc.integer({ min: 1000, max: 30_000 }),
        c: fc.constantFrom('9', 'a', '%41', '.'),
      })
      .map(({ k, n, c }) => `${k}=${c.repeat(Math.ceil(n / c.length))}`),
  },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 2, max: 400 }).map((n) => Array.from({ length: n }, (_, i) => `limit=${i}`).join('&')),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '&&&',
      '=',
      '==',
      '?',
      '%',
      '%zz',
      'a=%',
      ';',
      'limit',
      'limit=',
      'cursor=',
      '&limit=1&',
      'limit=1;cursor=2',
      'limit=1%00',
      'cursor=%00',
      'cursor=1.%2F',
      '\u00fc=\u00fc',
      'limit=\ud83d\ude00',
    ),
  },
);

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'Application/JSON',
  'application/json;charset=latin1',
  'application/json; charset="utf-8"; foo=bar',
  'application/json ; x',
  'application/json;',
  ';application/json',
  'application/json, text/plain',
  'application/jsonx',
  'application/json5',
  'application/problem+json',
  'text/json',
  'text/plain',
  'application/x-www-form-urlencoded',
  'application/x-www-form-urlencoded; charset=utf-8',
  'multipart/form-data; boundary=----x',
  'application/octet-stream',
  '*/*',
  '',
  ' ',
  'application/json\u00e9',
  'application/json; charset=\u00fc',
  'application/json; charset=utf-16',
  '\tapplication/json',
];

type AuthMode =
  | 'none'
  | 'admin'
  | 'narrow'
  | 'other-tenant'
  | 'tampered'
  | 'garbage'
  | 'long'
  | 'lower'
  | 'spaces'
  | 'two-admin'
  | 'admin-garbage'
  | 'basic-admin'
  | 'basic-garbage'
  | 'non-ascii'
  | 'empty'
  | 'padded'
  | 'scheme';

function authHeaders(mode: AuthMode, g: string, n: number): [string, string][] {
  const bearer = (v: string): [string, string] => ['authorization', `Bearer ${v}`];
  switch (mode) {
    case 'none':
      return [];
    case 'admin':
      return [bearer(adminToken)];
    case 'narrow':
      return [bearer(narrowToken)];
    case 'other-tenant':
      return [bearer(otherTenantToken)];
    case 'tampered': {
      const i = 10 + (n % (adminToken.length - 10));
      return [bearer(adminToken.slice(0, i) + (adminToken[i] === 'A' ? 'B' : 'A') + adminToken.slice(i + 1))];
    }
    case 'garbage':
      return [bearer(pctEncode(g) || 'x')];
    case 'long':
      return [bearer('A'.repeat(1000 + (n % 30_000)))];
    case 'lower':
      return [['authorization', `bearer ${adminToken}`]];
    case 'spaces':
      return [['authorization', `  Bearer   ${adminToken}  `]];
    case 'two-admin':
      return [bearer(adminToken), bearer(adminToken)];
    case 'admin-garbage':
      return n % 2 ? [bearer(adminToken), bearer('garbage')] : [bearer('garbage'), bearer(adminToken)];
    case 'basic-admin':
      return [
        [
          'authorization',
          `Basic ${Buffer.from(`${adminClient.client_id}:${adminClient.client_secret}`).toString('base64')}`,
        ],
      ];
    case 'basic-garbage':
      return [
        [
          'authorization',
          `Basic ${n % 2 ? Buffer.from(g).toString('base64') : g.replace(/[\u0000-\u001f\u007f]/g, '')}`,
        ],
      ];
    case 'non-ascii':
      return [['authorization', `Bearer ${g.replace(/[\u0000-\u001f\u007f]/g, '')}\u00e9\u20ac`]];
    case 'empty':
      return [['authorization', n % 2 ? '' : 'Bearer ']];
    case 'padded':
      return [bearer(`${adminToken}${'='.repeat(1 + (n % 5))}`)];
    case 'scheme':
      return [['authorization', `${['Token', 'Digest', 'Bearer:', 'Bearer\t', 'MAC'][n % 5]} ${adminToken}`]];
  }
}

const HEADER_NAMES = [
  'x-forwarded-for',
  'x-forwarded-host',
  'forwarded',
  'x-real-ip',
  'x-http-method-override',
  'x-original-url',
  'x-sluice-tenant',
  'cookie',
  'accept',
  'accept-encoding',
  'content-encoding',
  'expect',
  'te',
  'constructor',
  'toString',
  'hasOwnProperty',
  'valueOf',
  'prototype',
  'x-a',
  'content-language',
  'origin',
  'referer',
  'user-agent',
  'range',
  'idempotency-key',
  'X-Mixed-Case',
  'proxy-authorization',
  'keep-alive',
  'trailer',
  'content-md5',
  'if-none-match',
];
const HEADER_VALUES = [
  '',
  ' ',
  '100-continue',
  'gzip',
  'gzip, chunked',
  'DELETE',
  '/v1/audit',
  '127.0.0.1',
  'evil',
  'trailers',
  'bytes=0-1',
  '*',
  'for=1.2.3.4',
  'a=b; c=d',
  'Basic eDp5',
  'timeout=5',
];
// Control characters (other than tab) make uWS drop the request before Sluice sees it.
const headerValue: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(...HEADER_VALUES),
  edgeString.map((s) => s.replace(/[\u0000-\u0008\u000a-\u001f]/g, '')),
  fc.integer({ min: 1000, max: 20_000 }).map((n) => 'v'.repeat(n)),
);

interface HeaderSet {
  contentType: string | null;
  auth: AuthMode;
  extra: [string, string][];
}

const headerSetArb: fc.Arbitrary<{ set: HeaderSet; g: string; n: number }> = fc.record({
  set: fc.record({
    contentType: fc.oneof(
      { weight: 6, arbitrary: fc.constant('application/json') },
      { weight: 1, arbitrary: fc.constant(null) },
      { weight: 4, arbitrary: fc.constantFrom(...CONTENT_TYPES) },
      { weight: 1, arbitrary: edgeString.map((s) => s.replace(/[\u0000-\u0008\u000a-\u001f]/g, '')) },
    ),
    auth: fc.oneof(
      { weight: 8, arbitrary: fc.constant<AuthMode>('admin') },
      { weight: 3, arbitrary: fc.constant<AuthMode>('none') },
      {
        weight: 6,
        arbitrary: fc.constantFrom<AuthMode>(
          'narrow',
          'other-tenant',
          'tampered',
          'garbage',
          'long',
          'lower',
          'spaces',
          'two-admin',
          'admin-garbage',
          'basic-admin',
          'basic-garbage',
          'non-ascii',
          'empty',
          'padded',
          'scheme',
        ),
      },
    ),
    extra: fc.oneof(
      { weight: 3, arbitrary: fc.constant([] as [string, string][]) },
      {
        weight: 2,
        arbitrary: fc.array(fc.tuple(fc.constantFrom(...HEADER_NAMES), headerValue), { minLength: 1, maxLength: 4 }),
      },
    ),
  }),
  g: edgeString,
  n: fc.nat(),
});

// ---------------------------------------------------------------------------------------------
// Cases, transport and the invariants.

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT'];

interface Case {
  family: string;
  method: string;
  path: string;
  query: string;
  headers: [string, string][];
  body: Body | null;
  raw: boolean;
  /** The credentials sent (the Authorization header), which the auth invariant judges answers by. */
  auth: AuthMode;
}

function caseArb(route: RouteInfo): fc.Arbitrary<Case> {
  return fc
    .record({
      family: fc.oneof(
        { weight: 6, arbitrary: fc.constant('body') },
        { weight: 2, arbitrary: fc.constant('path') },
        { weight: 1, arbitrary: fc.constant('query') },
        { weight: 2, arbitrary: fc.constant('headers') },
      ),
      method: fc.oneof(
        { weight: 9, arbitrary: fc.constant(route.method) },
        { weight: 1, arbitrary: fc.constantFrom(...METHODS) },
      ),
      path: pathArb(route),
      query: queryArb,
      headers: headerSetArb,
      body: fc.option(bodyArb(route), { freq: 6 }),
      raw: fc.boolean(),
    })
    .map(({ family, method, path, query, headers, body, raw }) => {
      // Each case stresses one area; the others stay plain so the stressed one is reached.
      const plainPath = route.template.replace(/\{[^}]+\}/g, () => endpointIds[headers.n % endpointIds.length]);
      const h: HeaderSet =
        family === 'headers'
          ? headers.set
          : {
              contentType: headers.set.contentType === null ? null : 'application/json',
              auth: headers.set.auth === 'none' ? 'none' : 'admin',
              extra: [],
            };
      const list: [string, string][] = [...authHeaders(h.auth, headers.g, headers.n), ...h.extra];
      const wantsBody = family === 'body' || ['POST', 'PUT', 'PATCH', 'DELETE'].includes(method);
      const b = wantsBody
        ? family === 'body'
          ? (body ?? text('empty', ''))
          : route.template_body === undefined
            ? body
            : text('valid', JSON.stringify(route.template_body))
        : null;
      if (b && b.bytes.length > 0 && h.contentType !== null)
        list.push([
          'content-type',
          b.kind === 'form' && family === 'body' && headers.n % 3 !== 0
            ? 'application/x-www-form-urlencoded'
            : h.contentType,
        ]);
      return {
        family,
        method,
        path: family === 'path' ? path : plainPath,
        query: family === 'query' ? query : '',
        headers: list,
        body: b,
        raw: raw || method === 'CONNECT',
        auth: h.auth,
      };
    });
}

// The data plane is 40 of the routes but one code path: the control plane's routes weigh more.
const allCases: fc.Arbitrary<Case> = fc.oneof(
  ...ROUTES.map((r) => ({ weight: r.dataPlane ? 1 : 4, arbitrary: caseArb(r) })),
);

interface Response {
  status: number;
  headers: Record<string, string>;
  body: string;
}

function parseRaw(text: string, method: string): Response | null {
  let rest = text;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) return null;
    const head = rest.slice(0, end).split('\r\n');
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(head[0]);
    if (!m) return null;
    const status = Number(m[1]);
    rest = rest.slice(end + 4);
    if (status >= 100 && status < 200) continue;
    const headers: Record<string, string> = {};
    for (const line of head.slice(1)) {
      const i = line.indexOf(':');
      headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    const len = headers['content-length'] === undefined ? rest.length : Number(headers['content-length']);
    const body = method === 'HEAD' ? '' : Buffer.from(rest.slice(0, len), 'latin1').toString('utf8');
    return { status, headers, body };
  }
}

function chunks(bytes: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0, n = 1; i < bytes.length; i += n, n = Math.min(n * 7, 256 * 1024)) out.push(bytes.subarray(i, i + n));
  return out;
}

async function sendRaw(c: Case): Promise<Response | string> {
  const target = `${c.path}${c.query ? `?${c.query}` : ''}`;
  const lines = [
    `${c.method} ${target} HTTP/1.1`,
    'host: 127.0.0.1',
    'connection: close',
    ...c.headers.map(([k, v]) => `${k}: ${v}`),
  ];
  let payload: Buffer = Buffer.alloc(0);
  if (c.body?.chunked) {
    lines.push('transfer-encoding: chunked');
    payload = Buffer.concat([
      ...chunks(c.body.bytes).flatMap((b) => [Buffer.from(`${b.length.toString(16)}\r\n`), b, Buffer.from('\r\n')]),
      Buffer.from('0\r\n\r\n'),
    ]);
  } else if (c.body) {
    lines.push(`content-length: ${c.body.bytes.length}`);
    payload = c.body.bytes;
  }
  const res = await rawHttp(
    port,
    Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'utf8'), payload]),
    10_000,
  );
  const answer = parseRaw(res.text, c.method);
  if (!answer)
    return (
      `no answer (${res.closed ? 'connection closed' : 'silence for 10 s'}); ` +
      `got ${JSON.stringify(res.text.slice(0, 200))}`
    );
  // Asked for `Connection: close`: an answer on a connection left open is a client left waiting.
  if (!res.closed)
    return `${answer.status} answered, but the connection stayed open for 10 s after it (Connection: close)`;
  return answer;
}

async function send(c: Case): Promise<Response | string> {
  if (c.raw) return sendRaw(c);
  const headers = c.headers.flat();
  const body = c.body === null ? undefined : c.body.chunked ? Readable.from(chunks(c.body.bytes)) : c.body.bytes;
  try {
    const res = await http.request({
      path: `${c.path}${c.query ? `?${c.query}` : ''}`,
      method: c.method as 'GET',
      headers,
      body,
    });
    const text = await res.body.text();
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(res.headers)) out[k] = Array.isArray(v) ? v.join(', ') : String(v ?? '');
    return { status: res.statusCode, headers: out, body: text };
  } catch (err) {
    const code = (err as { code?: string }).code;
    // undici refuses to send some requests (a path or header it finds invalid): send them raw.
    if (code === 'UND_ERR_INVALID_ARG' || code === 'UND_ERR_NOT_SUPPORTED' || (err instanceof TypeError && !code)) {
      stats.fallbacks++;
      return sendRaw(c);
    }
    return `transport error: ${code ?? ''} ${(err as Error).message}`;
  }
}

/** The path as Sluice routes it ('' when Sluice refuses it as not canonical). */
function routedPath(c: Case): string {
  try {
    return `/${canonicalPath(c.path).split('/').filter(Boolean).join('/')}`;
  } catch {
    return '';
  }
}

function isTokenRoute(c: Case): boolean {
  return c.method === 'POST' && routedPath(c) === '/v1/auth/token';
}

/**
 * uWS (this build) keeps at most 4,096 bytes of a request head that arrives in more than one read;
 * beyond that it closes the connection without an answer, before any JavaScript runs. A head that
 * arrives in one read is parsed whatever its size. So a longer head may go unanswered.
 */
const UWS_HEAD_LIMIT = 4096;
function headBytes(c: Case): number {
  const line = Buffer.byteLength(`${c.method} ${c.path}${c.query ? `?${c.query}` : ''} HTTP/1.1\r\n`);
  return line + c.headers.reduce((n, [k, v]) => n + Buffer.byteLength(k) + Buffer.byteLength(v) + 4, 0) + 100;
}

// ---------------------------------------------------------------------------------------------
// The auth invariant: who the credentials make the caller, and what a route needs of it.

const claimsOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString());
/** The scopes a token carries (RFC 9068 `scope`, space-separated). */
const scopesOf = (token: string): string[] => String(claimsOf(token).scope ?? '').split(' ');

/**
 * Who a request's Authorization makes the caller: a tenant and its scopes, `nobody` (no valid
 * credential: none, tampered, garbage...), or null where the fuzzer does not judge (the admin
 * token in an odd spelling or beside another credential: a lenient reading is no bypass).
 */
type Caller = { tenant: string; scopes: string[]; basic?: true } | 'nobody' | null;
const ADMIN_CALLER = { tenant: 'acme', scopes: scopesOf(adminToken) };
function callerOf(mode: AuthMode): Caller {
  switch (mode) {
    case 'admin':
    case 'lower':
    case 'spaces':
      return ADMIN_CALLER;
    case 'narrow':
      return { tenant: 'acme', scopes: scopesOf(narrowToken) };
    case 'other-tenant':
      return { tenant: 'globex', scopes: scopesOf(otherTenantToken) };
    case 'basic-admin':
      // Client authentication, which only the token route takes: it is no bearer token elsewhere.
      return { ...ADMIN_CALLER, basic: true };
    case 'none':
    case 'tampered':
    case 'garbage':
    case 'long':
    case 'basic-garbage':
    case 'non-ascii':
    case 'empty':
      return 'nobody';
    case 'two-admin':
    case 'admin-garbage':
    case 'padded':
    case 'scheme':
      return null;
  }
}

const CONTRACT_ROUTES = listOperations(contract).map((op) => ({
  method: op.method,
  pattern: new RegExp(`^${op.path.replace(/\{[^}]+\}/g, '[^/]+')}$`),
  scopes: op.scopes,
}));

/**
 * The scopes the route Sluice takes a request to needs: null for a public route, undefined when
 * no route is known for it (the fuzzer then does not judge a 2xx by its credentials).
 */
function routeScopes(c: Case): string[] | null | undefined {
  const path = routedPath(c);
  const method = c.method === 'HEAD' ? 'GET' : c.method;
  const family = /^\/v1\/(inference|pipelines|telemetry)(\/.*)?$/.exec(path);
  if (family) {
    const resource = family[1] === 'pipelines' ? 'pipeline' : family[1];
    if (resource === 'telemetry' && /^\/export(\/|$)/.test(family[2] ?? '')) return ['telemetry:export'];
    return [`${resource}:${method === 'GET' ? 'read' : 'write'}`];
  }
  if (path === '/console' || path.startsWith('/console/')) return null;
  return CONTRACT_ROUTES.find((r) => r.method === method && r.pattern.test(path))?.scopes;
}

/** What names one of acme's own resources, which another tenant must never reach. */
const ACME_RESOURCES = [...endpointIds, adminClient.client_id, victim.client_id, bystander.client_id];

/**
 * A 2xx, or an answer from the upstream, to credentials that do not allow it: null when allowed.
 * `reached`: what the upstream saw of this request (its tenant header must be the caller's).
 */
function authViolation(c: Case, r: Response, reached: Seen[]): string | null {
  const upstream = r.headers['x-fuzz-upstream'] === '1';
  if (!upstream && (r.status < 200 || r.status >= 300) && reached.length === 0) return null;
  const caller = callerOf(c.auth);
  if (caller === null) return null;
  const what = upstream || reached.length > 0 ? 'reached the upstream' : `succeeded (${r.status})`;
  const scopes = routeScopes(c);
  if (scopes === null) return null; // a public route
  if (scopes === undefined) return upstream ? `${what} by no known route` : null;
  if (caller === 'nobody') return `${what} without a valid token (${c.auth})`;
  if (caller.basic) return `${what} with HTTP Basic client credentials instead of a token`;
  if (!scopes.some((s) => caller.scopes.includes(s)))
    return `${what} with a token lacking ${scopes.join(' or ')} (it carries ${caller.scopes.join(' ')})`;
  for (const seen of reached)
    if (seen.headers['x-sluice-tenant'] !== caller.tenant)
      return `${what} as tenant ${seen.headers['x-sluice-tenant']} with a token of ${caller.tenant}`;
  if (caller.tenant !== 'acme') {
    const body = c.body?.bytes.toString('utf8') ?? '';
    const named = ACME_RESOURCES.find((id) => c.path.includes(id) || c.query.includes(id) || body.includes(id));
    if (named && !upstream) return `${what} on ${named}, a resource of acme, with a token of ${caller.tenant}`;
    if (!upstream && (r.body.includes('"tenant_id":"acme"') || endpointIds.some((id) => r.body.includes(id))))
      return `${what} with a token of ${caller.tenant}, answering acme's data`;
  }
  return null;
}

/** Null when the answer keeps every invariant, else what is wrong. */
function violation(c: Case, r: Response | string, reached: Seen[] = []): string | null {
  if (typeof r === 'string') {
    if (headBytes(c) <= UWS_HEAD_LIMIT) return r;
    stats.longHeadsDropped++;
    return null;
  }
  const unauthorized = authViolation(c, r, reached);
  if (unauthorized) return unauthorized;
  if (r.headers['x-fuzz-upstream'] === '1') return null; // the upstream's own answer, passed through
  if (r.headers['content-length'] !== undefined && !(Number(r.headers['content-length']) <= MAX_BODY * 64))
    return `absurd Content-Length: ${r.headers['content-length']}`;
  let json: any;
  const ct = r.headers['content-type'] ?? '';
  if (r.body !== '') {
    try {
      json = JSON.parse(r.body);
    } catch {
      json = undefined;
    }
  }
  if (r.status >= 500) {
    const path = json?.instance ?? routedPath(c);
    const unconfigured = /^\/v1\/(inference|pipelines)(\/|$)/.test(path);
    // no body to read the code from
    if (c.method === 'HEAD' && unconfigured && (r.status === 502 || r.status === 504)) return null;
    if (r.status === 503 && json?.code === 'UNAVAILABLE') return null;
    // A HEAD has no body to read the code from: its problem+json type says it is a refusal, not a crash.
    if (c.method === 'HEAD' && r.status === 503 && ct.startsWith('application/problem+json')) return null;
    if (r.status === 503 && isTokenRoute(c) && json?.error === 'temporarily_unavailable') return null;
    if (r.status === 502 && json?.code === 'UPSTREAM_UNAVAILABLE' && unconfigured) return null;
    if (r.status === 504 && json?.code === 'UPSTREAM_TIMEOUT' && unconfigured) return null;
    return `${r.status} ${r.body.slice(0, 300)}`;
  }
  const sent = headBytes(c) + (c.body?.bytes.length ?? 0);
  // Error answers are bounded (at most 50 faults, each path and message clipped): no amplification.
  if (r.status >= 400 && r.body.length > 64 * 1024 + 2 * sent)
    return `${r.status}: an answer of ${r.body.length} characters to a request of ${sent} bytes`;
  if (r.status >= 400) {
    if (c.method === 'HEAD')
      return ct.includes('json') ? null : `${r.status} to HEAD without a JSON content type (${ct})`;
    if (json === undefined) return `${r.status} without a JSON body: ${ct} ${JSON.stringify(r.body.slice(0, 200))}`;
    if (ct.startsWith('application/problem+json')) {
      if (
        json.status !== r.status ||
        typeof json.code !== 'string' ||
        typeof json.type !== 'string' ||
        typeof json.title !== 'string'
      )
        return `${r.status}: malformed problem ${r.body.slice(0, 300)}`;
      return null;
    }
    if (
      isTokenRoute(c) &&
      ct.startsWith('application/json') &&
      typeof json.error === 'string' &&
      typeof json.error_description === 'string'
    )
      return null;
    return (
      `${r.status}: neither problem+json nor (on the token route) the RFC 6749 shape: ` +
      `${ct} ${r.body.slice(0, 300)}`
    );
  }
  return null;
}

const stats = {
  cases: 0,
  fallbacks: 0,
  longHeadsDropped: 0,
  slow: [] as string[],
  statuses: new Map<number, number>(),
  families: new Map<string, number>(),
  routes: new Set<string>(),
};

function describe(c: Case): string {
  const body = c.body
    ? `${c.body.kind}${c.body.chunked ? ' chunked' : ''}, ${c.body.bytes.length} bytes: ` +
      JSON.stringify(c.body.bytes.subarray(0, 300).toString('utf8'))
    : 'no body';
  const headers = c.headers
    .map(([k, v]) => `${k}: ${v.length > 120 ? `${v.slice(0, 120)}…(${v.length})` : v}`)
    .join(' | ');
  const query = c.query ? `?${c.query.slice(0, 200)}` : '';
  return `${c.method} ${c.path.slice(0, 300)}${query} (${c.raw ? 'raw' : 'undici'}) [${headers}] ${body}`;
}

async function check(c: Case): Promise<void> {
  const t0 = Date.now();
  const seenBefore = upstreamSeen.length;
  const r = await send(c);
  const reached = upstreamSeen.slice(seenBefore);
  const ms = Date.now() - t0;
  if (ms > 300)
    stats.slow.push(`${ms} ms ${typeof r === 'string' ? 'no answer' : r.status} ${describe(c).slice(0, 160)}`);
  stats.cases++;
  stats.families.set(c.family, (stats.families.get(c.family) ?? 0) + 1);
  if (typeof r !== 'string') stats.statuses.set(r.status, (stats.statuses.get(r.status) ?? 0) + 1);
  const v = violation(c, r, reached);
  previous.unshift(c);
  previous.length = Math.min(previous.length, 3);
  if (!v) return;
  if (COLLECT)
    return void collected.push(
      `${v.slice(0, 200)}\n  request: ${describe(c).slice(0, 600)}\n  after: ` +
        previous.map((p) => describe(p).slice(0, 400)).join('\n  after: '),
    );
  throw new Error(`${v}\n  request: ${describe(c)}`);
}

function snapshotPrototypes(): string {
  const names = (o: object) => Reflect.ownKeys(o).map(String).sort().join(',');
  const prototypes = [Object.prototype, Array.prototype, Function.prototype, String.prototype];
  return `${prototypes.map(names).join('|')}|${Object.getPrototypeOf({}) === Object.prototype}`;
}

const started = Date.now();

t.test(`every route, ${RUNS} generated requests (seed ${SEED}): no 5xx, every 4xx is JSON`, async (t) => {
  for (const r of ROUTES) stats.routes.add(`${r.method} ${r.template}`);
  await fc.assert(fc.asyncProperty(allCases, check), { seed: SEED, numRuns: RUNS, endOnFailure: !SHRINK });
  t.pass(`${stats.cases} cases over ${stats.routes.size} routes`);
});

t.test('every route with each credential that must not pass: no 2xx, nothing reaches the upstream', async (t) => {
  // The main property sends these modes in a few percent of its cases; here every route gets each.
  const modes: AuthMode[] = ['none', 'empty', 'garbage', 'tampered', 'narrow', 'other-tenant', 'basic-admin'];
  const params: Record<string, string> = {
    endpoint_id: endpointIds[endpointIds.length - 1],
    client_id: victim.client_id,
    dlq_id: 'dlq_nope',
    path: 'sweep',
  };
  let n = 0;
  for (const route of ROUTES)
    for (const mode of modes) {
      const body = route.template_body === undefined ? null : text('valid', JSON.stringify(route.template_body));
      await check({
        family: 'auth',
        auth: mode,
        method: route.method,
        path: route.template.replace(/\{([^}]+)\}/g, (_, name: string) => params[name] ?? 'sweep'),
        query: '',
        headers: [
          ...authHeaders(mode, 'g', n),
          ...(body ? [['content-type', 'application/json'] as [string, string]] : []),
        ],
        body,
        raw: false,
      });
      n++;
    }
  t.pass(`${n} requests: ${ROUTES.length} routes, ${modes.length} credentials each`);
});

t.test('wrong types for every field of every JSON body: 400, never 5xx', async (t) => {
  const bodies = ROUTES.filter(
    (r) =>
      r.template_body !== undefined &&
      typeof r.template_body === 'object' &&
      Object.keys(r.template_body as object).length > 0,
  );
  const arb = fc.constantFrom(...bodies).chain((route) =>
    fc.record({
      route: fc.constant(route),
      field: fc.constantFrom(...Object.keys(route.template_body as object)),
      value: wrongValue,
      nested: fc.boolean(),
      pick: fc.nat(),
    }),
  );
  await fc.assert(
    fc.asyncProperty(arb, async ({ route, field, value, nested, pick }) => {
      const tpl = route.template_body as Record<string, unknown>;
      // Either a field of the body, or (for a batch) a field of one of its events.
      const event = (tpl.events as Record<string, unknown>[] | undefined)?.[1];
      const inner = event ? Object.keys(event)[pick % Object.keys(event).length] : '';
      const j: J =
        nested && event
          ? {
              o: [
                [
                  'events',
                  {
                    a: [
                      toJ((tpl.events as unknown[])[0]),
                      { o: Object.entries(event).map(([k, v]): [string, J] => [k, k === inner ? value : toJ(v)]) },
                    ],
                  },
                ],
              ],
            }
          : { o: Object.entries(tpl).map(([k, v]): [string, J] => [k, k === field ? value : toJ(v)]) };
      await check({
        family: 'types',
        auth: 'admin',
        method: route.method,
        path: route.template.replace(/\{[^}]+\}/g, endpointId),
        query: '',
        headers: [
          ['authorization', `Bearer ${adminToken}`],
          ['content-type', 'application/json'],
        ],
        body: text('wrong-type', emit(j)),
        raw: false,
      });
    }),
    { seed: SEED + 1, numRuns: Math.max(50, Math.round(RUNS / 10)), endOnFailure: !SHRINK },
  );
  t.pass('every field took wrong types');
});

t.test('prototype keys never change behaviour', async (t) => {
  const protoKey = fc.constantFrom(...PROTO_KEYS);
  const junk = fc.oneof(
    fc.constantFrom<J>(
      '1',
      '"x"',
      'null',
      '{}',
      '[]',
      '{"grant_type":"password"}',
      '{"scope":"audit:read"}',
      '{"client_secret":"nope"}',
    ),
    jsonTree(fc.oneof(protoKey, edgeString), 2),
  );
  // The token endpoint ignores unknown parameters (RFC 6749 §3.2): a prototype key among them,
  // in JSON or in a form, at any depth, must not change the answer or the scopes granted.
  await fc.assert(
    fc.asyncProperty(
      fc.record({
        keys: fc.uniqueArray(fc.tuple(protoKey, junk), { minLength: 1, maxLength: 3, selector: ([k]) => k }),
        form: fc.boolean(),
        front: fc.boolean(),
      }),
      async ({ keys, form, front }) => {
        const base: [string, J][] = [
          ['grant_type', '"client_credentials"'],
          ['client_id', JSON.stringify(adminClient.client_id)],
          ['client_secret', JSON.stringify(adminClient.client_secret)],
        ];
        const entries = front ? [...keys, ...base] : [...base, ...keys];
        const body = form
          ? entries
              .map(([k, v]) => {
                const value = typeof v === 'string' ? (v.startsWith('"') ? JSON.parse(v) : v) : emit(v);
                return `${pctEncode(k)}=${pctEncode(value)}`;
              })
              .join('&')
          : emit({ o: entries });
        const res = await call(node.base, 'POST', '/v1/auth/token', {
          raw: body,
          headers: { 'content-type': form ? 'application/x-www-form-urlencoded' : 'application/json' },
        });
        stats.cases++;
        if (res.status !== 200)
          throw new Error(`token request with prototype keys: ${res.status} ${res.text}\n  body: ${body}`);
        const granted = String(res.json.scope).split(' ').sort();
        if (granted.length !== 14)
          throw new Error(`prototype keys changed the scopes granted: ${res.json.scope}\n  body: ${body}`);
      },
    ),
    { seed: SEED + 2, numRuns: 60, endOnFailure: !SHRINK },
  );

  // Closed request shapes: the required fields inside a prototype key do not count as present.
  const closed: [string, string, Record<string, unknown>][] = [
    ['POST', '/v1/auth/revocations', { client_id: bystander.client_id, reason: 'slipped past' }],
    ['POST', '/v1/webhooks/endpoints', { url: receiverUrl, events: ['inference.completed'] }],
    ['POST', '/v1/webhooks/events', { type: 'inference.completed', data: {} }],
    ['POST', '/v1/webhooks/events/batch', { events: [{ type: 'inference.completed', data: {} }] }],
    ['POST', '/v1/webhooks/dlq/replay', { ids: ['x'] }],
  ];
  for (const [method, path, valid] of closed) {
    for (const key of PROTO_KEYS) {
      const raw = `{"${key}":${JSON.stringify(valid)}}`;
      const res = await call(node.base, method, path, {
        raw,
        token: adminToken,
        headers: { 'content-type': 'application/json' },
      });
      stats.cases++;
      t.equal(res.status, 400, `${path} with only ${raw.slice(0, 60)}…: 400`);
      t.equal(res.json?.code, 'INVALID_REQUEST', `${path}: INVALID_REQUEST`);
    }
  }
  const bystanderToken = await call(node.base, 'POST', '/v1/auth/token', {
    body: { grant_type: 'client_credentials', client_id: bystander.client_id, client_secret: bystander.client_secret },
  });
  stats.cases++;
  t.equal(bystanderToken.status, 200, 'a client named only inside a prototype key was not revoked');

  // Open shapes (endpoint metadata): prototype keys at any depth are data, echoed back as sent.
  await fc.assert(
    fc.asyncProperty(fc.array(fc.tuple(protoKey, junk), { minLength: 1, maxLength: 3 }), async (keys) => {
      const metadata = emit({ o: [['team', '"fuzz"'], ...keys] });
      const raw = `{"url":${JSON.stringify(receiverUrl)},"events":["telemetry.exported"],"metadata":${metadata}}`;
      const res = await call(node.base, 'POST', '/v1/webhooks/endpoints', {
        raw,
        token: adminToken,
        headers: { 'content-type': 'application/json' },
      });
      stats.cases++;
      const sent = JSON.parse(metadata);
      if (Buffer.byteLength(JSON.stringify(sent)) > 4096) return;
      if (res.status !== 201)
        throw new Error(`metadata with prototype keys: ${res.status} ${res.text}\n  body: ${raw}`);
      if (JSON.stringify(res.json.metadata) !== JSON.stringify(sent))
        throw new Error(`metadata came back changed: ${JSON.stringify(res.json.metadata)} vs ${JSON.stringify(sent)}`);
      const read = await call(node.base, 'GET', `/v1/webhooks/endpoints/${res.json.id}`, { token: adminToken });
      stats.cases++;
      if (JSON.stringify(read.json?.metadata) !== JSON.stringify(sent))
        throw new Error(`metadata read back changed: ${read.text}`);
    }),
    { seed: SEED + 3, numRuns: 20, endOnFailure: !SHRINK },
  );
  t.equal(snapshotPrototypes(), protoBefore, 'no prototype gained or lost a member');
  t.equal(({} as Record<string, unknown>).team, undefined, 'plain objects are not polluted');
});

t.test('clients that go away mid-body or before the answer: no crash, nothing stuck', async (t) => {
  const withBodies = ROUTES.filter((r) => ['POST', 'PUT', 'PATCH', 'DELETE'].includes(r.method));
  const arb = fc.record({
    route: fc.constantFrom(...withBodies),
    declared: fc.oneof(fc.integer({ min: 1, max: 4096 }), fc.integer({ min: 4096, max: MAX_BODY })),
    cut: fc.nat(),
    chunked: fc.boolean(),
    full: fc.boolean(),
    auth: fc.boolean(),
    waitMs: fc.integer({ min: 0, max: 20 }),
  });
  await fc.assert(
    fc.asyncProperty(arb, async ({ route, declared, cut, chunked, full, auth, waitMs }) => {
      const body =
        route.template_body === undefined
          ? Buffer.alloc(declared, 0x61)
          : Buffer.from(JSON.stringify(route.template_body));
      const sentBody = full ? body : body.subarray(0, cut % Math.max(1, body.length));
      const path = route.template.replace(/\{[^}]+\}/g, endpointIds[cut % endpointIds.length]);
      const head = [
        `${route.method} ${path} HTTP/1.1`,
        'host: 127.0.0.1',
        'content-type: application/json',
        ...(auth ? [`authorization: Bearer ${adminToken}`] : []),
        chunked ? 'transfer-encoding: chunked' : `content-length: ${body.length}`,
      ];
      const payload = chunked
        ? Buffer.concat([
            Buffer.from(`${body.length.toString(16)}\r\n`),
            sentBody,
            ...(full ? [Buffer.from('\r\n0\r\n\r\n')] : []),
          ])
        : sentBody;
      await new Promise<void>((resolve) => {
        const socket = connect(port, '127.0.0.1', () => {
          socket.write(Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`), payload]));
          setTimeout(() => socket.destroy(), waitMs);
        });
        socket.on('error', () => {});
        socket.on('close', () => resolve());
      });
      stats.cases++;
    }),
    { seed: SEED + 4, numRuns: 60, endOnFailure: !SHRINK },
  );
  // Handlers of the abandoned requests may still be running (pings, Kafka writes): give them time.
  await new Promise((r) => setTimeout(r, 300));
  const res = await call(node.base, 'GET', '/v1/webhooks/endpoints?limit=1', { token: adminToken });
  t.equal(res.status, 200, 'the node answers the next request');
});

t.test('regressions', async (t) => {
  const form = (s: string) =>
    call(node.base, 'POST', '/v1/auth/token', {
      raw: s,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
  const creds =
    `grant_type=client_credentials&client_id=${adminClient.client_id}` + `&client_secret=${adminClient.client_secret}`;
  for (const k of [...PROTO_KEYS, ...OBJECT_MEMBERS]) {
    const res = await form(`${creds}&${k}=1`);
    t.equal(res.status, 200, `a form parameter named ${k} is ignored like any other unknown one`);
  }
  t.equal((await form(`${creds}&client_id=again`)).status, 400, 'a repeated form parameter is still refused');
  const proto = await call(node.base, 'GET', '/v1/auth/jwks', {
    headers: { constructor: 'x', toString: 'y', hasOwnProperty: 'z' },
  });
  t.equal(proto.status, 200, 'headers named like Object.prototype members are plain headers');

  // HEAD used to end with endWithoutBody(undefined): a Content-Length of 2^63, after which uWS
  // waited for those bytes, so the connection never closed and answered nothing more.
  const auth = `authorization: Bearer ${adminToken}\r\n`;
  const headClose = await rawHttp(port, `HEAD /v1/auth/jwks HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n`, 5000);
  t.same(headClose.statuses, [200], 'HEAD is answered');
  t.ok(headClose.closed, 'and the connection closed as the client asked');
  t.notMatch(headClose.text, /9223372036854775808/, 'without an absurd Content-Length');
  for (const [name, path] of [
    ['a route', '/v1/webhooks/endpoints'],
    ['a refusal', '/v1/nope'],
    ['the data plane', '/v1/inference/x'],
  ]) {
    const keepAlive = await rawHttp(
      port,
      `HEAD ${path} HTTP/1.1\r\nhost: x\r\n${auth}\r\n` +
        'GET /v1/auth/jwks HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n',
      5000,
    );
    t.equal(
      keepAlive.statuses.length,
      2,
      `HEAD of ${name} then GET on one keep-alive connection: both answered (${keepAlive.statuses.join(', ')})`,
    );
    t.equal(keepAlive.statuses[1], 200, 'the GET after it is answered');
  }
  // The proxy handed undici headers it refuses (Expect, a DEL or a character above U+00FF in a
  // value): the request failed before anything was sent and was answered 502 "upstream unreachable".
  // (uWS closes the connection after the answer only for a Connection of exactly "close": the
  // one with a list is read after 500 ms of quiet.)
  const proxied = (extra: string, connection = 'close') =>
    rawHttp(
      port,
      Buffer.from(
        `PUT /v1/telemetry/regression HTTP/1.1\r\nhost: x\r\n${auth}content-type: application/json\r\n` +
          `${extra}content-length: 2\r\nconnection: ${connection}\r\n\r\n{}`,
        'utf8',
      ),
      connection === 'close' ? 5000 : 500,
    );
  const seenBefore = upstreamSeen.length;
  t.same(
    (await proxied('expect: 100-continue\r\n')).statuses,
    [100, 200],
    'Expect: 100-continue is answered at the edge and not forwarded',
  );
  t.same(
    (await proxied('x-drop-me: 1\r\n', 'keep-alive, x-drop-me')).statuses,
    [200],
    'a header named in Connection is hop-by-hop',
  );
  t.same(
    (await proxied('x-note: caf\u00e9 \u{1f600} ok\r\n')).statuses,
    [200],
    'non-ASCII header values are forwarded',
  );
  const forwarded = upstreamSeen.slice(seenBefore);
  t.equal(forwarded.length, 3, 'all three reached the upstream');
  t.notOk(
    forwarded.some((s) => s.headers.expect !== undefined || s.headers['x-drop-me'] !== undefined),
    'without Expect or the Connection-listed header',
  );
  t.equal(
    Buffer.from(String(forwarded[2]?.headers['x-note']), 'latin1').toString('utf8'),
    'caf\u00e9 \u{1f600} ok',
    'as the bytes the client sent',
  );
  const del = await proxied('x-note: a\x7fb\r\n');
  t.same(del.statuses, [400], "a header that cannot be forwarded is the client's 400");
  t.match(parseRaw(del.text, 'PUT')?.body ?? '', /headers\.x-note/, 'naming the header');
  // A DLQ id of 2,000 characters reached the on-disk DLQ view as an LMDB key (at most 1,978
  // bytes): RangeError, 500. Every named path parameter is now bounded as the contract says.
  for (const [method, path] of [
    ['POST', '/v1/webhooks/dlq/{}/replay'],
    ['GET', '/v1/webhooks/endpoints/{}'],
    ['DELETE', '/v1/webhooks/endpoints/{}'],
    ['POST', '/v1/webhooks/endpoints/{}/verify'],
    ['GET', '/v1/auth/clients/{}/secret'],
  ]) {
    for (const n of [128, 129, 2000, 9000]) {
      const res = await call(node.base, method, path.replace('{}', 'd'.repeat(n)), { token: adminToken });
      t.equal(res.status, n > 128 ? 400 : 404, `${method} ${path} with a ${n}-character id: ${n > 128 ? 400 : 404}`);
    }
  }
  // Every fault was listed, twice (detail and errors): 80,000 unknown members in 0.9 MiB were
  // answered with 7 MiB, a 500 KiB member name with 1 MiB. Now at most 50, each clipped.
  const manyKeys = `{${Array.from({ length: 80_000 }, (_, i) => `"k${i}":0`).join(',')}}`;
  const longKey = `{${JSON.stringify('k'.repeat(500_000))}:1}`;
  for (const [name, raw] of [
    ['80,000 unknown members', manyKeys],
    ['a 500 KiB member name', longKey],
    ['a 500 KiB member name, malformed', longKey.slice(0, -1)],
  ]) {
    for (const path of ['/v1/webhooks/events', '/v1/webhooks/endpoints', '/v1/auth/revocations']) {
      const res = await call(node.base, 'POST', path, {
        raw,
        token: adminToken,
        headers: { 'content-type': 'application/json' },
      });
      t.equal(res.status, 400, `${path}, ${name}: 400`);
      t.ok(res.text.length < 64 * 1024, `${path}, ${name}: an answer of ${res.text.length} characters`);
      t.ok(res.json.errors.length <= 51, `${path}, ${name}: ${res.json.errors.length} faults listed`);
    }
  }
  const viaUndici = [];
  for (let i = 0; i < 3; i++)
    viaUndici.push(
      await http
        .request({ path: '/v1/auth/jwks', method: i === 1 ? 'HEAD' : 'GET', headersTimeout: 5000 })
        .then(async (r) => {
          await r.body.text();
          return r.statusCode;
        }),
    );
  t.same(viaUndici, [200, 200, 200], 'GET, HEAD, GET on a pooled keep-alive client');
  stats.cases += 1 + PROTO_KEYS.length + OBJECT_MEMBERS.length + 1 + 1 + 3 + 3 + 4 + 20 + 9;
});

t.test('the node still answers plain requests', async (t) => {
  const jwks = await call(node.base, 'GET', '/v1/auth/jwks');
  t.equal(jwks.status, 200, 'GET /v1/auth/jwks: 200');
  const list = await call(node.base, 'GET', '/v1/webhooks/endpoints?limit=1', { token: adminToken });
  t.equal(list.status, 200, 'GET /v1/webhooks/endpoints with the admin token: 200');
  const token = await node.token(adminClient);
  t.ok(token.length > 0, 'a new token is issued');
  const health = await fetch(`${node.admin}/healthz`);
  t.equal(health.status, 200, `admin /healthz: ${health.status}`);
  const leaked = upstreamSeen.filter(
    (s) => s.headers.authorization !== undefined || !s.url.startsWith('/up/v1/telemetry'),
  );
  t.same(
    leaked.map((s) => `${s.method} ${s.url}`),
    [],
    'the upstream never saw an Authorization header or a path outside /v1/telemetry',
  );
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  const statuses = [...stats.statuses]
    .sort(([a], [b]) => a - b)
    .map(([s, n]) => `${s}×${n}`)
    .join(' ');
  t.comment(
    `fuzz: ${stats.cases} cases in ${seconds} s (seed ${SEED}); ${stats.routes.size} routes; ` +
      `upstream saw ${upstreamSeen.length}; raw fallbacks ${stats.fallbacks}; ` +
      `heads over 4 KiB dropped by uWS ${stats.longHeadsDropped}`,
  );
  if (COLLECT)
    t.comment(
      `slow:\n${stats.slow
        .sort((a, b) => parseInt(b, 10) - parseInt(a, 10))
        .slice(0, 25)
        .join('\n')}`,
    );
  t.same(collected, [], 'no violation collected');
  t.comment(`fuzz: by family ${[...stats.families].map(([f, n]) => `${f}=${n}`).join(' ')}; statuses ${statuses}`);
});
