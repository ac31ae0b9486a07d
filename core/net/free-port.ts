/** A TCP port on 127.0.0.1 that was free a moment ago (for the local broker, tests and benchmarks). */
import { createServer } from 'node:net';

/**
 * A port below Linux's ephemeral range (32768 and up) that was free a moment ago. Not one the
 * kernel hands out with listen(0): Sluice binds its ports after it has made its Kafka connections,
 * and an outbound connection takes its local port from the ephemeral range, so a port picked there
 * was often held (in TIME_WAIT) by the process's own connection when it came to bind it
 * (EADDRINUSE on the admin ports of `sluice start --workers 2`).
 */
export async function freePort(): Promise<number> {
  return freePorts(1);
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
    const p = 20_000 + Math.floor(Math.random() * (12_000 - n));
    let all = true;
    for (let i = 0; i < n && all; i++) all = await canListen(p + i);
    if (all) return p;
  }
}
