/**
 * Classifies an IP address as public or as one of the special-purpose ranges a webhook target must
 * never reach (IANA IPv4/IPv6 special-purpose registries, plus the cloud metadata addresses).
 *
 *   classifyAddress('10.1.2.3')          // { blocked: 'private', range: '10.0.0.0/8' }
 *   classifyAddress('::ffff:127.0.0.1')  // { blocked: 'loopback', range: '127.0.0.0/8', embedded: '127.0.0.1', ... }
 *   classifyAddress('93.184.215.14')     // null (public)
 *
 * An IPv6 address that carries an IPv4 address reaches that IPv4 address (through a translator, a
 * tunnel or the host's own stack), so the IPv4 address decides: every such form is refused unless
 * what it embeds is public. The forms (EMBEDDINGS below): IPv4-mapped `::ffff:0:0/96`,
 * IPv4-translated `::ffff:0:0:0/96` (SIIT, RFC 7915), IPv4-compatible `::/96` (deprecated; refused
 * even when public), NAT64 `64:ff9b::/96` and the local-use `64:ff9b:1::/48` (RFC 8215; refused
 * whatever it carries, every RFC 6052 layout checked), 6to4 `2002::/16` (bits 16-48), Teredo
 * `2001::/32` (server in bits 32-64, client as the bitwise NOT of the last 32 bits; refused even
 * when both are public: not globally reachable) and ISATAP interface ids `…:0:5efe:a.b.c.d` and
 * `…:200:5efe:a.b.c.d` under any prefix.
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
  /** The range that decided: an IPv4 range when an embedded IPv4 address decided. */
  range: string;
  /** The IPv4 address an IPv6 address carries, when that address decided. */
  embedded?: string;
  /** The IPv6 form that carried it (e.g. `IPv4-translated ::ffff:0:0:0/96`). */
  form?: string;
}

interface Range {
  base: bigint;
  bits: number;
  prefix: number;
  kind: BlockedKind;
  text: string;
}

/** An IPv6 form that carries IPv4 addresses: where they sit, and what a public one means. */
interface Embedding {
  range: Range;
  name: string;
  /** The IPv4 addresses the IPv6 address carries (several when the layout is not known). */
  embedded: (v6: bigint) => bigint[];
  /** When every embedded address is public: allowed (null), or refused as the range's kind. */
  whenPublic: 'allow' | 'refuse';
  /**
   * The layout is the operator's choice, so the candidates are guesses: only a metadata address
   * among them decides (it stays refused with SLUICE_DEV_ALLOW_INSECURE_TARGETS); else the range.
   */
  guessed?: true;
}

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

// Checked after EMBEDDINGS, so the forms that carry an IPv4 address are decided by it first.
const V6: [string, BlockedKind][] = [
  ['fd00:ec2::254/128', 'metadata'], // AWS IMDS over IPv6
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['100::/64', 'reserved'], // discard-only
  ['2001:db8::/32', 'documentation'],
  ['2001::/23', 'reserved'], // IETF protocol assignments
  ['3fff::/20', 'documentation'],
  ['5f00::/16', 'reserved'], // SRv6 SIDs
  ['fc00::/7', 'private'], // unique local
  ['fe80::/10', 'link-local'],
  ['fec0::/10', 'private'], // site-local (deprecated)
  ['ff00::/8', 'multicast'],
];

function range(text: string, kind: BlockedKind, bits: 32 | 128): Range {
  const [addr, len] = text.split('/');
  const base = bits === 32 ? v4ToBigInt(addr)! : v6ToBigInt(addr)!;
  return { base, bits, prefix: Number(len), kind, text };
}

const V4_RANGES = V4.map(([t, k]) => range(t, k, 32));
const V6_RANGES = V6.map(([t, k]) => range(t, k, 128));
/** The exact addresses that come before any embedding (:: and ::1 are inside ::/96). */
const V6_FIRST = V6_RANGES.filter((r) => r.prefix === 128);

