/** Messages between bench/noisy-neighbour.ts and its receiver and load generator (over bench/harness/ipc.ts). */
export type NoisyReceiverRequest =
  /** Opens `slow` hold ports and `fast` fast ports; returns their ports (the fast ones last). */
  | { op: 'listen'; slow: number; holdMs: number; fast: number }
  /** Starts a new measuring window for the fast ports (clears their latencies). */
  | { op: 'window' }
  | { op: 'stats' };

/** One fast port: first receipts in this window, repeats, publish-to-receipt latencies (ms), order. */
export interface FastPortStats {
  unique: number;
  duplicates: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
  /** Events of one ordering key received before an earlier one of the same key (first receipts). */
  inversions: number;
}

export interface NoisyReceiverStats {
  /** Per fast port, in the order of their ports. */
  fast: FastPortStats[];
  /** The hold ports: events received (every attempt), and the most requests they held at once. */
  slowReceived: number;
  slowHeldMax: number;
  slowHeldNow: number;
}

export interface NoisyLoadSpec {
  base: string;
  /** The probe: the quiet tenant, one event per request on a fixed schedule, keyed `k<seq % keys>`. */
  probe: { clientId: string; clientSecret: string; rate: number; seconds: number; keys: number };
  /** The flood: the noisy tenant, a batch of `batch` events every `everyMs` (null: no flood). */
  flood: { clientId: string; clientSecret: string; batch: number; everyMs: number; keys: number } | null;
}

export interface NoisyLoadResult {
  probeAccepted: number;
  /** The probe's publish answered (202), request sent to answer read: p50 and p99 in ms. */
  probeAnswerP50: number | null;
  probeAnswerP99: number | null;
  probeStatuses: Record<string, number>;
  floodAccepted: number;
  floodStatuses: Record<string, number>;
  /** matched_endpoints of the flood's events, summed: the deliveries it asked for. */
  floodDeliveries: number;
}

export type NoisyLoadRequest = { op: 'run'; spec: NoisyLoadSpec };
