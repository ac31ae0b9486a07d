/**
 * Spec 5.5/8: credentials rotate every 30 days, triggered by the service.
 *
 * With `ctx.rotation` the guard watches real rotations of a Sluice that rotates in scaled time
 * (SLUICE_SECRET_ROTATION_DAYS = SLUICE_KEY_ROTATION_DAYS = 30 / scale), through the public API
 * only, and reports the periods multiplied back by the scale:
 *  - the client's secret: `GET /v1/auth/clients/{id}/secret` until two rotations were seen; the
 *    period is the second `rotated_at` minus the first, next to the scheduled one
 *    (`next_rotation_at - rotated_at`). A token of a rotated-out secret reads no secret (401), so
 *    after the first rotation the rotations are the ones the `credential.rotated` events announce;
 *  - the signing keys: `GET /v1/auth/jwks` until two new keys appeared; the period is the time
 *    between their appearances;
 *  - the `credential.rotated` webhook event of each observed secret rotation, at a local target
 *    (when the Sluice accepts one), carrying the same `rotated_at` and `next_rotation_at`.
 *
 * Tolerance. The scheduled period is exact: it must equal 30 days / scale to the millisecond the
 * timestamps carry. The leader rotates on its first check at or after the due time, so an observed
 * secret period is the scheduled one plus that lateness: never shorter, and longer by at most one
 * check interval plus the step itself (an audit append and a record written and read back: 1 s
 * covers a loaded 2-core machine). A new signing key is written on the first check after its
 * predecessor enters the lead time, and the predecessors' windows are chained exactly, so two
 * appearances are one period apart give or take that same lateness plus the time between two
 * JWKS polls. Anything outside means the scheduler does not keep the cycle.
 *
 * Without `ctx.rotation` it reads the client's current rotation state (skipped before the first
 * rotation, which a Sluice on real time does 30 days after the client was created).
 */
import type { Json } from '../contract.ts';
import { api, register, startTarget } from './webhook-target.ts';
import { issueToken, result, type LimitCheck, type LimitContext, type LimitResult } from './types.ts';

const DAY_MS = 86_400_000;
const POLL_MS = 100;
const STEP_MS = 1000;

interface Rotation {
  rotated_at: string;
  next_rotation_at: string;
}

export const rotationCycle: LimitCheck = {
  limit: 'credential rotation cycle',
  spec: '30 days',
  async run(ctx) {
    return ctx.rotation ? watch(this, ctx, ctx.rotation) : current(this, ctx);
  },
};

async function current(check: LimitCheck, ctx: LimitContext): Promise<LimitResult> {
  const r = await api(ctx, 'GET', `/v1/auth/clients/${encodeURIComponent(ctx.clientId)}/secret`);
  if (r.status === 404 && !r.body?.code)
    return result(
      check,
      'fail',
      '-',
      'GET /v1/auth/clients/{id}/secret answered 404 without a problem body (not implemented?)',
    );
  // Nothing to measure on a Sluice in real time before the first rotation: the caller did not ask
  // for a scaled rotation, so this is the one case left as a skip.
  if (r.status === 404)
    return result(
      check,
      'skip',
      '-',
      'not asked: the client has not been rotated yet (the first rotation is 30 days after creation; ' +
        'run the guard with a rotation scale against a Sluice rotating in scaled time)',
    );
  if (r.status === 403) return result(check, 'fail', '-', 'the client lacks credentials:read');
  if (r.status !== 200 || r.body.next_rotation_at === null) return result(check, 'fail', `answered ${r.status}`);
  const days = (Date.parse(r.body.next_rotation_at) - Date.parse(r.body.rotated_at)) / DAY_MS;
  return result(check, Math.abs(days - 30) < 0.01 ? 'pass' : 'fail', `${days.toFixed(2)} days (scheduled)`);
}

