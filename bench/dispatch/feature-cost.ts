/**
 * What each feature on the delivery path costs, read from the CPU profiles of a `bench:dispatch
 * --profile` run: a sample counts for a feature when any frame of its stack is the feature's code
 * (inclusive time: its own work and what it calls, crypto and Kafka writes included), as a share of
 * the Sluice processes' busy samples after start-up. Multiplied by the run's measured CPU per
 * 1,000 deliveries, a share becomes the feature's CPU per 1,000 deliveries. Shares overlap where a
 * feature's code calls another's (a span around a signature), so they do not add up to 100 %.
 *
 *   const shares = featureShares(['/tmp/…/prof/CPU.1.cpuprofile'], { skipMs: 15_000 });
 */
import { readFileSync } from 'node:fs';

export interface Feature {
  name: string;
  /** True when a stack frame (its script URL and function name) belongs to the feature. */
  owns(url: string, fn: string): boolean;
}

/** A feature's `owns` for the scripts whose URL holds any of `parts`. */
const inFiles =
  (...parts: string[]) =>
  (url: string): boolean =>
    parts.some((p) => url.includes(p));

/** The features, as the profile tells them apart. */
export const FEATURES: Feature[] = [
  {
    name: 'tracing (span work; none when off)',
    // `attempting` and `within` wrap the attempt and its log lines: with tracing off they only call
    // through, so their frame sits under work that is not tracing's (the traced paths have frames
    // of their own: tracedAttempt, @opentelemetry's context.with).
    owns: (url, fn) =>
      (url.includes('/core/tracing.ts') && fn !== 'attempting' && fn !== 'within') || url.includes('@opentelemetry/'),
  },
  {
    name: 'metrics (prom-client counters and histograms)',
    owns: inFiles('/core/metrics.ts', '/prom-client/'),
  },
  {
    name: 'signing, both schemes (HMAC-SHA256 ×2, headers)',
    owns: inFiles('/outbound/signing.ts', '/receiver-sdk/schemes/'),
  },
  {
    name: 'of which the standard-webhooks signature',
    owns: inFiles('/receiver-sdk/schemes/standard.ts'),
  },
  {
    name: 'attempt history (digests, their Kafka writes; the view on each ingress)',
    owns: (url) =>
      url.includes('/core/webhooks/attempt-digest.ts') ||
      url.includes('/core/webhooks/attempt-history.ts') ||
      url.includes('/core/store/') ||
      url.includes('node-sqlite3-wasm') ||
      url.startsWith('wasm://') ||
      /\/dispatcher\/record\.ts$/.test(url),
  },
  {
    name: 'HTTP to receivers (http1-agent.ts, attempt.ts: socket writes and reads included)',
    owns: inFiles('/outbound/http1-agent.ts', '/outbound/attempt.ts'),
  },
  {
    name: 'event-type counts (the fan-out tally, its reports, the view on each ingress)',
    owns: inFiles('/core/webhooks/event-type-counts.ts'),
  },
  {
    name: 'delivery policy (which endpoints need a lane; the lane consumer)',
    owns: inFiles('/dispatcher/delivery-policy.ts', '/dispatcher/lanes.ts', '/dispatcher/lane-scheduler.ts'),
  },
  { name: 'Kafka client (kafkajs)', owns: inFiles('/kafkajs/') },
  { name: 'garbage collection', owns: (_url, fn) => fn === '(garbage collector)' },
];

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface FeatureShare {
  name: string;
  /** Share of the busy samples, 0..1. */
  share: number;
}

/** Busy samples after `skipMs` of each profile, and the share each feature's stacks hold. */
export function featureShares(files: string[], opts: { skipMs: number }): { busyMs: number; shares: FeatureShare[] } {
  const inclusive = new Map<string, number>(FEATURES.map((f) => [f.name, 0]));
  let busy = 0;
  for (const file of files) {
    const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
    const byId = new Map(p.nodes.map((n) => [n.id, n]));
    const parent = new Map<number, number>();
    for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
    // Which features a node's stack (the node and its ancestors) belongs to, memoised per node.
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
      if (t < opts.skipMs * 1000) return;
      const fn = byId.get(id)!.callFrame.functionName;
      if (fn === '(idle)') return;
      busy += p.timeDeltas[i];
      for (const name of ownersOf(id)) inclusive.set(name, inclusive.get(name)! + p.timeDeltas[i]);
    });
  }
  return {
    busyMs: busy / 1000,
    shares: FEATURES.map((f) => ({ name: f.name, share: busy ? inclusive.get(f.name)! / busy : 0 })),
  };
}
