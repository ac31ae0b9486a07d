import t from 'tap';
import { SluiceError } from '../../core/errors.ts';
import {
  assertPublicAddress,
  checkTargetUrl,
  guardedLookup,
  targetGuard,
  type TargetLookup,
} from '../../outbound/target-guard.ts';
import { classifyAddress } from '../../outbound/ip-ranges.ts';
import { attemptDelivery, createDeliveryAgent } from '../../outbound/attempt.ts';
import { sendPing } from '../../outbound/ping.ts';
import type { EndpointRecord } from '../../core/webhooks/records.ts';
import { lookup as dnsLookup } from 'node:dns/promises';
import { hostname } from 'node:os';
import { startTestNode, call } from '../helpers/sluice.ts';
import { startReceiver } from '../helpers/webhook-receiver.ts';

const strict = { allowInsecure: false };
const resolvesTo =
  (...addresses: string[]): TargetLookup =>
  async () =>
    addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));

async function refusal(p: Promise<unknown> | (() => unknown)): Promise<SluiceError> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (err) {
    if (err instanceof SluiceError) return err;
    throw err;
  }
  throw new Error('expected a refusal');
}

t.test('checkTargetUrl: https only, no credentials, bounded length', async (t) => {
  t.equal(checkTargetUrl('https://hooks.example.com/x', strict).hostname, 'hooks.example.com');
  for (const [url, reason] of [
    ['http://hooks.example.com/x', 'scheme'],
    ['ftp://hooks.example.com/x', 'scheme'],
    ['https://user:pw@hooks.example.com/x', 'credentials'],
    ['https://token@hooks.example.com/x', 'credentials'],
    [`https://hooks.example.com/${'a'.repeat(2100)}`, 'too_long'],
    ['not a url', 'invalid_url'],
  ] as const) {
    const e = await refusal(() => checkTargetUrl(url, strict));
    t.equal(e.code, 'UNPROCESSABLE_TARGET', url.slice(0, 60));
    t.equal(e.status, 422);
    t.equal(e.extra.reason, reason, `${url.slice(0, 60)}: ${e.message}`);
  }
  t.equal(
    checkTargetUrl('http://127.0.0.1:8080/x', { allowInsecure: true }).protocol,
    'http:',
    'the development flag allows http',
  );
  await refusal(() => checkTargetUrl('ftp://127.0.0.1/x', { allowInsecure: true }));
});

