/**
 * Receivers that try to abuse or confuse the webhook HTTP client (outbound/http1-agent.ts),
 * each a raw TCP server on 127.0.0.1 writing exactly the bytes of its case (issue 32 item 2):
 * - a corpus of hostile answers: for each, the verdict (delivered or failed, and why), whether the
 *   connection is reused (never after anything ambiguous), bounded CPU, and no answer ever given
 *   to another tenant's request;
 * - a differential against llhttp (node:http's parser, fuzzed upstream): the corpus and a few
 *   thousand generated answers go through both. What this client delivers, llhttp reads with the
 *   same status and body length; where llhttp accepts what this client refuses, the answer is in
 *   the short list of deliberate refusals (`deliberatelyStricter`).
 */
import { request } from 'node:http';
import { createServer, type Socket } from 'node:net';
import fc from 'fast-check';
import t, { type Test } from 'tap';
import { attemptDelivery } from '../../outbound/attempt.ts';
import { Http1Agent, MAX_HEAD_BYTES, MAX_INTERIM } from '../../outbound/http1-agent.ts';

type Script = (socket: Socket, n: number) => void;

interface Server {
  url: URL;
  /** Connection number of each request, in order. */
  requestConns: number[];
  script: Script;
  close(): Promise<void>;
}

/** Runs `script` for each complete request (head and content-length body; `early`: at its head). */
async function rawServer(script: Script, early = false): Promise<Server> {
  const sockets = new Set<Socket>();
  let conns = 0;
  const srv: Server = { url: new URL('http://127.0.0.1/'), requestConns: [], script, close: async () => {} };
  const server = createServer((socket) => {
    const conn = ++conns;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buf = Buffer.alloc(0);
    let answeredEarly = false;
    socket.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        if (early && !answeredEarly) {
          answeredEarly = true;
          srv.requestConns.push(conn);
          srv.script(socket, srv.requestConns.length);
        }
        const length = Number(/content-length: (\d+)/i.exec(buf.toString('latin1', 0, end))?.[1] ?? 0);
        if (buf.length < end + 4 + length) return;
        buf = buf.subarray(end + 4 + length);
        if (early) {
          answeredEarly = false;
          continue;
        }
        srv.requestConns.push(conn);
        srv.script(socket, srv.requestConns.length);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  srv.url = new URL(`http://127.0.0.1:${(server.address() as { port: number }).port}/hook`);
  srv.close = async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => server.close(r));
  };
  return srv;
}

const agents: Http1Agent[] = [];
const newAgent = () => {
  const a = new Http1Agent({ connectionsPerOrigin: 1 });
  agents.push(a);
  return a;
};
const servers: Server[] = [];
t.teardown(async () => {
  for (const a of agents) await a.destroy();
  for (const s of servers) await s.close();
});

/** An attempt as the dispatcher makes it: the verdict and its reason. */
function attempt(agent: Http1Agent, url: URL, opts: { partition?: string; body?: string; timeoutMs?: number } = {}) {
  return attemptDelivery(
    url.href,
    opts.body ?? '{"a":1}',
    { 'content-type': 'application/json' },
    {
      timeoutMs: opts.timeoutMs ?? 1500,
      dispatcher: agent,
      partition: opts.partition,
    },
  );
}

const OK = 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok';
const later = (ms: number, f: () => void) => setTimeout(f, ms);

interface Case {
  name: string;
  script: Script;
  early?: boolean;
  body?: string;
  delivered: boolean;
  /** The reason of a failure (the outcome's error). */
  why?: RegExp;
  /** Whether the next request of the same tenant may use the same connection. */
  reused: boolean;
}

const bytes =
  (b: string): Script =>
  (s) =>
    s.write(b, 'latin1');