async function watch(
  check: LimitCheck,
  ctx: LimitContext,
  { scale, checkMs }: { scale: number; checkMs: number },
): Promise<LimitResult> {
  const periodMs = (30 * DAY_MS) / scale;
  const budgetMs = checkMs + STEP_MS;
  const days = (ms: number) => ((ms * scale) / DAY_MS).toFixed(2);
  const issued = await issueToken(ctx.baseUrl, ctx.clientId, ctx.clientSecret);
  if (issued.status !== 200) return result(check, 'fail', `token endpoint answered ${issued.status}`);
  const auth = { authorization: `Bearer ${issued.body.access_token}` };
  const announced: Rotation[] = [];
  const target = await startTarget((_req, res, raw) => {
    try {
      const body = JSON.parse(raw.toString('utf8'));
      if (body.type === 'credential.rotated' && body.data?.client_id === ctx.clientId) announced.push(body.data);
    } catch {
      /* not an event */
    }
    res.writeHead(200).end();
  });
  try {
    const ep = await register(ctx, target.url, ['credential.rotated']);
    const secrets: Rotation[] = [];
    const keysAppeared: number[] = [];
    let knownKids: Set<string> | null = null;
    let lastPoll = 0;
    let widestPollGap = 0;
    const deadline = Date.now() + 3 * periodMs + 10_000;
    while ((secrets.length < 2 || keysAppeared.length < 2) && Date.now() < deadline) {
      const [jwks, secret] = await Promise.all([
        fetch(`${ctx.baseUrl}/v1/auth/jwks`).then(async (r) => ({
          status: r.status,
          body: (await r.json().catch(() => null)) as Json,
        })),
        fetch(`${ctx.baseUrl}/v1/auth/clients/${encodeURIComponent(ctx.clientId)}/secret`, { headers: auth }).then(
          async (r) => ({ status: r.status, body: (await r.json().catch(() => null)) as Json }),
        ),
      ]);
      const at = performance.now();
      if (lastPoll) widestPollGap = Math.max(widestPollGap, at - lastPoll);
      lastPoll = at;
      if (secret.status === 404 && !secret.body?.code)
        return result(
          check,
          'fail',
          '-',
          'GET /v1/auth/clients/{id}/secret answered 404 without a problem body (not implemented?)',
        );
      if (secret.status === 403) return result(check, 'fail', '-', 'the client lacks credentials:read');
      const seen = (r: Rotation) => secrets.some((s) => s.rotated_at === r.rotated_at);
      if (secret.status === 200 && !seen(secret.body as Rotation))
        secrets.push({ rotated_at: secret.body.rotated_at, next_rotation_at: secret.body.next_rotation_at });
      else if (![200, 401, 404, 429, 503].includes(secret.status))
        return result(check, 'fail', `GET /v1/auth/clients/{id}/secret answered ${secret.status}`);
      // Once rotated, this token's secret is no longer current (401): the events say when it rotates.
      for (const a of announced)
        if (!seen(a)) secrets.push({ rotated_at: a.rotated_at, next_rotation_at: a.next_rotation_at });
      secrets.sort((x, y) => Date.parse(x.rotated_at) - Date.parse(y.rotated_at));
      if (jwks.status === 200 && Array.isArray(jwks.body?.keys)) {
        const kids: string[] = jwks.body.keys.map((k: { kid: string }) => k.kid);
        if (knownKids && kids.some((k) => !knownKids!.has(k))) keysAppeared.push(at);
        knownKids = new Set([...(knownKids ?? []), ...kids]);
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
    const waited = `${((3 * periodMs + 10_000) / 1000).toFixed(0)} s`;
    if (secrets.length === 0 && keysAppeared.length === 0)
      return result(
        check,
        'fail',
        '-',
        `nothing rotated within ${waited}: start the Sluice with SLUICE_SECRET_ROTATION_DAYS and ` +
          `SLUICE_KEY_ROTATION_DAYS = ${30 / scale} and a SLUICE_ROTATION_CHECK_MS of ${checkMs}`,
      );
    if (secrets.length < 2 || keysAppeared.length < 2)
      return result(
        check,
        'fail',
        `within ${waited}: ${secrets.length} secret rotation(s), ` +
          `${keysAppeared.length} new signing key(s); 2 of each expected`,
      );
    const [s1, s2] = secrets;
    const scheduled = secrets.map((s) => Date.parse(s.next_rotation_at) - Date.parse(s.rotated_at));
    const observed = Date.parse(s2.rotated_at) - Date.parse(s1.rotated_at);
    const late = Date.parse(s2.rotated_at) - Date.parse(s1.next_rotation_at);
    const keyPeriod = keysAppeared[1] - keysAppeared[0];
    // The events of both rotations, when a local target could be registered to receive them.
    const isAnnounced = (s: Rotation) =>
      announced.some((a) => a.rotated_at === s.rotated_at && a.next_rotation_at === s.next_rotation_at);
    let events = 'events not watched (no local target)';
    let eventsOk = true;
    if (!('fail' in ep)) {
      const until = Date.now() + 10_000;
      while (!(isAnnounced(s1) && isAnnounced(s2)) && Date.now() < until)
        await new Promise((r) => setTimeout(r, POLL_MS));
      const n = [s1, s2].filter(isAnnounced).length;
      events = `${n}/2 announced by credential.rotated`;
      eventsOk = n === 2;
      await api(ctx, 'DELETE', `/v1/webhooks/endpoints/${ep.id}`);
    }
    const failures: string[] = [];
    if (scheduled.some((ms) => Math.abs(ms - periodMs) > 1))
      failures.push(`scheduled ${scheduled.map(days).join(', ')} days`);
    if (late < 0 || late > budgetMs)
      failures.push(`second secret rotation ${late} ms after it was due (allowed 0 to ${budgetMs} ms real)`);
    if (Math.abs(keyPeriod - periodMs) > budgetMs + widestPollGap)
      failures.push(
        `signing keys ${(keyPeriod / 1000).toFixed(2)} s apart ` +
          `(allowed ${(periodMs / 1000).toFixed(2)} ± ${((budgetMs + widestPollGap) / 1000).toFixed(2)} s real)`,
      );
    if (!eventsOk) failures.push('a secret rotation was not announced');
    const measured =
      `secret every ${days(observed)} days (scheduled ${days(scheduled[0])}), ` +
      `signing key every ${days(keyPeriod)} days, ${events}; at scale ${scale}`;
    return result(
      check,
      failures.length === 0 ? 'pass' : 'fail',
      measured,
      failures.length ? failures.join('; ') : undefined,
    );
  } finally {
    await target.close();
  }
}
