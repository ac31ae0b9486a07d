/**
 * SSRF guard for webhook targets. A target must be an `https` URL without credentials whose host
 * resolves only to public addresses: never loopback, private, link-local, shared (CGNAT),
 * multicast, reserved or a cloud metadata address. Checked at registration and before every
 * delivery; `guardedLookup` also makes the connection itself go to an address that passed the
 * check, which closes the DNS-rebinding gap between checking a name and connecting to it.
 *
 *   const url = checkTargetUrl(body.url, { allowInsecure });   // syntax: throws 422
 *   await assertPublicAddress(url, { allowInsecure });         // after DNS: throws 422
 *
 * `allowInsecure` (SLUICE_DEV_ALLOW_INSECURE_TARGETS, refused in production) allows `http` and
 * non-public addresses for local development and tests; cloud metadata stays refused even then.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import { SluiceError } from '../core/errors.ts';
import { type Blocked, type BlockedKind, classifyAddress } from './ip-ranges.ts';

export const MAX_TARGET_URL_LENGTH = 2048;
const DNS_TIMEOUT_MS = 5000;

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Resolves a hostname to all its addresses (injectable so tests can make a name resolve anywhere). */
export type TargetLookup = (hostname: string) => Promise<ResolvedAddress[]>;

export interface TargetGuardOptions {
  allowInsecure: boolean;
  lookup?: TargetLookup;
}

/**
 * Why a target is refused. `not_public`: a host name resolves to an address that is not public;
 * which address, and which kind of range, is not said (it would map the internal network).
 */
export type TargetRefusal =
  | 'invalid_url'
  | 'too_long'
  | 'scheme'
  | 'credentials'
  | 'unresolvable'
  | 'not_public'
  | BlockedKind;

/** Names that reach a metadata service or loopback whatever DNS says. */
const METADATA_NAMES = new Set([
  'metadata.google.internal',
  'metadata.goog',
  'metadata',
  'instance-data',
  'instance-data.ec2.internal',
]);

function refuse(reason: TargetRefusal, detail: string, extra: Record<string, unknown> = {}): SluiceError {
  return new SluiceError('UNPROCESSABLE_TARGET', detail, { reason, ...extra });
}

/** Syntax checks that need no network; returns the parsed URL. */
export function checkTargetUrl(url: string, opts: { allowInsecure: boolean }): URL {
  if (url.length > MAX_TARGET_URL_LENGTH)
    throw refuse('too_long', `the target URL must be at most ${MAX_TARGET_URL_LENGTH} characters`);
  // A URL parser that is not WHATWG's may read `https://1.1.1.1\\@127.0.0.1/` as host 127.0.0.1;
  // what no two parsers can disagree on is refused, and the URL is kept in WHATWG's form (`href`).
  if (/[\\\x00-\x20\x7f]/.test(url))
    throw refuse('invalid_url', 'the target URL must not hold backslashes, spaces or control characters');
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw refuse('invalid_url', 'the target URL is not an absolute URL');
  }
  const schemes = opts.allowInsecure ? ['https:', 'http:'] : ['https:'];
  if (!schemes.includes(parsed.protocol)) {
    throw refuse(
      'scheme',
      `the target URL must use ${opts.allowInsecure ? 'https or http' : 'https'}, ` +
        `got "${parsed.protocol.replace(/:$/, '')}"`,
    );
  }
  if (parsed.username !== '' || parsed.password !== '')
    throw refuse(
      'credentials',
      'the target URL must not carry credentials (user:password@); authenticate with the signature instead',
    );
  if (hostOf(parsed) === '') throw refuse('invalid_url', 'the target URL has no host');
  return parsed;
}

/** The form a target URL is stored and compared in: WHATWG's serialisation, or as given when it is none. */
export function normalTargetUrl(url: string): string {
  try {
    return new URL(url).href;
  } catch {
    return url;
  }
}

/** The hostname without IPv6 brackets or a trailing root dot, lower case. */
function hostOf(url: URL): string {
  return url.hostname
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '')
    .toLowerCase();
}

/** What a refused IP literal is, for its message: `a private address (10.0.0.0/8)`, or what it carries. */
function describe(blocked: Blocked): string {
  const kind = blocked.blocked === 'invalid' ? 'an invalid' : `a ${blocked.blocked}`;
  if (blocked.embedded) return `carries ${blocked.embedded} (${blocked.form}), ${kind} address (${blocked.range})`;
  return `is ${kind} address (${blocked.form ?? blocked.range})`;
}

/**
 * Refuses one address unless it is public (or allowed for development). `hostname` is the URL's
 * host: when it is the address itself (an IP literal), the refusal names it and its range, which
 * the caller wrote. When it is a name, the refusal says only that the name is not public: the
 * address it resolved to never leaves this function (not in the 422, a ping's result, a delivery's
 * last error or its attempt history, which all carry this message), since it maps internal DNS.
 */