const interimForever: Script = (s) => {
  const write = () => {
    if (s.destroyed) return;
    s.write('HTTP/1.1 102 Processing\r\n\r\n'.repeat(64));
    setImmediate(write);
  };
  write();
};
const trickle =
  (text: string, everyMs: number): Script =>
  (s) => {
    let i = 0;
    const next = () => {
      if (s.destroyed || i >= text.length) return;
      s.write(text[i++]);
      later(everyMs, next);
    };
    next();
  };
const TRAILERS = `x-t: ${'t'.repeat(1000)}\r\n`.repeat(70);
const bigHead = `HTTP/1.1 200 OK\r\nx-big: ${'a'.repeat(100_000)}\r\ncontent-length: 2\r\n\r\nok`;

const corpus: Case[] = [
  { name: 'a clean answer', script: bytes(OK), delivered: true, reused: true },
  {
    name: 'endless interim heads',
    script: interimForever,
    delivered: false,
    why: /too many interim answers/,
    reused: false,
  },
  {
    name: 'interim heads, then the answer',
    script: bytes(`${'HTTP/1.1 102 Processing\r\n\r\n'.repeat(3)}${OK}`),
    delivered: true,
    reused: true,
  },
  {
    name: 'a 1xx followed by a body instead of a head',
    script: bytes('HTTP/1.1 103 Early Hints\r\n\r\nok'),
    delivered: false,
    why: /not an HTTP\/1.x response/,
    reused: false,
  },
  {
    name: 'a head over the limit in one read',
    script: bytes(bigHead),
    delivered: false,
    why: /too large/,
    reused: false,
  },
  {
    name: 'a head over the limit in many reads',
    script: (s) => {
      for (let i = 0; i < bigHead.length; i += 1000) s.write(bigHead.slice(i, i + 1000));
    },
    delivered: false,
    why: /too large/,
    reused: false,
  },
  {
    name: 'interim heads that add up over the head limit',
    script: bytes(`HTTP/1.1 102 P\r\nx-pad: ${'p'.repeat(40_000)}\r\n\r\n`.repeat(2) + OK),
    delivered: false,
    why: /too large/,
    reused: false,
  },
  {
    name: 'trailers over the head limit',
    script: bytes(`HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n${TRAILERS}\r\n`),
    delivered: false,
    why: /too large/,
    reused: false,
  },
  {
    name: 'an answer before the request body was sent',
    script: bytes(OK),
    early: true,
    body: JSON.stringify({ pad: 'x'.repeat(8_000_000) }),
    delivered: true,
    reused: false,
  },
  {
    name: 'bytes after a complete answer, same write',
    script: bytes(`${OK}GARBAGE`),
    delivered: false,
    why: /bytes after the answer/,
    reused: false,
  },
  {
    name: 'another answer after a complete one, same write',
    script: bytes(`${OK}HTTP/1.1 500 No\r\ncontent-length: 0\r\n\r\n`),
    delivered: true,
    reused: false,
  },
  {
    name: 'a 204 with a body',
    script: bytes('HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\nhello'),
    delivered: false,
    why: /bytes after the answer/,
    reused: false,
  },
  {
    name: 'a 304 with a body',
    script: bytes('HTTP/1.1 304 Not Modified\r\n\r\nhello'),
    delivered: false,
    reused: false,
  },
  {
    name: 'transfer-encoding and content-length',
    script: bytes('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 2\r\n\r\n2\r\nok\r\n0\r\n\r\n'),
    delivered: false,
    why: /both transfer-encoding and content-length/,
    reused: false,
  },
  {
    name: 'a non-chunked transfer-encoding and content-length',
    script: bytes('HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\ncontent-length: 2\r\n\r\nok'),
    delivered: false,
    why: /transfer-encoding/,
    reused: false,
  },
  {
    name: 'two transfer-encoding headers',
    script: bytes(
      'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n',
    ),
    delivered: false,
    why: /more than one transfer-encoding/,
    reused: false,
  },
  {
    name: 'an unknown transfer-encoding',
    script: bytes('HTTP/1.1 200 OK\r\ntransfer-encoding: foo\r\n\r\nok'),
    delivered: false,
    why: /unsupported transfer-encoding/,
    reused: false,
  },
  {
    name: 'two content-length headers, even equal',
    script: bytes('HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\nok'),
    delivered: false,
    why: /invalid content-length/,
    reused: false,
  },
  {
    name: 'a space before the colon',
    script: bytes('HTTP/1.1 200 OK\r\ncontent-length : 2\r\n\r\nok'),
    delivered: false,
    reused: false,
  },
  {
    name: 'a folded header line',
    script: bytes('HTTP/1.1 200 OK\r\nx-a: b\r\n c\r\ncontent-length: 2\r\n\r\nok'),
    delivered: false,
    reused: false,
  },
  {
    name: 'a control character in a header value',
    script: bytes('HTTP/1.1 200 OK\r\nx-a: b\x01c\r\ncontent-length: 2\r\n\r\nok'),
    delivered: false,
    reused: false,
  },
  {
    name: 'a status below 100',
    script: bytes('HTTP/1.1 099 Weird\r\ncontent-length: 2\r\n\r\nok'),
    delivered: false,
    why: /invalid status/,
    reused: false,
  },
  { name: 'no status line', script: bytes('ok\r\n\r\n'), delivered: false, reused: false },
  { name: 'a close without an answer', script: (s) => s.end(), delivered: false, reused: false },
  {
    name: 'a slowloris head',
    script: trickle('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok', 150),
    delivered: false,
    why: /no full response within/,
    reused: false,
  },
  {
    name: 'a slowloris body',
    script: (s) => {
      s.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n');
      trickle('x'.repeat(100), 150)(s, 0);
    },
    delivered: false,
    why: /no full response within/,
    reused: false,
  },
  {
    name: 'a close-delimited body',
    script: (s) => s.end('HTTP/1.1 200 OK\r\n\r\nokok'),
    delivered: true,
    reused: false,
  },
  {
    name: 'connection: close',
    script: bytes('HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok'),
    delivered: true,
    reused: false,
  },
];

