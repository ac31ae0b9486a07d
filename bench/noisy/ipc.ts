/** Messages between bench/noisy-neighbour.ts and its receiver and load generator (over bench/dispatch/ipc.ts). */
export type NoisyReceiverRequest =
  /** Opens `slow` hold ports and one fast port; returns their ports (the fast one last). */
  | { op: 'listen'; slow: number; holdMs: number }
  /** Starts a new measuring window for the fast port (clears its latencies). */
  | { op: 'window' }
  | { op: 'stats' };

export interface NoisyReceiverStats {
  /** The fast port: first receipts in this window, repeats, and publish-to-receipt latencies (ms). */
  fastUnique: number;
  fastDuplicates: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
  /** The hold ports: events received (every attempt), and the most requests they held at once. */
  slowReceived: number;
  slowHeldMax: number;
  slowHeldNow: number;
}

export interface NoisyLoadSpec {
  base: string;
  /** The probe: tenant B, one event per request on a fixed schedule. */
  probe: { clientId: string; clientSecret: string; rate: number; seconds: number };
  /** The flood: tenant A, a batch of `batch` events every `everyMs` (null: no flood). */
  flood: { clientId: string; clientSecret: string; batch: number; everyMs: number } | null;
}

export interface NoisyLoadResult {
  probeAccepted: number;
  probeStatuses: Record<string, number>;
  floodAccepted: number;
  floodStatuses: Record<string, number>;
  /** matched_endpoints of the flood's events, summed: the deliveries it asked for. */
  floodDeliveries: number;
}

export type NoisyLoadRequest = { op: 'run'; spec: NoisyLoadSpec };
