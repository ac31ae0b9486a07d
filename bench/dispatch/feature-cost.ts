/** What each feature on the delivery path costs, from the CPU profiles of `bench:dispatch --profile`. */
import { readFileSync } from 'node:fs';

/** `owns`: true when a stack frame (its script URL and function name) belongs to the feature. */
type Feature = { name: string; owns: (url: string, fn: string) => boolean };

/** A feature made of the scripts whose URL holds any of `parts`. */
function inFiles(name: string, parts: string[]): Feature {
  return { name, owns: (url) => parts.some((p) => url.includes(p)) };
}
/** The attempt digests and history, their store, and the attempt view (SQLite compiled to WebAssembly). */
const ATTEMPTS = ['/core/webhooks/attempt-', '/core/store/', 'node-sqlite3-wasm', 'wasm://', '/dispatcher/record.ts'];

export const FEATURES: Feature[] = [
  {
    name: 'tracing (span work; none when off)',
    // `attempting` and `within` wrap the attempt and its log lines: with tracing off they only call
    // through, so their frame sits under work that is not tracing's (the traced paths have frames
    // of their own: tracedAttempt, @opentelemetry's context.with).
    owns: (url, fn) =>
      (url.includes('/core/tracing.ts') && fn !== 'attempting' && fn !== 'within') || url.includes('@opentelemetry/'),
  },
  inFiles('metrics (prom-client counters and histograms)', ['/core/metrics.ts', '/prom-client/']),
  inFiles('signing, both schemes (HMAC-SHA256 ×2, headers)', ['/outbound/signing.ts', '/receiver-sdk/schemes/']),
  inFiles('of which the standard-webhooks signature', ['/receiver-sdk/schemes/standard.ts']),
  inFiles('attempt history (digests, their Kafka writes; the view on each ingress)', ATTEMPTS),
  inFiles('HTTP to receivers (socket writes and reads included)', ['/outbound/http1-agent.ts', '/outbound/attempt.ts']),
  inFiles('event-type counts (the fan-out tally, its reports, the view on each ingress)', ['/event-type-counts.ts']),
  inFiles('delivery policy (which endpoints need a lane; lanes)', ['/delivery-policy.ts', '/dispatcher/lane']),
  inFiles('Kafka client (kafkajs)', ['/kafkajs/']),
  { name: 'garbage collection', owns: (_url, fn) => fn === '(garbage collector)' },
];

/** A .cpuprofile, as far as it is read here. */
interface Profile {
  nodes: { id: number; callFrame: { functionName: string; url: string }; children?: number[] }[];
  samples: number[];
  timeDeltas: number[];
}

/** Busy time after `skipMs` of each profile, and the share (0..1) of it each feature's stacks hold. */
export function featureShares(files: string[], skipMs: number): { busyMs: number; shares: [string, number][] } {
  const inclusive = new Map<string, number>(FEATURES.map((f) => [f.name, 0]));
  let busy = 0;
  for (const file of files) {
    const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
    const byId = new Map(p.nodes.map((n) => [n.id, n]));
    const parent = new Map<number, number>();
    for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
    // The features a node's stack (the node and its ancestors) belongs to, memoised per node.
    const owners = new Map<number, Set<string>>();
    const ownersOf = (id: number): Set<string> => {
      const known = owners.get(id);
      if (known) return known;
      const up = parent.get(id);
      const set = new Set(up === undefined ? [] : ownersOf(up));
      const { url, functionName } = byId.get(id)!.callFrame;
      for (const f of FEATURES) if (f.owns(url, functionName)) set.add(f.name);
      owners.set(id, set);
      return set;
    };
    let t = 0;
    p.samples.forEach((id, i) => {
      t += p.timeDeltas[i];
      if (t < skipMs * 1000 || byId.get(id)!.callFrame.functionName === '(idle)') return;
      busy += p.timeDeltas[i];
      for (const name of ownersOf(id)) inclusive.set(name, inclusive.get(name)! + p.timeDeltas[i]);
    });
  }
  return { busyMs: busy / 1000, shares: FEATURES.map((f) => [f.name, busy ? inclusive.get(f.name)! / busy : 0]) };
}