t.test('every hostile answer gets its verdict, never reuses a suspect connection, bounded CPU', async (t) => {
  for (const c of corpus) {
    const srv = await rawServer(c.script, c.early);
    servers.push(srv);
    const agent = newAgent();
    const cpu = process.cpuUsage();
    const first = await attempt(agent, srv.url, { body: c.body });
    const used = process.cpuUsage(cpu);
    t.equal(
      first.ok,
      c.delivered,
      `${c.name}: ${c.delivered ? 'delivered' : 'failed'} (${first.error ?? first.status})`,
    );
    if (c.why) t.match(first.error, c.why, `${c.name}: why`);
    t.ok(used.user + used.system < 1_000_000, `${c.name}: ${Math.round((used.user + used.system) / 1000)} ms of CPU`);
    // The same tenant's next request: on the same connection only after a clean answer.
    srv.script = bytes(OK);
    const second = await attempt(agent, srv.url);
    t.equal(second.ok, true, `${c.name}: the next request gets its own answer`);
    const [a, b] = srv.requestConns.slice(-2);
    t.equal(a === b, c.reused, `${c.name}: connection ${c.reused ? 'reused' : 'not reused'}`);
    await srv.close();
  }
});

t.test('a stray answer written later is never given to another tenant', async (t) => {
  // Tenant C's path answers 204, then an unsolicited 200 30 ms later; tenant B's always 500.
  const srv = await rawServer((s, n) => {
    if (n === 1) {
      s.write('HTTP/1.1 204 No Content\r\n\r\n');
      later(30, () => s.write(OK));
    } else s.write('HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n');
  });
  servers.push(srv);
  const agent = newAgent();
  t.equal((await attempt(agent, srv.url, { partition: 'tenant-c' })).status, 204);
  const results = await Promise.all(
    Array.from({ length: 5 }, () => attempt(agent, srv.url, { partition: 'tenant-b' })),
  );
  t.same(
    results.map((r) => r.status),
    [500, 500, 500, 500, 500],
    "B's requests are answered on B's own connections: 500 each, never C's stray 200",
  );
  t.notOk(srv.requestConns.slice(1).includes(srv.requestConns[0]), "none of B's went on C's connection");
});

