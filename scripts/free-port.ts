/** A TCP port on 127.0.0.1 that was free a moment ago (for tests, benchmarks and the test broker). */
import { createServer } from 'node:net';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** The first of `n` consecutive free ports (a local Kafka cluster uses port … port + 2·brokers − 1). */
export async function freePorts(n: number): Promise<number> {
  for (;;) {
    const p = await freePort();
    if (p + n > 65535) continue;
    let all = true;
    for (let i = 1; i < n && all; i++) all = await canListen(p + i);
    if (all) return p;
  }
}

/**
 * The first of `n` consecutive free ports below Linux's ephemeral range (32768 and up), for a
 * process that binds them only after it has made outbound connections: an outbound connection
 * takes its local port from the ephemeral range, and one that used a port a moment ago (TIME_WAIT)
 * makes a later bind of it fail with EADDRINUSE (seen with the admin ports of `sluice start
 * --workers 2`, bound after the workers' Kafka connections).
 */
export async function freeListenPorts(n = 1): Promise<number> {
  for (;;) {
    const p = 20_000 + Math.floor(Math.random() * (12_000 - n));
    let all = true;
    for (let i = 0; i < n && all; i++) all = await canListen(p + i);
    if (all) return p;
  }
}
