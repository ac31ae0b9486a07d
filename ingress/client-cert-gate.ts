/**
 * The public port when a client certificate is required (SLUICE_TLS_CLIENT_CA), which the TLS app of
 * uWebSockets.js 20.30 cannot require: uSockets loads the CA with SSL_VERIFY_PEER alone, so a client
 * of another CA, or with an expired certificate, fails its handshake, but a client that sends no
 * certificate at all is let through to the routes (docs/decisions.md, "mTLS without a proxy").
 *
 * So node:tls terminates TLS here with `requestCert` and `rejectUnauthorized`: a handshake without a
 * valid certificate of the CA fails and nothing is read from it. A verified connection is then
 * passed, byte for byte, to the plain uWS app listening on loopback, from a loopback address of its
 * own (127.x.y.z: all of 127/8 is this host's), so that the uWS side can tell whose it is:
 * `clientOf` maps that address back to the client's, and answers undefined for a connection the
 * gate did not make (someone on this host reaching the loopback port), which is then not served.
 *
 *   const gate = await startClientCertGate({ host, port, tls, upstreamPort });
 *   gate.clientOf('127.1.0.7') // '203.0.113.9'
 */
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { createServer, type TLSSocket } from 'node:tls';
import type { ListenerTls } from '../core/config/readers.ts';
import { SluiceBaseError } from '../core/errors.ts';

export interface ClientCertGate {
  /** The public port (the one asked for, or the one picked for 0). */
  port: number;
  /** The client's address for the loopback address a passed connection comes from; undefined: not the gate's. */
  clientOf(loopback: string): string | undefined;
  close(): void;
}

/** A TLS handshake not done within this is dropped (node's default is 120 s); idle after it, uWS's 10 s apply. */
const HANDSHAKE_TIMEOUT_MS = 10_000;

/**
 * Loopback source addresses, one per live passed connection: 127.1.0.1 to 127.254.255.254, in turn
 * (so an address is reused only after some 16 million connections, and never while its connection lives).
 */
class LoopbackAddresses {
  private next = 0;
  private readonly clients = new Map<string, string>();

  take(client: string): string {
    for (;;) {
      const n = this.next;
      this.next = (n + 1) % (254 * 65536);
      const last = n & 255;
      if (last === 0 || last === 255) continue;
      const address = `127.${1 + (n >>> 16)}.${(n >>> 8) & 255}.${last}`;
      if (this.clients.has(address)) continue;
      this.clients.set(address, client);
      return address;
    }
  }

  clientOf(address: string): string | undefined {
    return this.clients.get(address);
  }

  release(address: string): void {
    this.clients.delete(address);
  }
}

export function startClientCertGate(opts: {
  host: string;
  port: number;
  tls: ListenerTls & { clientCaFile: string };
  /** The uWS app's port on 127.0.0.1. */
  upstreamPort: number;
}): Promise<ClientCertGate> {
  const addresses = new LoopbackAddresses();
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
    const source = addresses.take(client.remoteAddress ?? '');
    // Released only once the uWS side closed too: a request already sent is still read from this address.
    const upstream = connect({ host: '127.0.0.1', port: opts.upstreamPort, localAddress: source, noDelay: true });
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
      addresses.release(source);
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
        clientOf: (loopback) => addresses.clientOf(loopback),
        close() {
          server.close();
          for (const socket of live) socket.destroy();
        },
      });
    });
  });
}
