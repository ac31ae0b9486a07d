import t from 'tap';
import { SluiceError } from '../../core/errors.ts';
import {
  assertPublicAddress,
  checkTargetUrl,
  guardedLookup,
  targetGuard,
  type TargetLookup,
} from '../../core/webhooks/target-guard.ts';
import { classifyAddress } from '../../core/webhooks/ip-ranges.ts';
import { attemptDelivery, createDeliveryAgent } from '../../core/webhooks/attempt.ts';
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
    ['https://internal.example.com/x', resolvesTo('10.1.2.3'), 'private'],
    ['https://mixed.example.com/x', resolvesTo('93.184.215.14', '192.168.1.5'), 'private'],
    ['https://v6.example.com/x', resolvesTo('2606:4700::1', 'fe80::1'), 'link-local'],
    ['https://cgnat.example.com/x', resolvesTo('100.64.1.1'), 'shared'],
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
