/** The suite's targets (issue 13), judged on one run's figures; `npm run bench -- --check` exits 1 on a miss. */
import { loadConfig } from '../../core/config.ts';
import type { CaseResult } from './k6.ts';

export interface Verdict {
  name: string;
  measured: string;
  met: boolean;
  /** How far off, when missed. */
  by: string;
}

interface RevocationFigures {
  fetchWaitMs: number;
  othersFromSent: { p99: number };
  idleCpuPct: number[];
}

/** The fetch wait Sluice ships with (SLUICE_STATE_FETCH_WAIT_MS's default): the one the targets hold it to. */
export const DEFAULT_FETCH_WAIT_MS = loadConfig({}).stateFetchWaitMs;

export function judge(
  cases: CaseResult[],
  revocations: RevocationFigures[],
  durationOf: (c: CaseResult) => number,
): Verdict[] {
  const out: Verdict[] = [];
  const rps = (id: string) => cases.find((c) => c.id === id)?.rps;
  const atLeast = (name: string, value: number | undefined, min: number, unit: string, digits = 2) => {
    if (value === undefined || !Number.isFinite(value)) return;
    const fmt = (x: number) => x.toLocaleString('en-US', { maximumFractionDigits: digits });
    out.push({
      name,
      measured: `${fmt(value)}${unit}`,
      met: value >= min,
      by: `by ${fmt(min - value)}${unit} (${((value / min) * 100).toFixed(0)} % of the target)`,
    });
  };
  const below = (name: string, value: number | undefined, max: number, unit: string) => {
    if (value === undefined || !Number.isFinite(value)) return;
    out.push({
      name,
      measured: `${value.toFixed(2)}${unit}`,
      met: value < max,
      by: `by ${(value - max).toFixed(2)}${unit} (${(value / max).toFixed(1)}× the limit)`,
    });
  };
  // What the route costs the server, per request (issue 33): req/s ratios measured k6 as much as Sluice.
  const cpu = (id: string) => cases.find((c) => c.id === id)?.cpuMsPerRequest ?? undefined;
  const hotCpu = cpu('hot');
  const per = (other: string) => (hotCpu !== undefined && cpu(other) ? hotCpu / cpu(other)! : undefined);
  below('edge, hot token ≤ 1.5× the CPU per request of bare uWS', per('bare'), 1.5001, '×');
  below(
    'edge, hot token below the CPU per request of the conventional stack with a token cache',
    per('convCache'),
    1,
    '×',
  );
  below(
    'edge, hot token below the CPU per request of the conventional stack verifying per request',
    per('conv'),
    1,
    '×',
  );
  const halfSat = cases.find((c) => c.id === 'halfSat');
  below('edge, p99 < 5 ms at half of saturation', halfSat?.p99, 5, ' ms');
  // The p99 means something only if the rate was held: requests k6 never sent are time the server fell behind.
  if (halfSat)
    below(
      'edge, half of saturation held (requests not sent, % of sent)',
      (halfSat.notSent / Math.max(1, halfSat.rps * durationOf(halfSat))) * 100,
      1,
      ' %',
    );
  atLeast('token issuance ≥ 12,000/s', rps('issue'), 12_000, '/s', 0);
  const shipped = revocations.find((r) => r.fetchWaitMs === DEFAULT_FETCH_WAIT_MS);
  if (shipped) {
    // p99 ≤ 50 ms: "below 50.001".
    below(
      `revocation p99 ≤ 50 ms to every other node (fetch wait ${shipped.fetchWaitMs} ms)`,
      shipped.othersFromSent.p99,
      50.001,
      ' ms',
    );
    below(
      `idle node < 1 % of a core (fetch wait ${shipped.fetchWaitMs} ms, the busiest node)`,
      Math.max(...shipped.idleCpuPct),
      1,
      ' %',
    );
  }
  return out;
}
