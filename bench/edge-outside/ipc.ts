/**
 * Messages between the edge-from-outside bench (bench/edge-outside.ts) and its load generator
 * (bench/edge-outside/load.ts). The request/reply layer is bench/harness/ipc.ts.
 */

export interface Credentials {
  client_id: string;
  client_secret: string;
}

/**
 * Closed model: `connections` token requests in flight, each sent as soon as the previous answered;
 * warmUpSeconds of it first, not counted (the load generator sends `{ event: 'measuring' }` as it ends).
 */
export interface TokenSpec {
  base: string;
  /** Round-robin over the requests. */
  clients: Credentials[];
  connections: number;
  warmUpSeconds: number;
  seconds: number;
}

export interface TokenResult {
  requests: number;
  /** 200 responses: the only ones counted in `okPerSec`. */
  ok: number;
  /** Responses by status; network failures as `error:<code>`. */
  statuses: Record<string, number>;
  /** From the first request sent to the last answer. */
  seconds: number;
  okPerSec: number;
  /** Latency of the 200 responses, ms. */
  p50: number | null;
  p99: number | null;
}

export interface RevocationSpec {
  /** `sluice start`: issues the tokens and takes the revocations. */
  node1: string;
  /** `sluice ingress`. */
  node2: string;
  officer: Credentials;
  /** Revoked in one full round before the measured ones, not reported. */
  warmUp: Credentials;
  victims: Credentials[];
  /** A node that has not refused the token this long after the POST counts as "never". */
  roundTimeoutMs: number;
}

export interface RevocationResult {
  /** Per measured round, ms from sending the POST (NaN: not refused within the round's timeout). */
  node2Ms: number[];
  node1Ms: number[];
  /** POST sent → its 201. */
  postMs: number[];
  /** Round trip of the 200 polls (the resolution of the two figures above), ms. */
  pollP50: number | null;
  pollP99: number | null;
  polls: number;
  /** Anything but the expected answers, by what and status (e.g. `poll node 2: 503`). */
  unexpected: Record<string, number>;
}

export type LoadRequest = { op: 'tokens'; spec: TokenSpec } | { op: 'revocation'; spec: RevocationSpec };
export type LoadReply = { tokens?: TokenResult; revocation?: RevocationResult };
