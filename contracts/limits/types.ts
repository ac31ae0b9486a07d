/**
 * One guard per limit Sluice promises (token lifetime, revocation propagation, ping acknowledgement,
 * delivery timeout, replay window, retry ladder, DLQ retention, rotation): measured against a live
 * Sluice, reported next to the promised value.
 *
 * Outcomes: `pass`; `fail` whenever the guard was asked to measure and could not show the limit
 * holds, including when it could not measure at all (a refused registration, a route answering
 * 404, a delivery that never came, a DLQ entry that never appeared); `skip` only when the caller
 * did not ask for the guard: it is named in `skip`, or the caller left out the input it needs
 * (`timeScale` for the ladder, `revocable` for the revocation guard; without `rotation`, the
 * rotation guard before the client's first rotation). A skip is never a pass.
 */
import type { Json } from '../contract.ts';

export interface LimitContext {
  baseUrl: string;
  clientId: string;
  clientSecret: string;
  /** A client of the same tenant that the revocation guard may revoke. */
  revocable?: { clientId: string; clientSecret: string };
  /** The SLUICE_TIME_SCALE the Sluice under test runs with; the ladder guards need one (e.g. 4320). */
  timeScale?: number;
  /**
   * The rotation guard watches real rotations when the Sluice under test rotates in scaled time:
   * SLUICE_SECRET_ROTATION_DAYS and SLUICE_KEY_ROTATION_DAYS set to 30 / `scale`, and
   * SLUICE_ROTATION_CHECK_MS to `checkMs` (the scheduler's tick, which bounds how late a rotation may be).
   */
  rotation?: { scale: number; checkMs: number };
  /** Limits (by their `limit` name) the caller explicitly does not want measured: reported as skip. */
  skip?: string[];
  /**
   * false: a guard whose limit is a wall-clock duration on this machine (revocation propagation,
   * the ping decision, the delivery timeout) judges only what Sluice decided (states, order) and
   * reports the duration unjudged: for the unit tests, where a busy machine is not a broken
   * product. Default true: `sluice contract verify --limits` judges the numbers.
   */
  judgeDurations?: boolean;
}

/** Whether `ctx` asks for wall-clock durations to be judged against the spec's numbers. */
export const judgesDurations = (ctx: LimitContext): boolean => ctx.judgeDurations !== false;

export interface LimitResult {
  limit: string;
  spec: string;
  measured: string;
  outcome: 'pass' | 'fail' | 'skip';
  reason?: string;
}

export interface LimitCheck {
  limit: string;
  spec: string;
  run(ctx: LimitContext): Promise<LimitResult>;
}

export function result(
  check: Pick<LimitCheck, 'limit' | 'spec'>,
  outcome: LimitResult['outcome'],
  measured: string,
  reason?: string,
): LimitResult {
  return { limit: check.limit, spec: check.spec, measured, outcome, reason };
}

export async function issueToken(
  baseUrl: string,
  clientId: string,
  clientSecret: string,
): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${baseUrl}/v1/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret }),
    signal: AbortSignal.timeout(30_000),
  });
  return { status: res.status, body: await res.json().catch(() => null) };
}