function checkAddress(hostname: string, address: string, allowInsecure: boolean): void {
  const blocked = classifyAddress(address);
  if (!blocked) return;
  if (allowInsecure && blocked.blocked !== 'metadata' && blocked.blocked !== 'invalid') return;
  if (hostname !== address) {
    if (allowInsecure && blocked.blocked === 'metadata')
      throw refuse(
        'metadata',
        `the target host ${hostname} resolves to a cloud metadata address, refused even with ` +
          'SLUICE_DEV_ALLOW_INSECURE_TARGETS',
      );
    throw refuse(
      'not_public',
      `the target host ${hostname} resolves to an address that is not public; webhook targets must be public`,
    );
  }
  throw refuse(blocked.blocked, `the target address ${address} ${describe(blocked)}; webhook targets must be public`, {
    range: blocked.range,
  });
}

function checkName(hostname: string, allowInsecure: boolean): void {
  if (METADATA_NAMES.has(hostname)) throw refuse('metadata', `the target host ${hostname} is a cloud metadata service`);
  // RFC 6761: localhost names are loopback whatever a resolver answers.
  if (!allowInsecure && (hostname === 'localhost' || hostname.endsWith('.localhost')))
    throw refuse('loopback', `the target host ${hostname} is a loopback name; webhook targets must be public`);
}

const systemLookup: TargetLookup = async (hostname) => {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      dnsLookup(hostname, { all: true, verbatim: true }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no DNS answer within ${DNS_TIMEOUT_MS} ms`)), DNS_TIMEOUT_MS);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
};

/** Every address of `hostname`, each checked; throws 422 when the name does not resolve or any address is refused. */
export async function resolveTarget(hostname: string, opts: TargetGuardOptions): Promise<ResolvedAddress[]> {
  const host = hostname
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '')
    .toLowerCase();
  const family = isIP(host);
  if (family !== 0) {
    checkAddress(host, host, opts.allowInsecure);
    return [{ address: host, family }];
  }
  checkName(host, opts.allowInsecure);
  let addresses: ResolvedAddress[];
  try {
    addresses = await (opts.lookup ?? systemLookup)(host);
  } catch (err) {
    throw refuse('unresolvable', `the target host ${host} does not resolve: ${(err as Error).message}`);
  }
  if (addresses.length === 0) throw refuse('unresolvable', `the target host ${host} has no addresses`);
  // Every address, not only the first: a resolver may hand out any of them at connect time.
  for (const a of addresses) checkAddress(host, a.address, opts.allowInsecure);
  return addresses;
}

/** Resolves the URL's host (all addresses) and refuses any non-public one; throws SluiceError UNPROCESSABLE_TARGET. */
export async function assertPublicAddress(url: URL, opts: TargetGuardOptions): Promise<void> {
  await resolveTarget(hostOf(url), opts);
}

/**
 * The per-request check, in the shape attemptDelivery's `checkTarget` takes: the URL, names that
 * are never public, and IP-literal hosts (which never reach a lookup). It resolves nothing: a
 * hostname is resolved and checked when a connection is made, by `guardedLookup`, which every
 * delivery agent carries, so an attempt on a kept-alive connection costs no DNS round trip.
 */
export function targetGuard(opts: TargetGuardOptions): (url: URL) => Promise<void> {
  return async (url) => {
    checkTargetUrl(url.href, opts);
    const host = hostOf(url);
    if (isIP(host) !== 0) checkAddress(host, host, opts.allowInsecure);
    else checkName(host, opts.allowInsecure);
  };
}

/**
 * A `lookup` for net/tls.connect (undici Agent `connect.lookup`): resolves, checks every address
 * and connects only to a checked one, so a name that re-resolves to a private address between the
 * check and the connect (DNS rebinding) is refused at connect time. IP-literal hosts never reach a
 * lookup; `targetGuard` covers those before the request.
 */
export function guardedLookup(opts: TargetGuardOptions): LookupFunction {
  return (hostname, options, callback) => {
    resolveTarget(hostname, opts).then(
      (addresses) => {
        const want =
          options.family === 4 || options.family === 'IPv4'
            ? 4
            : options.family === 6 || options.family === 'IPv6'
              ? 6
              : 0;
        const usable = want === 0 ? addresses : addresses.filter((a) => a.family === want);
        if (usable.length === 0) {
          const err: NodeJS.ErrnoException = new Error(`${hostname} has no IPv${want} address`);
          err.code = 'ENOTFOUND';
          return callback(err, '', 0);
        }
        if (options.all) callback(null, usable);
        else callback(null, usable[0].address, usable[0].family);
      },
      (err: Error) => callback(err as NodeJS.ErrnoException, '', 0),
    );
  };
}
