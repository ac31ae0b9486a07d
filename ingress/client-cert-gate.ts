/**
 * The public port when a client certificate is required (SLUICE_TLS_CLIENT_CA), which the TLS app of
 * uWebSockets.js 20.30 cannot require: uSockets loads the CA with SSL_VERIFY_PEER alone, so a client
 * of another CA, or with an expired certificate, fails its handshake, but a client that sends no
 * certificate at all is let through to the routes (docs/decisions.md, "mTLS without a proxy").
 *
 * So node:tls terminates TLS here with `requestCert` and `rejectUnauthorized`: a handshake without a
 * valid certificate of the CA fails and nothing is read from it. A verified connection is then
 * passed to the plain uWS app over a private Unix socket (a directory only this user can enter), led
 * by a PROXY protocol v2 header naming the client's address and port, then byte for byte. The uWS
 * side reads the client from that header; a connection without one (someone on this host with this
 * user's rights) is not served. Nothing listens on a TCP port but the public one, so no other local
 * user can reach the routes around the gate, whatever source address it binds.
 *
 *   const path = privateSocketPath();            // the uWS app listens here (listen_unix)
 *   const gate = await startClientCertGate({ host, port, tls, upstreamPath: path });
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { isIPv4, isIPv6, connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type TLSSocket } from 'node:tls';
import type { ListenerTls } from '../core/config/readers.ts';
import { SluiceBaseError } from '../core/errors.ts';

export interface ClientCertGate {
  /** The public port (the one asked for, or the one picked for 0). */
  port: number;
  close(): void;
}

/** A TLS handshake not done within this is dropped (node's default is 120 s); idle after it, uWS's 10 s apply. */
const HANDSHAKE_TIMEOUT_MS = 10_000;

/** A socket path in a new directory of mode 0700 (mkdtemp's): only this user (and root) can connect. */
export function privateSocketPath(): { path: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-gate-'));
  return { path: join(dir, 'uws.sock'), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

const PROXY_V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);

/**
 * The PROXY protocol v2 header (version 2, PROXY command, TCP) for a connection from `address`:`port`;
 * an IPv4-mapped IPv6 address is written as IPv4, so the uWS side sees the form a plain listener shows.
 */
export function proxyHeader(address: string, port: number, localPort: number): Buffer {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  const client = mapped ? mapped[1] : address;
  const v4 = isIPv4(client);
  if (!v4 && !isIPv6(client)) throw new SluiceBaseError('INTERNAL', `not an IP address: ${address}`);
  const size = v4 ? 12 : 36;
  const header = Buffer.alloc(16 + size);
  PROXY_V2_SIGNATURE.copy(header, 0);
  header[12] = 0x21;
  header[13] = v4 ? 0x11 : 0x21;
  header.writeUInt16BE(size, 14);
  const bytes = v4 ? Buffer.from(client.split('.').map(Number)) : ipv6Bytes(client);
  bytes.copy(header, 16);
  // The destination: loopback of the same family (the uWS side reads only the source).
  if (v4) header.set([127, 0, 0, 1], 20);
  else header[16 + 31] = 1;
  header.writeUInt16BE(port, 16 + 2 * bytes.length);
  header.writeUInt16BE(localPort, 18 + 2 * bytes.length);
  return header;
}

function ipv6Bytes(address: string): Buffer {
  const [head, tail = ''] = address.includes('::') ? address.split('::') : [address, undefined];
  const groups = (part: string | undefined) => (part ? part.split(':') : []);
  let left = groups(head);
  let right = tail === undefined ? [] : groups(tail);
  // An embedded IPv4 tail (::a.b.c.d forms) is two groups.
  const fix = (g: string[]) => {
    const last = g.at(-1);
    if (!last || !isIPv4(last)) return g;
    const o = last.split('.').map(Number);
    return [...g.slice(0, -1), ((o[0] << 8) | o[1]).toString(16), ((o[2] << 8) | o[3]).toString(16)];
  };
  left = fix(left);
  right = fix(right);
  const fill = address.includes('::') ? Array(8 - left.length - right.length).fill('0') : [];
  const all = [...left, ...fill, ...right];
  const out = Buffer.alloc(16);
  for (const [i, g] of all.entries()) out.writeUInt16BE(Number.parseInt(g, 16), i * 2);
  return out;
}

export function startClientCertGate(opts: {
  host: string;
  port: number;
  tls: ListenerTls & { clientCaFile: string };
  /** The uWS app's private Unix socket (privateSocketPath). */
  upstreamPath: string;
}): Promise<ClientCertGate> {
  const live = new Set<Socket>();
  const server = createServer(
    {
      cert: readFileSync(opts.tls.certFile),
      key: readFileSync(opts.tls.keyFile),
      ca: readFileSync(opts.tls.clientCaFile),
      requestCert: true,
      rejectUnauthorized: true,
      handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
      ALPNProtocols: ['http/1.1'],
    },
    (client: TLSSocket) => pass(client),
  );
  // A failed handshake (no certificate, another CA, expired) is the client's problem, not the node's.
  server.on('tlsClientError', () => {});

  function pass(client: TLSSocket): void {
    const upstream = connect({ path: opts.upstreamPath });
    upstream.write(proxyHeader(client.remoteAddress ?? '::', client.remotePort ?? 0, client.localPort ?? 0));
    client.setNoDelay(true);
    live.add(client);
    live.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop);
    upstream.on('error', drop);
    client.once('close', () => {
      live.delete(client);
      upstream.end();
    });
    upstream.once('close', () => {
      live.delete(upstream);
      client.destroy();
    });
    client.pipe(upstream);
    upstream.pipe(client);
  }

  return new Promise((resolve, reject) => {
    server.once('error', (err) =>
      reject(new SluiceBaseError('LISTEN_FAILED', `cannot listen on ${opts.host}:${opts.port}: ${err.message}`)),
    );
    server.listen(opts.port, opts.host, () => {
      const address = server.address();
      resolve({
        port: typeof address === 'object' && address ? address.port : opts.port,
        close() {
          server.close();
          for (const socket of live) socket.destroy();
        },
      });
    });
  });
}