const M32 = 0xffffffffn;
const low32 = (v: bigint) => [v & M32];
/** RFC 6052 §2.2: an IPv4 address after a /48, /56, /64 or /96 prefix (bits 64-71 are the zero u octet). */
const rfc6052Layouts = (v: bigint) => [
  (((v >> 64n) & 0xffffn) << 16n) | ((v >> 40n) & 0xffffn), // /48
  (((v >> 64n) & 0xffn) << 24n) | ((v >> 32n) & 0xffffffn), // /56
  (v >> 24n) & M32, // /64
  v & M32, // /96
];

const EMBEDDING_FORMS: (Omit<Embedding, 'range'> & { text: string; kind?: BlockedKind })[] = [
  { text: '::ffff:0:0/96', name: 'IPv4-mapped', embedded: low32, whenPublic: 'allow' },
  { text: '::ffff:0:0:0/96', name: 'IPv4-translated', embedded: low32, whenPublic: 'allow' },
  { text: '::/96', name: 'IPv4-compatible (deprecated)', embedded: low32, whenPublic: 'refuse' },
  { text: '64:ff9b::/96', name: 'NAT64', embedded: low32, whenPublic: 'allow' },
  {
    text: '64:ff9b:1::/48',
    name: 'local-use NAT64',
    embedded: rfc6052Layouts,
    guessed: true,
    whenPublic: 'refuse',
    kind: 'private',
  },
  { text: '2002::/16', name: '6to4', embedded: (v: bigint) => [(v >> 80n) & M32], whenPublic: 'allow' },
  {
    text: '2001::/32',
    name: 'Teredo',
    // The client (the bitwise NOT of the last 32 bits), then the server (bits 32-64).
    embedded: (v: bigint) => [~v & M32, (v >> 64n) & M32],
    whenPublic: 'refuse',
  },
];
const EMBEDDINGS: Embedding[] = EMBEDDING_FORMS.map(({ text, kind, ...e }) => ({
  ...e,
  range: range(text, kind ?? 'reserved', 128),
}));

/** ISATAP interface ids (RFC 5214): `0:5efe` or `200:5efe` then the IPv4 address, under any /64. */
const ISATAP_IDS = new Set([0x00005efen, 0x02005efen]);

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

/** The first embedded address that is not public (a metadata address before any other), or null. */
function classifyEmbedded(candidates: bigint[], form: string): Blocked | null {
  let found: Blocked | null = null;
  for (const v4 of candidates) {
    const blocked = classifyV4(v4);
    if (blocked && (found === null || (blocked.blocked === 'metadata' && found.blocked !== 'metadata')))
      found = { ...blocked, embedded: bigIntToV4(v4), form };
  }
  return found;
}

/** null when the address is a public unicast address; otherwise why it is refused. */
export function classifyAddress(address: string): Blocked | null {
  const v4 = v4ToBigInt(address);
  if (v4 !== null) return classifyV4(v4);
  const v6 = v6ToBigInt(address);
  if (v6 === null) return { blocked: 'invalid', range: address };
  const exact = V6_FIRST.find((r) => inRange(v6, r));
  if (exact) return { blocked: exact.kind, range: exact.text };
  for (const e of EMBEDDINGS) {
    if (!inRange(v6, e.range)) continue;
    const form = `${e.name} ${e.range.text}`;
    const blocked = classifyEmbedded(e.embedded(v6), form);
    if (blocked && (!e.guessed || blocked.blocked === 'metadata')) return blocked;
    return e.whenPublic === 'allow' ? null : { blocked: e.range.kind, range: e.range.text, form };
  }
  if (ISATAP_IDS.has((v6 >> 32n) & M32)) {
    const blocked = classifyEmbedded([v6 & M32], 'ISATAP interface id');
    if (blocked) return blocked;
  }
  const r = V6_RANGES.find((x) => inRange(v6, x));
  return r ? { blocked: r.kind, range: r.text } : null;
}
