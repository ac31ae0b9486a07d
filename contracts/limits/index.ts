/**
 * Runs every limit guard against a live Sluice and prints measured next to spec.
 *
 *   const rows = await runLimits({ baseUrl, clientId, clientSecret, timeScale: 4320 });
 *   console.log(formatLimits(rows));
 */
import { tokenLifetime } from './token-lifetime.ts';
import { rotationCycle } from './rotation-cycle.ts';
import { revocationPropagation } from './revocation-propagation.ts';
import { verificationAck } from './verification-ack.ts';
import { deliveryTimeout } from './delivery-timeout.ts';
import { replayWindow } from './replay-window.ts';
import { ladderResults, measureLadder } from './retry-ladder.ts';
import { endpointRateLimit } from './endpoint-rate-limit.ts';
import { endpointMaxInFlight } from './endpoint-in-flight.ts';
import { endpointLimitBounds, orderingKeySize } from './request-bounds.ts';
import { filterBounds } from './filter-bounds.ts';
import { recoveryWindow } from './recovery-window.ts';
import { result, type LimitCheck, type LimitContext, type LimitResult } from './types.ts';

export type { LimitContext, LimitResult } from './types.ts';

export const CHECKS: LimitCheck[] = [
  tokenLifetime,
  rotationCycle,
  revocationPropagation,
  verificationAck,
  deliveryTimeout,
  replayWindow,
  endpointRateLimit,
  endpointMaxInFlight,
  orderingKeySize,
  endpointLimitBounds,
  filterBounds,
  recoveryWindow,
];

export async function runLimits(ctx: LimitContext): Promise<LimitResult[]> {
  const asked = (limit: string) => !ctx.skip?.includes(limit);
  const skipped = (c: Pick<LimitCheck, 'limit' | 'spec'>) => result(c, 'skip', '-', 'skipped on request');
  const ladderRows = ladderResults({ skip: '' });
  // The slow guards wait on timers, not on the CPU: run them side by side.
  const [single, ladder] = await Promise.all([
    Promise.all(
      CHECKS.map((c) =>
        asked(c.limit)
          ? c.run(ctx).catch((err: Error) => result(c, 'fail', '-', `the guard threw: ${err.message}`))
          : Promise.resolve(skipped(c)),
      ),
    ),
    ladderRows.some((r) => asked(r.limit))
      ? measureLadder(ctx).catch((err: Error) => ({ fail: `the guard threw: ${err.message}` }))
      : Promise.resolve({ skip: 'skipped on request' }),
  ]);
  return [...single, ...ladderResults(ladder).map((r) => (asked(r.limit) ? r : skipped(r)))];
}

/** Every limit name a guard reports, e.g. for LimitContext.skip. */
export const LIMIT_NAMES: string[] = [
  ...CHECKS.map((c) => c.limit),
  ...ladderResults({ skip: '' }).map((r) => r.limit),
];

export function formatLimits(rows: LimitResult[]): string {
  const w = Math.max(...rows.map((r) => r.limit.length));
  const s = Math.max(...rows.map((r) => r.spec.length));
  const lines = rows.map(
    (r) =>
      `${r.outcome.toUpperCase().padEnd(4)}  ${r.limit.padEnd(w)}  spec ${r.spec.padEnd(s)}  ` +
      `measured ${r.measured}${r.reason ? `  (${r.reason})` : ''}`,
  );
  const n = (o: LimitResult['outcome']) => rows.filter((r) => r.outcome === o).length;
  return [...lines, `${n('pass')} passed, ${n('fail')} failed, ${n('skip')} skipped`].join('\n');
}