t.test('MAX_HEAD_BYTES and MAX_INTERIM are what the corpus assumes', async (t) => {
  t.equal(MAX_HEAD_BYTES, 64 * 1024);
  t.ok(MAX_INTERIM >= 3 && MAX_INTERIM <= 64);
});

// ---- the differential against llhttp ----

interface Verdict {
  ok: boolean;
  status: number | null;
  bodyBytes: number;
}

/** This client's reading of `answer`. */
async function oursOf(srv: Server, answer: string): Promise<Verdict> {
  srv.script = (s) => s.end(answer, 'latin1');
  const agent = newAgent();
  const v = await new Promise<Verdict>((resolve) => {
    let status: number | null = null;
    let bodyBytes = 0;
    const url = srv.url;
    agent.send(url, `POST ${url.pathname} HTTP/1.1\r\nhost: ${url.host}\r\ncontent-length: 2\r\n\r\n{}`, {
      onHead: (h) => (status = h.status),
      onData: (n) => (bodyBytes += n),
      onEnd: () => resolve({ ok: status !== null && status >= 200 && status < 300, status, bodyBytes }),
      onError: () => resolve({ ok: false, status, bodyBytes }),
    });
  });
  await agent.destroy();
  agents.pop();
  return v;
}

/** llhttp's reading of `answer`, through node:http. */
async function llhttpOf(srv: Server, answer: string): Promise<Verdict> {
  srv.script = (s) => s.end(answer, 'latin1');
  return new Promise<Verdict>((resolve) => {
    let done = false;
    const finish = (v: Verdict) => {
      if (!done) {
        done = true;
        resolve(v);
      }
    };
    const req = request(
      {
        host: '127.0.0.1',
        port: srv.url.port,
        method: 'POST',
        path: '/hook',
        agent: false,
        headers: { 'content-length': 2 },
      },
      (res) => {
        let bodyBytes = 0;
        res.on('data', (d: Buffer) => (bodyBytes += d.length));
        res.on('end', () => {
          const status = res.statusCode ?? null;
          finish({ ok: status !== null && status >= 200 && status < 300, status, bodyBytes });
        });
        res.on('error', () => finish({ ok: false, status: res.statusCode ?? null, bodyBytes }));
      },
    );
    req.on('error', () => finish({ ok: false, status: null, bodyBytes: 0 }));
    req.setTimeout(1500, () => {
      req.destroy();
      finish({ ok: false, status: null, bodyBytes: 0 });
    });
    req.end('{}');
  });
}

/** Answers this client refuses on purpose although llhttp (as node:http runs it) accepts them. */
function deliberatelyStricter(answer: string): string | null {
  const heads = answer.split('\r\n\r\n');
  const status = /^HTTP\/(\d\.\d) (\d{3})/.exec(answer);
  if (status && !/^1\.[01]$/.test(status[1])) return 'an HTTP version other than 1.0 or 1.1';
  if (status && Number(status[2]) < 100) return 'a status below 100';
  if ((answer.match(/^HTTP\/1\.[01] 1\d\d/gm)?.length ?? 0) > MAX_INTERIM)
    return 'more interim answers than MAX_INTERIM';
  for (const head of heads) {
    const te = head.match(/^transfer-encoding:.*$/gim) ?? [];
    if (te.length > 1) return 'two transfer-encoding headers';
    if (te.length === 1 && te[0].split(':')[1].trim().toLowerCase() !== 'chunked')
      return 'a transfer-encoding other than chunked';
  }
  return null;
}

