/**
 * IP addresses and CIDR blocks, IPv4 and IPv6, for one question: is this peer one of ours
 * (`SLUICE_TRUSTED_PROXIES`, whose client-certificate headers the ingress believes).
 *
 * An IPv4-mapped IPv6 address (`::ffff:127.0.0.1`, `0000:…:ffff:7f00:0001`: what a dual-stack
 * listener reports for an IPv4 peer) is that IPv4 address: it matches `127.0.0.1/32`, and
 * `::ffff:10.0.0.0/104` is `10.0.0.0/8`. An IPv6 block that covers the mapped range (`::/0`,
 * `::ffff:0:0/96`) matches IPv4 peers too. Zone ids (`fe80::1%eth0`) and host names are refused.
 *
 *   const proxies = CidrSet.parse('10.0.0.0/8, ::1');
 *   proxies.has('0000:0000:0000:0000:0000:ffff:0a00:0001'); // true (10.0.0.1)
 */

/** An address as bytes: 4 (IPv4, IPv4-mapped IPv6 included) or 16. */
export type IpBytes = Uint8Array;

const V4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;
const HEX_GROUP = /^[0-9a-fA-F]{1,4}$/;

function parseV4(text: string): IpBytes | null {
  const m = V4.exec(text);
  if (!m) return null;
  const out = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const part = m[i + 1];
    // "010" reads as octal in some parsers and decimal in others: refused rather than guessed.
    if (part.length > 1 && part[0] === '0') return null;
    const n = Number(part);
    if (n > 255) return null;
    out[i] = n;
  }
  return out;
}

/** The 16 bytes of an IPv6 address in any RFC 4291 text form (`::` once, an IPv4 tail), or null. */
function parseV6(text: string): Uint8Array | null {
  if (text.includes('%')) return null;
  let groups: string[];
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const split = (s: string) => (s === '' ? [] : s.split(':'));
  const head = split(halves[0]);
  const tail = halves.length === 2 ? split(halves[1]) : [];
  // An IPv4 tail (`::ffff:1.2.3.4`) stands for the last two groups.
  const last = halves.length === 2 ? tail : head;
  let v4: IpBytes | null = null;
  if (last.length > 0 && last[last.length - 1].includes('.')) {
    v4 = parseV4(last.pop()!);
    if (v4 === null) return null;
  }
  const v4Groups = v4 ? 2 : 0;
  if (halves.length === 2) {
    const missing = 8 - head.length - tail.length - v4Groups;
    if (missing < 1) return null;
    groups = [...head, ...Array<string>(missing).fill('0'), ...tail];
  } else {
    if (head.length + v4Groups !== 8) return null;
    groups = head;
  }
  const out = new Uint8Array(16);
  for (let i = 0; i < groups.length; i++) {
    if (!HEX_GROUP.test(groups[i])) return null;
    const n = Number.parseInt(groups[i], 16);
    out[i * 2] = n >> 8;
    out[i * 2 + 1] = n & 0xff;
  }
  if (v4) out.set(v4, 12);
  return out;
}

function isV4Mapped(b: Uint8Array): boolean {
  for (let i = 0; i < 10; i++) if (b[i] !== 0) return false;
  return b[10] === 0xff && b[11] === 0xff;
}

/** The bytes of an address (IPv4-mapped IPv6 as its 4 IPv4 bytes); null when it is not one. */
export function parseIp(text: string): IpBytes | null {
  const t = text.trim();
  if (t.includes(':')) {
    const b = parseV6(t.startsWith('[') && t.endsWith(']') ? t.slice(1, -1) : t);
    if (b === null) return null;
    return isV4Mapped(b) ? b.slice(12) : b;
  }
  return parseV4(t);
}