t.test('classifyAddress: every special-purpose range, and IPv4 inside IPv6', async (t) => {
  const blocked: [string, string][] = [
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['10.0.0.1', 'private'],
    ['10.255.255.255', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.9.9', 'private'],
    ['192.168.10.1', 'private'],
    ['169.254.169.254', 'metadata'],
    ['169.254.3.4', 'link-local'],
    ['100.64.0.1', 'shared'],
    ['100.127.255.254', 'shared'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['224.0.0.251', 'multicast'],
    ['239.1.1.1', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['192.0.2.1', 'documentation'],
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['fe80::1', 'link-local'],
    ['fc00::1', 'private'],
    ['fd12:3456::1', 'private'],
    ['fd00:ec2::254', 'metadata'],
    ['ff02::1', 'multicast'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:a00:1', 'private'],
    ['::ffff:169.254.169.254', 'metadata'],
    ['64:ff9b::10.1.1.1', 'private'],
    ['2002:c0a8:0101::1', 'private'],
    ['2001:db8::1', 'documentation'],
  ];
  for (const [address, kind] of blocked) t.equal(classifyAddress(address)?.blocked, kind, address);
  for (const address of [
    '8.8.8.8',
    '1.1.1.1',
    '172.32.0.1',
    '100.128.0.1',
    '93.184.215.14',
    '2606:4700:4700::1111',
    '::ffff:8.8.8.8',
    '64:ff9b::8.8.8.8',
  ]) {
    t.equal(classifyAddress(address), null, `${address} is public`);
  }
});

t.test('assertPublicAddress: IP literals and names are checked after resolution, every address', async (t) => {
  const cases: [string, TargetLookup | undefined, string][] = [
    ['https://127.0.0.1/x', undefined, 'loopback'],
    ['https://10.20.30.40/x', undefined, 'private'],
    ['https://169.254.169.254/latest/meta-data/', undefined, 'metadata'],
    ['https://[::1]/x', undefined, 'loopback'],
    ['https://[::ffff:10.0.0.1]/x', undefined, 'private'],
    ['https://[fd00:ec2::254]/x', undefined, 'metadata'],
    ['https://2130706433/x', undefined, 'loopback'], // 127.0.0.1 in decimal; the URL parser normalizes it
    ['https://0x7f.1/x', undefined, 'loopback'],
    ['https://localhost/x', undefined, 'loopback'],
    ['https://api.localhost/x', undefined, 'loopback'],
    ['https://metadata.google.internal/computeMetadata/v1/', undefined, 'metadata'],
    // A name is refused as not public, never saying what it resolved to (internal DNS).
    ['https://internal.example.com/x', resolvesTo('10.1.2.3'), 'not_public'],
    ['https://mixed.example.com/x', resolvesTo('93.184.215.14', '192.168.1.5'), 'not_public'],
    ['https://v6.example.com/x', resolvesTo('2606:4700::1', 'fe80::1'), 'not_public'],
    ['https://cgnat.example.com/x', resolvesTo('100.64.1.1'), 'not_public'],
    ['https://siit.example.com/x', resolvesTo('::ffff:0:a9fe:a9fe'), 'not_public'],
    ['https://nowhere.example.com/x', async () => [], 'unresolvable'],
    ['https://broken.example.com/x', async () => Promise.reject(new Error('ENOTFOUND')), 'unresolvable'],
  ];
  for (const [url, lookup, reason] of cases) {
    const e = await refusal(assertPublicAddress(new URL(url), { allowInsecure: false, lookup }));
    t.equal(e.code, 'UNPROCESSABLE_TARGET', url);
    t.equal(e.extra.reason, reason, `${url}: ${e.message}`);
  }
  await t.resolves(
    assertPublicAddress(new URL('https://hooks.example.com/x'), {
      allowInsecure: false,
      lookup: resolvesTo('93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'),
    }),
  );
  await t.resolves(assertPublicAddress(new URL('https://8.8.8.8/x'), strict), 'a public literal needs no DNS');
  const lookupCalls: string[] = [];
  await assertPublicAddress(new URL('https://Hooks.Example.COM./x'), {
    allowInsecure: false,
    lookup: async (h) => {
      lookupCalls.push(h);
      return [{ address: '1.1.1.1', family: 4 }];
    },
  });
  t.same(lookupCalls, ['hooks.example.com'], 'the name is normalized before the lookup');
});

t.test('the development flag allows loopback and private addresses, never cloud metadata', async (t) => {
  const dev = { allowInsecure: true };
  await t.resolves(assertPublicAddress(new URL('http://127.0.0.1:9/x'), dev));
  await t.resolves(assertPublicAddress(new URL('http://localhost:9/x'), { ...dev, lookup: resolvesTo('127.0.0.1') }));
  await t.resolves(assertPublicAddress(new URL('http://10.0.0.1/x'), dev));
  t.equal((await refusal(assertPublicAddress(new URL('http://169.254.169.254/x'), dev))).extra.reason, 'metadata');
  t.equal(
    (await refusal(assertPublicAddress(new URL('http://metadata.google.internal/x'), dev))).extra.reason,
    'metadata',
  );
  t.equal(
    (
      await refusal(
        assertPublicAddress(new URL('http://sneaky.example/x'), { ...dev, lookup: resolvesTo('169.254.169.254') }),
      )
    ).extra.reason,
    'metadata',
  );
});

t.test('DNS rebinding: the connection goes only to an address that passed the check', async (t) => {
  const r = await startReceiver(200);
  t.teardown(() => r.close());
  const port = new URL(r.url).port;
  // The pre-check saw a public address; the name now resolves to loopback when the socket connects.
  let calls = 0;
  const rebinding: TargetLookup = async () =>
    calls++ === 0 ? [{ address: '93.184.215.14', family: 4 }] : [{ address: '127.0.0.1', family: 4 }];
  const guard = { allowInsecure: false, lookup: rebinding };
  const agent = createDeliveryAgent(1, guardedLookup(guard));
  t.teardown(() => agent.destroy());
  const outcome = await attemptDelivery(
    `http://rebind.example:${port}/hook`,
    '{}',
    { 'content-type': 'application/json' },
    {
      timeoutMs: 5000,
      checkTarget: (url) => assertPublicAddress(url, guard),
      dispatcher: agent,
    },
  );
  t.equal(outcome.ok, false);
  t.match(outcome.error, /UNPROCESSABLE_TARGET|loopback/);
  t.equal(r.received.length, 0, 'nothing reached the loopback receiver');

  // With the flag on, the same guarded lookup connects to the address it resolved (not the system's answer).
  const devAgent = createDeliveryAgent(1, guardedLookup({ allowInsecure: true, lookup: resolvesTo('127.0.0.1') }));
  t.teardown(() => devAgent.destroy());
  const ok = await attemptDelivery(
    `http://no-such-host.invalid:${port}/hook`,
    '{}',
    { 'content-type': 'application/json' },
    { timeoutMs: 5000, dispatcher: devAgent },
  );
  t.equal(ok.ok, true, ok.error ?? '');
  t.equal(r.received.length, 1);
});

t.test('targetGuard checks each request without DNS; names are checked at connect by guardedLookup', async (t) => {
  let lookups = 0;
  const counting: TargetLookup = async () => {
    lookups++;
    return [{ address: '10.0.0.7', family: 4 }];
  };
  const guard = targetGuard({ allowInsecure: false, lookup: counting });
  await guard(new URL('https://hooks.example.com/x'));
  t.equal(lookups, 0, 'a hostname costs no DNS round trip per request');
  for (const [url, reason] of [
    ['https://10.0.0.1/x', 'private'],
    ['https://169.254.169.254/latest', 'metadata'],
    ['https://metadata.google.internal/x', 'metadata'],
    ['https://localhost/x', 'loopback'],
    ['https://[::1]/x', 'loopback'],
  ]) {
    await t.rejects(
      guard(new URL(url)),
      { code: 'UNPROCESSABLE_TARGET', extra: { reason } },
      `${url} refused without DNS`,
    );
  }
  t.equal(lookups, 0);
  // The same name is refused when a connection is made: the lookup sees the private address.
  const r = await startReceiver(200);
  t.teardown(() => r.close());
  const agent = createDeliveryAgent(1, guardedLookup({ allowInsecure: false, lookup: counting }));
  t.teardown(() => agent.destroy());
  const outcome = await attemptDelivery(
    `http://hooks.example.com:${new URL(r.url).port}/x`,
    '{}',
    {},
    { timeoutMs: 5000, checkTarget: targetGuard({ allowInsecure: true }), dispatcher: agent },
  );
  t.equal(outcome.ok, false);
  t.equal(lookups, 1, 'resolved once, at connect');
  t.equal(r.received.length, 0);
});

t.test('targetGuard refuses before any connection', async (t) => {
  const r = await startReceiver(200);
  t.teardown(() => r.close());
  const outcome = await attemptDelivery(r.url, '{}', {}, { timeoutMs: 5000, checkTarget: targetGuard(strict) });
  t.equal(outcome.ok, false);
  t.match(outcome.error, /https/);
  t.equal(r.received.length, 0);
});

t.test('registration refuses SSRF targets when the development flag is off', async (t) => {
  const node = await startTestNode({ SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'false' });
  t.teardown(() => node.close());
  const token = await node.token(await node.client('admin', 'acme'));
  const r = await startReceiver(200);
  t.teardown(() => r.close());
  const port = new URL(r.url).port;
  const cases: [string, string][] = [
    ['https://127.0.0.1/hook', 'loopback'],
    [`https://127.0.0.1:${port}/hook`, 'loopback'],
    ['https://10.0.0.8/hook', 'private'],
    ['https://10.255.1.2:8443/hook', 'private'],
    ['https://169.254.169.254/latest/meta-data/', 'metadata'],
    ['https://[::1]/hook', 'loopback'],
    ['https://[::ffff:127.0.0.1]/hook', 'loopback'],
    ['https://localhost/hook', 'loopback'],
    ['https://192.168.0.1/hook', 'private'],
    // IPv6 forms that carry an IPv4 address: what they carry decides.
    ['https://[::ffff:0:a9fe:a9fe]/hook', 'metadata'], // IPv4-translated (SIIT)
    ['https://[::ffff:0:127.0.0.1]/hook', 'loopback'],
    ['https://[::10.0.0.1]/hook', 'private'], // IPv4-compatible
    ['https://[64:ff9b::7f00:1]/hook', 'loopback'], // NAT64
    ['https://[64:ff9b:1::a9fe:a9fe]/hook', 'metadata'], // local-use NAT64
    ['https://[2002:a9fe:a9fe::1]/hook', 'metadata'], // 6to4
    ['https://[2001:0:808:808::f5ff:fffe]/hook', 'private'], // Teredo client 10.0.0.1
    ['https://[2606:4700::200:5efe:a9fe:a9fe]/hook', 'metadata'], // ISATAP
    [r.url, 'scheme'], // http://127.0.0.1:<port>/hook
    ['http://hooks.example.com/hook', 'scheme'],
    ['https://u:p@hooks.example.com/hook', 'credentials'],
  ];
  for (const [url, reason] of cases) {
    const res = await call(node.base, 'POST', '/v1/webhooks/endpoints', { token, body: { url, events: ['ping'] } });
    t.equal(res.status, 422, `${url}: status`);
    t.equal(res.json?.code, 'UNPROCESSABLE_TARGET', `${url}: code`);
    t.equal(res.json?.reason, reason, `${url}: ${res.json?.detail}`);
    t.same(
      res.json?.errors?.map((e: { path: string }) => e.path),
      ['$.url'],
      `${url}: names the field`,
    );
    t.match(res.headers.get('content-type'), /application\/problem\+json/);
  }
  t.equal(r.received.length, 0, 'no request reached the loopback receiver');
  t.same([...node.ctx.endpoints.listTenant('acme')], [], 'nothing was registered');
});

/** An IPv4 address as two hextets (`10.1.2.3` → `a01:203`). */
function hextets(v4: string): string {
  const [a, b, c, d] = v4.split('.').map(Number);
  return `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
}

/** The same, bitwise NOT (Teredo obfuscates its client address so). */
function notHextets(v4: string): string {
  const [a, b, c, d] = v4.split('.').map((o) => 255 - Number(o));
  return `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
}

const EMBEDDED: [string, string][] = [
  ['10.1.2.3', 'private'],
  ['127.0.0.1', 'loopback'],
  ['169.254.3.4', 'link-local'],
  ['169.254.169.254', 'metadata'],
  ['8.8.8.8', 'public'],
];

/**
 * Each IPv6 form that carries an IPv4 address: how it carries one, and what it is when the address
 * it carries is public (null: allowed). Otherwise the carried address decides.
 */
const FORMS: { form: string; make: (v4: string) => string; whenPublic: string | null; decides?: string[] }[] = [
  { form: 'IPv4-mapped ::ffff:0:0/96', make: (v4) => `::ffff:${v4}`, whenPublic: null },
  { form: 'IPv4-mapped, hex', make: (v4) => `::ffff:${hextets(v4)}`, whenPublic: null },
  { form: 'IPv4-translated ::ffff:0:0:0/96', make: (v4) => `::ffff:0:${hextets(v4)}`, whenPublic: null },
  { form: 'IPv4-translated, dotted', make: (v4) => `0:0:0:0:ffff:0:${v4}`, whenPublic: null },
  { form: 'IPv4-compatible ::/96 (deprecated)', make: (v4) => `::${v4}`, whenPublic: 'reserved' },
  { form: 'NAT64 64:ff9b::/96', make: (v4) => `64:ff9b::${v4}`, whenPublic: null },
  // Local use: the operator's own translator, refused whatever it carries; a metadata address
  // is still named as such (the development flag never allows it).
  {
    form: 'local-use NAT64 64:ff9b:1::/48, /96 layout',
    make: (v4) => `64:ff9b:1::${v4}`,
    whenPublic: 'private',
    decides: ['metadata'],
  },
  {
    form: 'local-use NAT64 64:ff9b:1::/48, /48 layout',
    make: (v4) => {
      const [a, b, c, d] = v4.split('.').map(Number);
      return `64:ff9b:1:${((a << 8) | b).toString(16)}:${c.toString(16)}:${(d << 8).toString(16)}::`;
    },
    whenPublic: 'private',
    decides: ['metadata'],
  },
  { form: '6to4 2002::/16', make: (v4) => `2002:${hextets(v4)}::1`, whenPublic: null },
  {
    form: 'Teredo 2001::/32, client',
    make: (v4) => `2001:0:${hextets('8.8.8.8')}:8000:63bf:${notHextets(v4)}`,
    whenPublic: 'reserved',
  },
  {
    form: 'Teredo 2001::/32, server',
    make: (v4) => `2001:0:${hextets(v4)}:8000:63bf:${notHextets('8.8.4.4')}`,
    whenPublic: 'reserved',
  },
  { form: 'ISATAP 200:5efe', make: (v4) => `2606:4700:1::200:5efe:${v4}`, whenPublic: null },
  { form: 'ISATAP 0:5efe', make: (v4) => `2606:4700:1:2:0:5efe:${hextets(v4)}`, whenPublic: null },
];

t.test('every IPv6 form that carries an IPv4 address is refused unless the address it carries is public', async (t) => {
  for (const { form, make, whenPublic, decides } of FORMS) {
    for (const [v4, kind] of EMBEDDED) {
      const address = make(v4);
      const got = classifyAddress(address);
      if (kind === 'public') {
        t.equal(got?.blocked ?? null, whenPublic, `${form}: ${address} (carries ${v4}, public)`);
      } else if (decides && !decides.includes(kind)) {
        t.equal(got?.blocked, whenPublic, `${form}: ${address} (carries ${v4}, ${kind})`);
      } else {
        t.equal(got?.blocked, kind, `${form}: ${address} (carries ${v4}): ${kind}`);
        t.equal(got?.embedded, v4, `${form}: ${address}: names what it carries`);
      }
    }
  }
  t.equal(classifyAddress('::ffff:0:a9fe:a9fe')?.blocked, 'metadata', 'the report: SIIT carrying 169.254.169.254');
  t.equal(classifyAddress('::')?.blocked, 'unspecified', ':: is still the unspecified address');
  t.equal(classifyAddress('::1')?.blocked, 'loopback', '::1 is still loopback, not IPv4-compatible 0.0.0.1');
  t.equal(classifyAddress('2001:0:4136:e378:8000:63bf:3fff:fdd2')?.embedded, '192.0.2.45', 'RFC 4380 example client');
});

t.test('literal targets in those forms: refused at registration, per request and with the dev flag', async (t) => {
  const guard = targetGuard(strict);
  const dev = targetGuard({ allowInsecure: true });
  for (const { form, make, whenPublic } of FORMS) {
    const metadata = `https://[${make('169.254.169.254')}]/hook`;
    const e = await refusal(assertPublicAddress(new URL(metadata), strict));
    t.equal(e.extra.reason, 'metadata', `${form}: ${metadata}`);
    t.match(e.message, /carries 169\.254\.169\.254 .*a metadata address/, `${form}: says what it carries`);
    t.equal((await refusal(guard(new URL(metadata)))).extra.reason, 'metadata', `${form}: per request too`);
    t.equal((await refusal(dev(new URL(metadata)))).extra.reason, 'metadata', `${form}: even with the dev flag`);
    const loopback = `https://[${make('127.0.0.1')}]/hook`;
    await t.rejects(assertPublicAddress(new URL(loopback), strict), { code: 'UNPROCESSABLE_TARGET' }, loopback);
    await t.resolves(dev(new URL(loopback.replace('https:', 'http:'))), `${form}: loopback allowed by the dev flag`);
    const pub = `https://[${make('8.8.8.8')}]/hook`;
    if (whenPublic === null) await t.resolves(assertPublicAddress(new URL(pub), strict), `${form}: ${pub} is public`);
    else t.equal((await refusal(assertPublicAddress(new URL(pub), strict))).extra.reason, whenPublic, pub);
  }
});

/** Every way the address, or what it carries, could be written in a message. */
function spellings(address: string): string[] {
  const out = [address, address.toLowerCase()];
  const blocked = classifyAddress(address);
  if (blocked?.embedded) out.push(blocked.embedded);
  if (blocked) out.push(blocked.range);
  const url = new URL(`https://${address.includes(':') ? `[${address}]` : address}/`);
  out.push(url.hostname.replace(/^\[|\]$/g, ''));
  return [...new Set(out)];
}

const INTERNAL = [
  '10.1.2.3',
  '127.0.0.1',
  '169.254.169.254',
  '100.64.7.7',
  '172.20.1.1',
  'fd12:3456::7',
  'fe80::1',
  '::ffff:10.9.8.7',
  '::ffff:0:a9fe:a9fe',
  '64:ff9b::a00:5',
  '2002:c0a8:101::1',
];

t.test('a name that resolves to an address that is not public: the refusal never says which', async (t) => {
  for (const address of INTERNAL) {
    const lookup = resolvesTo(address);
    const hidden = (text: string, where: string) => {
      for (const s of spellings(address)) t.notOk(text.includes(s), `${address}: ${where} does not contain "${s}"`);
    };
    // Registration (the 422 is built from the message and extra).
    const e = await refusal(assertPublicAddress(new URL('https://runsc/hook'), { allowInsecure: false, lookup }));
    t.equal(e.extra.reason, 'not_public', address);
    t.equal(
      e.message,
      'the target host runsc resolves to an address that is not public; webhook targets must be public',
    );
    hidden(JSON.stringify(e.toProblem()), 'the problem body');
    // The connect-time check (every ping and delivery).
    const err = await new Promise<Error | null>((resolve) =>
      guardedLookup({ allowInsecure: false, lookup })('runsc', {}, (error) => resolve(error)),
    );
    t.ok(err, `${address}: refused at connect`);
    hidden(`${err?.message} ${JSON.stringify(err)}`, 'the connect error');
  }
});

t.test('a ping or a delivery to such a name: its error (last_error, attempt history) never says which', async (t) => {
  const r = await startReceiver(200);
  t.teardown(() => r.close());
  const port = new URL(r.url).port;
  for (const address of INTERNAL) {
    const guard = { allowInsecure: false, lookup: resolvesTo(address) };
    // The ping sent at registration and by verify: its error goes into the sluice-ping-error header.
    const ping = await sendPing(
      { id: 'ep_x', tenant_id: 'acme', url: `https://runsc:${port}/hook` } as EndpointRecord,
      'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
      { ...guard, nowMs: Date.now() },
    );
    t.equal(ping.ok, false, `${address}: the ping is refused`);
    t.match(ping.error, /not public/);
    for (const s of spellings(address)) t.notOk(ping.error?.includes(s), `${address}: ping error without "${s}"`);
    // A delivery, as dispatcher/deliver.ts makes it: its error becomes last_error and the attempt report.
    const agent = createDeliveryAgent(1, guardedLookup(guard));
    const outcome = await attemptDelivery(
      `https://runsc:${port}/hook`,
      '{}',
      {},
      { timeoutMs: 5000, checkTarget: targetGuard(guard), dispatcher: agent },
    );
    await agent.destroy();
    t.equal(outcome.ok, false);
    t.match(outcome.error, /UNPROCESSABLE_TARGET: .*not public/);
    for (const s of spellings(address))
      t.notOk(outcome.error?.includes(s), `${address}: delivery error without "${s}"`);
  }
  t.equal(r.received.length, 0, 'nothing was sent');
});

t.test('registration: a name that really resolves to loopback gets a 422 that does not say where', async (t) => {
  // A name this machine's resolver maps to a non-public address (/etc/hosts), like `runsc` in the report.
  let name: string | null = null;
  let resolved: string[] = [];
  for (const candidate of [hostname(), 'runsc', 'localhost.localdomain', 'ip6-localhost']) {
    const all = await dnsLookup(candidate, { all: true }).catch(() => []);
    if (all.length > 0 && all.every((a) => classifyAddress(a.address) !== null)) {
      name = candidate.toLowerCase();
      resolved = all.map((a) => a.address);
      break;
    }
  }
  if (name === null) {
    // A skip the runner counts (and CI fails), not a silent return.
    t.skip('no name on this machine resolves to a non-public address (/etc/hosts)', () => {});
    return;
  }
  const node = await startTestNode({ SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'false' });
  t.teardown(() => node.close());
  const token = await node.token(await node.client('admin', 'acme'));
  const res = await call(node.base, 'POST', '/v1/webhooks/endpoints', {
    token,
    body: { url: `https://${name}/hook`, events: ['ping'] },
  });
  t.equal(res.status, 422);
  t.equal(res.json?.code, 'UNPROCESSABLE_TARGET');
  t.equal(res.json?.reason, 'not_public');
  t.equal(
    res.json?.detail,
    `the target host ${name} resolves to an address that is not public; webhook targets must be public`,
  );
  for (const address of resolved)
    for (const s of spellings(address)) t.notOk(res.text.includes(s), `${name} → ${address}: the answer has no "${s}"`);
});
