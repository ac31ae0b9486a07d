/**
 * The webhook conformance receiver (`sluice contract receiver`): an HTTP server that checks every
 * delivery with checkDelivery, answers 200 to a conformant one and 400 (with the violations as
 * JSON) to the rest, and keeps every delivery for a report.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadContract } from '../contract.ts';
import { ContractSchemas } from '../schemas.ts';
import { checkDelivery } from './check.ts';

export interface ReceivedDelivery {
  at: number;
  path: string;
  eventId: string | undefined;
  eventType: string | undefined;
  attempt: string | undefined;
  body: unknown;
  violations: string[];
  rawBody: Buffer;
  headers: Record<string, string | undefined>;
}

export interface ReceiverOptions {
  port: number;
  host?: string;
  secret: string;
  toleranceSeconds?: number;
  now?: () => number;
  onDelivery?: (d: ReceivedDelivery) => void;
  /** Answer 200 whatever the verdict (a registration's ping arrives before its secret is known). */
  alwaysOk?: boolean;
}

export interface ConformanceReceiver {
  port: number;
  url: string;
  deliveries: ReceivedDelivery[];
  /** The secret can be set after start, once registration returned it. */
  secret: string;
  /** Checks every kept delivery again with the current secret, as of its arrival time. */
  recheck(): ReceivedDelivery[];
  close(): Promise<void>;
}

export async function startConformanceReceiver(opts: ReceiverOptions): Promise<ConformanceReceiver> {
  const doc = loadContract();
  const schemas = new ContractSchemas(doc);
  const deliveries: ReceivedDelivery[] = [];
  const now = opts.now ?? Date.now;
  const state = { secret: opts.secret };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const headers = req.headers as Record<string, string | undefined>;
      const violations =
        req.method === 'POST'
          ? checkDelivery(raw, headers, state.secret, {
              schemas,
              doc,
              now: now(),
              toleranceSeconds: opts.toleranceSeconds,
            })
          : [`method ${req.method}, deliveries are POST`];
      let body: unknown;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        /* reported by the checks */
      }
      const d: ReceivedDelivery = {
        at: now(),
        path: req.url ?? '/',
        eventId: headers['x-service-event-id'],
        eventType: headers['x-service-event-type'],
        attempt: headers['x-service-delivery-attempt'],
        body,
        violations,
        rawBody: raw,
        headers,
      };
      deliveries.push(d);
      opts.onDelivery?.(d);
      res.writeHead(violations.length && !opts.alwaysOk ? 400 : 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(violations.length ? { violations } : { ok: true }));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host ?? '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `http://${opts.host ?? '127.0.0.1'}:${port}/`,
    deliveries,
    get secret() {
      return state.secret;
    },
    set secret(s: string) {
      state.secret = s;
    },
    recheck() {
      for (const d of deliveries)
        d.violations = checkDelivery(d.rawBody, d.headers, state.secret, {
          schemas,
          doc,
          now: d.at,
          toleranceSeconds: opts.toleranceSeconds,
        });
      return deliveries;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