async function compare(t: Test, srv: Server, answer: string, name: string): Promise<void> {
  const [ours, theirs] = [await oursOf(srv, answer), await llhttpOf(srv, answer)];
  if (ours.ok) {
    t.ok(theirs.ok, `${name}: delivered here, so by llhttp too`);
    t.equal(ours.status, theirs.status, `${name}: the same status`);
    t.equal(ours.bodyBytes, theirs.bodyBytes, `${name}: the same body length`);
  } else if (theirs.ok) {
    t.ok(deliberatelyStricter(answer), `${name}: refused here, accepted by llhttp: ${deliberatelyStricter(answer)}`);
  } else t.pass(`${name}: refused by both`);
}

t.test('the corpus through llhttp: nothing delivered here that llhttp refuses', async (t) => {
  const srv = await rawServer(bytes(OK));
  servers.push(srv);
  const fixed = [
    OK,
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nx-t: 1\r\n\r\n',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2;ext=1\r\nok\r\n0\r\n\r\n',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n',
    'HTTP/1.1 200 OK\r\ncontent-length:\t2\r\n\r\nok',
    'HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok',
    'HTTP/1.1 200\r\ncontent-length: 2\r\n\r\nok',
    'HTTP/2.0 200 OK\r\ncontent-length: 2\r\n\r\nok',
    'HTTP/1.1 200 OK\ncontent-length: 2\n\nok',
    'HTTP/1.1 200 OK\r\ncontent-length: +2\r\n\r\nok',
    'HTTP/1.1 200 OK\r\ncontent-length: 2, 2\r\n\r\nok',
    'HTTP/1.1 200 OK\r\n: x\r\ncontent-length: 2\r\n\r\nok',
    'HTTP/1.1 200 OK\r\nx-a: b\x7fc\r\ncontent-length: 2\r\n\r\nok',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2 \r\nok\r\n0\r\n\r\n',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nokX\r\n0\r\n\r\n',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n',
    'HTTP/1.1 600 Weird\r\ncontent-length: 2\r\n\r\nok',
    `${OK}\r\n`,
    `${'HTTP/1.1 102 Processing\r\n\r\n'.repeat(20)}${OK}`,
  ];
  for (const [i, answer] of fixed.entries()) await compare(t, srv, answer, `fixed ${i}`);
});

/** Answers built from the parts parsers disagree on. */
const answerArb = fc
  .record({
    version: fc.constantFrom('HTTP/1.1', 'HTTP/1.1', 'HTTP/1.0', 'HTTP/1.2', 'http/1.1'),
    status: fc.oneof(fc.integer({ min: 100, max: 599 }), fc.constantFrom(200, 204, 304, 99, 0)),
    interim: fc.integer({ min: 0, max: 3 }),
    headers: fc.array(
      fc.constantFrom(
        'content-length: 2',
        'content-length: 5',
        'content-length: 0',
        'content-length: x',
        'content-length : 2',
        'transfer-encoding: chunked',
        'transfer-encoding: gzip',
        'connection: close',
        'connection: keep-alive',
        'x-a: b',
        'x-a:\tb',
        ' folded',
        'x-a: b\x01',
        'bad header',
        'x-é: 1',
        'retry-after: 3',
      ),
      { maxLength: 4 },
    ),
    body: fc.constantFrom('', 'ok', 'hello', '2\r\nok\r\n0\r\n\r\n', '5\r\nhello\r\n0\r\n\r\n', 'zz\r\n', '0\r\n\r\n'),
    after: fc.constantFrom('', '', '\r\n', 'X', 'HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n'),
    eol: fc.constantFrom('\r\n', '\r\n', '\r\n', '\r\n', '\r\n', '\n'),
  })
  .map(({ version, status, interim, headers, body, after, eol }) => {
    const head = (line: string, hs: string[]) => `${line}${eol}${hs.map((h) => `${h}${eol}`).join('')}${eol}`;
    const interims = Array.from({ length: interim }, () => head(`${version} 102 Processing`, [])).join('');
    return `${interims}${head(`${version} ${String(status).padStart(3, '0')} X`, headers)}${body}${after}`;
  });

