import t from 'tap';
import { CidrSet, formatIp, parseCidr, parseIp } from '../../core/net/cidr.ts';
import { loadConfig } from '../../core/config.ts';
import { ConfigError } from '../../core/errors.ts';

t.test('addresses in every text form, IPv4-mapped IPv6 as its IPv4 address', async (t) => {
  const text = (s: string) => {
    const b = parseIp(s);
    return b === null ? null : formatIp(b);
  };
  t.equal(text('127.0.0.1'), '127.0.0.1');
  t.equal(text('::ffff:127.0.0.1'), '127.0.0.1');
  t.equal(text('::FFFF:7f00:1'), '127.0.0.1');
  // What uWS 20.30 reports for an IPv4 peer of a dual-stack listener.
  t.equal(text('0000:0000:0000:0000:0000:ffff:7f00:0001'), '127.0.0.1');
  t.equal(text('0000:0000:0000:0000:0000:0000:0000:0001'), '::1');
  t.equal(text('[2001:DB8::1]'), '2001:db8::1');
  t.equal(text('2001:db8:0:0:1:0:0:1'), '2001:db8::1:0:0:1', 'RFC 5952: the first longest zero run');
  t.equal(text('1:2:3:4:5:6:7:8'), '1:2:3:4:5:6:7:8');
  t.equal(text('::'), '::');
  t.equal(text('64:ff9b::192.0.2.33'), '64:ff9b::c000:221', 'an IPv4 tail that is not a mapped address');
  for (const bad of [
    '',
    'localhost',
    '256.0.0.1',
    '1.2.3',
    '01.2.3.4',
    '1::2::3',
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4:5:6:7:8::',
    'fe80::1%eth0',
    '::ffff:1.2.3.256',
    '12345::',
  ])
    t.equal(parseIp(bad), null, `"${bad}" is not an address`);
});

t.test('blocks: membership, v4 peers of v6 blocks, host bits refused', async (t) => {
  const set = CidrSet.parse(' 10.0.0.0/8 , 192.168.1.7, 2001:db8::/32,::1 ');
  t.equal(set.toString(), '10.0.0.0/8,192.168.1.7,2001:db8::/32,::1');
  t.ok(set.has('10.200.3.4'));
  t.ok(set.has('::ffff:10.0.0.1'), 'an IPv4-mapped peer matches its IPv4 block');
  t.ok(set.has('0000:0000:0000:0000:0000:ffff:0a00:0001'));
  t.ok(set.has('192.168.1.7'));
  t.notOk(set.has('192.168.1.8'));
  t.notOk(set.has('11.0.0.1'));
  t.ok(set.has('2001:db8:ffff::1'));
  t.notOk(set.has('2001:db9::1'));
  t.ok(set.has('::1'));
  t.notOk(set.has('not an address'));
  t.notOk(set.has(''));

  t.same(parseCidr('::ffff:10.0.0.0/104'), parseCidr('10.0.0.0/8'), 'a mapped block is its IPv4 block');
  t.ok(CidrSet.parse('::/0').has('127.0.0.1'), '::/0 holds IPv4 peers too');
  t.ok(CidrSet.parse('0.0.0.0/0').has('::ffff:8.8.8.8'));
  t.notOk(CidrSet.parse('0.0.0.0/0').has('::1'), 'an IPv4 block holds no IPv6 address');
  t.ok(CidrSet.parse('127.0.0.1/32').has('::ffff:127.0.0.1'));
  t.ok(CidrSet.parse('10.1.2.0/23').has('10.1.3.255'));
  t.notOk(CidrSet.parse('10.1.2.0/23').has('10.1.4.0'));
  t.equal(CidrSet.parse('').size, 0);
  t.notOk(CidrSet.parse('').has('127.0.0.1'), 'an empty set trusts nobody');

  t.throws(() => parseCidr('10.0.0.1/8'), /did you mean 10\.0\.0\.0\/8/);
  t.throws(() => parseCidr('10.0.0.0/33'), /prefix length must be 0 to 32/);
  t.throws(() => parseCidr('::/129'), /0 to 128/);
  t.throws(() => parseCidr('proxy.internal'), /not an IP address or CIDR block/);
  t.throws(() => CidrSet.parse('10.0.0.0/8,,::1'), /empty/);
});

t.test('SLUICE_TRUSTED_PROXIES: empty by default, canonical, refused with the variable named', async (t) => {
  t.same(loadConfig({}).trustedProxies, []);
  t.same(loadConfig({ SLUICE_TRUSTED_PROXIES: '127.0.0.1, ::FFFF:10.0.0.0/104' }).trustedProxies, [
    '127.0.0.1',
    '10.0.0.0/8',
  ]);
  for (const bad of ['haproxy', '10.0.0.0/40', '10.0.0.1/8', '1.2.3.4,']) {
    try {
      loadConfig({ SLUICE_TRUSTED_PROXIES: bad });
      t.fail(`"${bad}" is accepted`);
    } catch (err) {
      t.ok(err instanceof ConfigError, `"${bad}": a ConfigError`);
      t.equal((err as ConfigError).variable, 'SLUICE_TRUSTED_PROXIES');
      t.match((err as Error).message, /comma-separated IP addresses or CIDR blocks/);
    }
  }
});