/** The canonical text of address bytes: dotted IPv4, or RFC 5952 IPv6 (lower case, longest zero run as `::`). */
export function formatIp(b: IpBytes): string {
  if (b.length === 4) return b.join('.');
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((b[i] << 8) | b[i + 1]);
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

/** A block of addresses: `bytes` with only the first `prefix` bits significant. */
export interface Cidr {
  bytes: IpBytes;
  prefix: number;
}

/** The canonical text of a block (`10.0.0.0/8`, `2001:db8::/32`; a single address without `/`). */
export function formatCidr(c: Cidr): string {
  return c.prefix === c.bytes.length * 8 ? formatIp(c.bytes) : `${formatIp(c.bytes)}/${c.prefix}`;
}

/** Parses `addr` or `addr/prefix`; throws an Error saying what is wrong (a config error names the variable). */
export function parseCidr(text: string): Cidr {
  const t = text.trim();
  const slash = t.indexOf('/');
  const addrText = slash < 0 ? t : t.slice(0, slash);
  const raw = addrText.includes(':') ? parseV6(addrText) : parseV4(addrText);
  if (raw === null) throw new Error(`"${t}" is not an IP address or CIDR block (IPv4 or IPv6, no host names)`);
  let prefix = raw.length * 8;
  if (slash >= 0) {
    const p = t.slice(slash + 1);
    if (!/^\d{1,3}$/.test(p) || Number(p) > raw.length * 8)
      throw new Error(`"${t}": the prefix length must be 0 to ${raw.length * 8}`);
    prefix = Number(p);
  }
  let bytes: IpBytes = raw;
  if (raw.length === 16 && isV4Mapped(raw) && prefix >= 96) {
    bytes = raw.slice(12);
    prefix -= 96;
  }
  const masked = mask(bytes, prefix);
  if (!equalBytes(masked, bytes))
    throw new Error(`"${t}" has bits set past its prefix: did you mean ${formatCidr({ bytes: masked, prefix })}?`);
  return { bytes, prefix };
}

function mask(b: IpBytes, prefix: number): IpBytes {
  const out = new Uint8Array(b.length);
  for (let i = 0; i < b.length; i++) {
    const bits = Math.max(0, Math.min(8, prefix - i * 8));
    out[i] = b[i] & ((0xff << (8 - bits)) & 0xff);
  }
  return out;
}

function equalBytes(a: IpBytes, b: IpBytes): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function contains(c: Cidr, b: IpBytes): boolean {
  if (c.bytes.length !== b.length) return false;
  const whole = c.prefix >> 3;
  for (let i = 0; i < whole; i++) if (c.bytes[i] !== b[i]) return false;
  const rest = c.prefix & 7;
  if (rest === 0) return true;
  const m = (0xff << (8 - rest)) & 0xff;
  return (c.bytes[whole] & m) === (b[whole] & m);
}

const MAPPED_PREFIX = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];

export class CidrSet {
  private readonly v4: Cidr[];
  private readonly v6: Cidr[];

  constructor(readonly entries: readonly Cidr[]) {
    this.v4 = entries.filter((c) => c.bytes.length === 4);
    this.v6 = entries.filter((c) => c.bytes.length === 16);
  }

  /** A comma-separated list (spaces allowed; empty: no address); throws an Error naming the first bad entry. */
  static parse(list: string): CidrSet {
    if (list.trim() === '') return new CidrSet([]);
    return new CidrSet(
      list.split(',').map((entry) => {
        if (entry.trim() === '') throw new Error('an entry of the comma-separated list is empty');
        return parseCidr(entry);
      }),
    );
  }

  get size(): number {
    return this.entries.length;
  }

  /** Whether the address (any text form; anything unparsable is not) lies in one of the blocks. */
  has(address: string): boolean {
    if (this.entries.length === 0) return false;
    const b = parseIp(address);
    if (b === null) return false;
    if (b.length === 16) return this.v6.some((c) => contains(c, b));
    if (this.v4.some((c) => contains(c, b))) return true;
    if (this.v6.length === 0) return false;
    const mapped = new Uint8Array([...MAPPED_PREFIX, ...b]);
    return this.v6.some((c) => contains(c, mapped));
  }

  /** The blocks in canonical text, comma-separated (for logs and docs). */
  toString(): string {
    return this.entries.map(formatCidr).join(',');
  }
}