/** Answers a receiver may well send: any status, valid framing, headers of every legal shape. */
const wellFormedArb = fc
  .record({
    version: fc.constantFrom('HTTP/1.1', 'HTTP/1.0'),
    status: fc.integer({ min: 200, max: 599 }),
    interim: fc.integer({ min: 0, max: 2 }),
    headers: fc.array(
      fc.tuple(
        fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,12}$/),
        fc.stringMatching(/^[\x21-\x7e]([\x20-\x7e\t]{0,20}[\x21-\x7e])?$/),
      ),
      { maxLength: 5 },
    ),
    body: fc.string({ maxLength: 40 }),
    framing: fc.constantFrom('length', 'chunked', 'close'),
  })
  .map(({ version, status, interim, headers, body: text, framing }) => {
    const body = status === 204 || status === 304 ? '' : text; // they have none
    const reserved = /^(content-length|transfer-encoding|connection|keep-alive)$/i;
    const hs = headers.filter(([n]) => !reserved.test(n)).map(([n, v]) => `${n}: ${v}`);
    const bytesOf = Buffer.byteLength(body, 'latin1');
    const framed =
      framing === 'length' || (framing === 'chunked' && version === 'HTTP/1.0')
        ? [`content-length: ${bytesOf}`]
        : framing === 'chunked'
          ? ['transfer-encoding: chunked']
          : ['connection: close'];
    const content =
      framing === 'chunked' && version !== 'HTTP/1.0'
        ? `${bytesOf > 0 ? `${bytesOf.toString(16)}\r\n${body}\r\n` : ''}0\r\n\r\n`
        : body;
    const interims = version === 'HTTP/1.1' ? 'HTTP/1.1 100 Continue\r\n\r\n'.repeat(interim) : '';
    return `${interims}${version} ${status} R\r\n${[...hs, ...framed].map((h) => `${h}\r\n`).join('')}\r\n${content}`;
  });

t.test('3,000 generated answers (2,000 wild, 1,000 well-formed) through both parsers agree', async (t) => {
  const srv = await rawServer(bytes(OK));
  servers.push(srv);
  const wellFormed = fc.sample(wellFormedArb, { numRuns: 1000, seed: 1128 });
  let same = 0;
  for (const [i, answer] of wellFormed.entries()) {
    const [ours, theirs] = [await oursOf(srv, answer), await llhttpOf(srv, answer)];
    const alike =
      ours.ok === theirs.ok && (!ours.ok || (ours.status === theirs.status && ours.bodyBytes === theirs.bodyBytes));
    if (alike) same++;
    else
      t.fail(
        `well-formed ${i}: here ${JSON.stringify(ours)}, llhttp ${JSON.stringify(theirs)}: ${JSON.stringify(answer)}`,
      );
  }
  t.equal(same, 1000, 'every well-formed answer read alike: verdict, and status and body length when delivered');
  const answers = fc.sample(answerArb, { numRuns: 2000, seed: 20261128 });
  let delivered = 0;
  for (const [i, answer] of answers.entries()) {
    const [ours, theirs] = [await oursOf(srv, answer), await llhttpOf(srv, answer)];
    if (ours.ok) {
      delivered++;
      if (!theirs.ok || ours.status !== theirs.status || ours.bodyBytes !== theirs.bodyBytes)
        t.fail(`answer ${i}: delivered here, llhttp read ${JSON.stringify(theirs)}: ${JSON.stringify(answer)}`);
    } else if (theirs.ok && !deliberatelyStricter(answer))
      t.fail(`answer ${i}: refused here, accepted by llhttp: ${JSON.stringify(answer)}`);
  }
  t.ok(
    delivered > 20,
    `${delivered} of 2,000 wild answers delivered by both; the rest refused here (and by llhttp, or on purpose)`,
  );
});
