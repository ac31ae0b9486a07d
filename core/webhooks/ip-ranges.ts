/**
 * Classifies an IP address as public or as one of the special-purpose ranges a webhook target must
 * never reach (IANA IPv4/IPv6 special-purpose registries, plus the cloud metadata addresses).
 *
 *   classifyAddress('10.1.2.3')          // { blocked: 'private', range: '10.0.0.0/8' }
 *   classifyAddress('::ffff:127.0.0.1')  // { blocked: 'loopback', range: '127.0.0.0/8' }
 *   classifyAddress('93.184.215.14')     // null (public)
 */
import { isIPv4, isIPv6 } from 'node:net';

export type BlockedKind =
  | 'metadata'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'unspecified'
  | 'shared'
  | 'multicast'
  | 'reserved'
  | 'documentation'
  | 'invalid';

export interface Blocked {
  blocked: BlockedKind;
  range: string;
}

interface Range {
  base: bigint;
  bits: number;
  prefix: number;
  kind: BlockedKind;
  text: string;
  /** IPv6 ranges that carry an IPv4 address in their low 32 bits: that address decides. */
  embedsV4?: 'low32' | '6to4';
}

// Order matters: the first match names the reason, so the narrow metadata ranges come first.
const V4: [string, BlockedKind][] = [
  ['169.254.169.254/32', 'metadata'], // AWS, GCP, Azure, OpenStack, DigitalOcean
  ['169.254.170.2/32', 'metadata'], // AWS ECS task metadata
  ['168.63.129.16/32', 'metadata'], // Azure WireServer (a public address)
  ['100.100.100.200/32', 'metadata'], // Alibaba Cloud
  ['0.0.0.0/8', 'unspecified'],
  ['10.0.0.0/8', 'private'],
  ['100.64.0.0/10', 'shared'], // carrier-grade NAT
  ['127.0.0.0/8', 'loopback'],
  ['169.254.0.0/16', 'link-local'],
  ['172.16.0.0/12', 'private'],
  ['192.0.0.0/24', 'reserved'],
  ['192.0.2.0/24', 'documentation'],
  ['192.88.99.0/24', 'reserved'],
  ['192.168.0.0/16', 'private'],
  ['198.18.0.0/15', 'reserved'], // benchmarking
  ['198.51.100.0/24', 'documentation'],
  ['203.0.113.0/24', 'documentation'],
  ['224.0.0.0/4', 'multicast'],
  ['240.0.0.0/4', 'reserved'], // includes 255.255.255.255
];

const V6: [string, BlockedKind, Range['embedsV4']?][] = [
  ['fd00:ec2::254/128', 'metadata'], // AWS IMDS over IPv6
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['::ffff:0:0/96', 'reserved', 'low32'], // IPv4-mapped
  ['::/96', 'reserved'], // IPv4-compatible (deprecated)
  ['64:ff9b::/96', 'reserved', 'low32'], // NAT64 well-known prefix
  ['64:ff9b:1::/48', 'private'], // local-use NAT64
  ['100::/64', 'reserved'], // discard-only
  ['2001:db8::/32', 'documentation'],
  ['2001::/23', 'reserved'], // IETF protocol assignments, Teredo
  ['2002::/16', 'reserved', '6to4'],
  ['3fff::/20', 'documentation'],
  ['5f00::/16', 'reserved'], // SRv6 SIDs
  ['fc00::/7', 'private'], // unique local
  ['fe80::/10', 'link-local'],
  ['fec0::/10', 'private'], // site-local (deprecated)
  ['ff00::/8', 'multicast'],
];

function range(text: string, kind: BlockedKind, bits: 32 | 128, embedsV4?: Range['embedsV4']): Range {
  const [addr, len] = text.split('/');
  const base = bits === 32 ? v4ToBigInt(addr)! : v6ToBigInt(addr)!;
  return { base, bits, prefix: Number(len), kind, text, embedsV4 };
}

const V4_RANGES = V4.map(([t, k]) => range(t, k, 32));
const V6_RANGES = V6.map(([t, k, e]) => range(t, k, 128, e));

function v4ToBigInt(addr: string): bigint | null {
  if (!isIPv4(addr)) return null;
  return addr.split('.').reduce((acc, octet) => (acc << 8n) | BigInt(Number(octet)), 0n);
}

function v6ToBigInt(addr: string): bigint | null {
  if (!isIPv6(addr)) return null;
  let text = addr.toLowerCase();
  const zone = text.indexOf('%');
  if (zone >= 0) text = text.slice(0, zone);
  // A trailing dotted IPv4 part (::ffff:1.2.3.4) becomes two hextets.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const v4 = v4ToBigInt(dotted[1])!;
    text = `${text.slice(0, dotted.index)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, null];
  const headParts = head ? head.split(':') : [];
  const tailParts = tail ? tail.split(':') : [];
  const fill = tail === null ? [] : new Array(8 - headParts.length - tailParts.length).fill('0');
  const parts = [...headParts, ...fill, ...tailParts];
  if (parts.length !== 8) return null;
  return parts.reduce((acc, h) => (acc << 16n) | BigInt(parseInt(h, 16)), 0n);
}

function inRange(value: bigint, r: Range): boolean {
  const shift = BigInt(r.bits - r.prefix);
  return value >> shift === r.base >> shift;
}

function bigIntToV4(v: bigint): string {
  return [24n, 16n, 8n, 0n].map((s) => String((v >> s) & 0xffn)).join('.');
}

function classifyV4(value: bigint): Blocked | null {
  const r = V4_RANGES.find((x) => inRange(value, x));
  return r ? { blocked: r.kind, range: r.text } : null;
}

/** null when the address is a public unicast address; otherwise why it is refused. */
export function classifyAddress(address: string): Blocked | null {
  const v4 = v4ToBigInt(address);
  if (v4 !== null) return classifyV4(v4);
  const v6 = v6ToBigInt(address);
  if (v6 === null) return { blocked: 'invalid', range: address };
  for (const r of V6_RANGES) {
    if (!inRange(v6, r)) continue;
    // A mapped, NAT64 or 6to4 address reaches the IPv4 address it carries: that address decides.
    if (r.embedsV4 === 'low32') return classifyV4(v6 & 0xffffffffn);
    if (r.embedsV4 === '6to4') return classifyV4((v6 >> 80n) & 0xffffffffn);
    return { blocked: r.kind, range: r.text };
  }
  return null;
}

/** The IPv4 address an IPv4-mapped IPv6 address stands for (for messages), else the address itself. */
export function displayAddress(address: string): string {
  const v6 = v6ToBigInt(address);
  if (v6 !== null && v6 >> 32n === 0xffffn) return `${address} (${bigIntToV4(v6 & 0xffffffffn)})`;
  return address;
}
