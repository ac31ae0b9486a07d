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
import type { LimitCheck, LimitContext, LimitResult } from './types.ts';

export type { LimitContext, LimitResult } from './types.ts';

export const CHECKS: LimitCheck[] = [tokenLifetime, rotationCycle, revocationPropagation, verificationAck, deliveryTimeout, replayWindow];

export async function runLimits(ctx: LimitContext): Promise<LimitResult[]> {
  // The slow guards wait on timers, not on the CPU: run them side by side.
  const [single, ladder] = await Promise.all([Promise.all(CHECKS.map((c) => c.run(ctx).catch((err: Error) => ({ limit: c.limit, spec: c.spec, measured: '-', outcome: 'fail' as const, reason: err.message })))), measureLadder(ctx)]);
  return [...single, ...ladderResults(ladder)];
}

export function formatLimits(rows: LimitResult[]): string {
  const w = Math.max(...rows.map((r) => r.limit.length));
  const s = Math.max(...rows.map((r) => r.spec.length));
  const lines = rows.map((r) => `${r.outcome.toUpperCase().padEnd(4)}  ${r.limit.padEnd(w)}  spec ${r.spec.padEnd(s)}  measured ${r.measured}${r.reason ? `  (${r.reason})` : ''}`);
  const n = (o: LimitResult['outcome']) => rows.filter((r) => r.outcome === o).length;
  return [...lines, `${n('pass')} passed, ${n('fail')} failed, ${n('skip')} skipped`].join('\n');
}
