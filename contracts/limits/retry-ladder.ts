/**
 * Spec 6.4/8: 17 consecutive failures before the DLQ, spread over at most 72 h, then 7 days in
 * the DLQ. Runs against a Sluice started with SLUICE_TIME_SCALE (delays and retention divided by
 * it); measured values are scaled back to real time.
 */
import { api, register, startTarget } from './webhook-target.ts';
import { result, type LimitContext, type LimitResult } from './types.ts';

const H = 3600_000;

export interface LadderMeasurement {
  attempts: number;
  received: number;
  spanMs: number;
  retentionMs: number;
}

/** Why the ladder could not be measured: `skip` when the caller did not ask for it (no time scale), else `fail`. */
export type LadderProblem = { skip: string } | { fail: string };

export async function measureLadder(ctx: LimitContext): Promise<LadderMeasurement | LadderProblem> {
  const scale = ctx.timeScale;
  // Without a time scale the caller did not ask for the ladder (72 h in real time); a scale too
  // small to measure it in a run is a wrong input, and fails.
  if (!scale)
    return {
      skip: 'not asked: needs a Sluice running with SLUICE_TIME_SCALE >= 100 and that scale passed (--time-scale)',
    };
  if (scale < 100) return { fail: `time scale ${scale} is too small to run the 72 h ladder (needs >= 100)` };
  const received = new Map<string, number>();
  const target = await startTarget((req, res) => {
    const id = String(req.headers['x-service-event-id']);
    received.set(id, (received.get(id) ?? 0) + 1);
    res.writeHead(500).end();
  });
  try {
    // Its own event kind, so events other guards publish for the tenant do not reach this target.
    const ep = await register(ctx, target.url, ['pipeline.failed']);
    if ('fail' in ep) return ep;
    if (ep.state !== 'ACTIVE') return { fail: `the target answered its ping but the endpoint is ${ep.state}` };
    const published = await api(ctx, 'POST', '/v1/webhooks/events', {
      type: 'pipeline.failed',
      data: { guard: 'retry-ladder' },
    });
    if (published.status !== 202) return { fail: `publishing answered ${published.status}` };
    const started = Date.now();
    const deadline = started + (80 * H) / scale + 60_000;
    while (Date.now() < deadline) {
      const page = await api(ctx, 'GET', `/v1/webhooks/dlq?endpoint_id=${encodeURIComponent(ep.id)}`);
      if (page.status !== 200) return { fail: `GET /v1/webhooks/dlq answered ${page.status}` };
      const entry = page.body?.data?.[0];
      if (entry) {
        await api(ctx, 'DELETE', `/v1/webhooks/endpoints/${ep.id}`);
        return {
          attempts: entry.attempts,
          received: received.get(published.body.id) ?? 0,
          spanMs: (Date.parse(entry.last_attempt_at) - Date.parse(entry.first_attempt_at)) * scale,
          retentionMs: (Date.parse(entry.expires_at) - Date.parse(entry.dead_lettered_at)) * scale,
        };
      }
      await new Promise((r) => setTimeout(r, 500));
    }
    return {
      fail:
        `no DLQ entry appeared within ${Math.round((deadline - started) / 1000)} s ` +
        `(${received.get(published.body.id) ?? 0} attempts received; ` +
        'is a dispatcher running with the same SLUICE_TIME_SCALE?)',
    };
  } finally {
    await target.close();
  }
}

export function ladderResults(m: LadderMeasurement | LadderProblem): LimitResult[] {
  const rows = [
    { limit: 'consecutive failures before DLQ', spec: '17' },
    { limit: 'retry span', spec: '72 h (attempt 17 in [60 h, 72 h])' },
    { limit: 'DLQ retention', spec: '7 days' },
  ];
  if ('skip' in m) return rows.map((r) => result(r, 'skip', '-', m.skip));
  if ('fail' in m) return rows.map((r) => result(r, 'fail', '-', m.fail));
  const spanH = m.spanMs / H;
  const days = m.retentionMs / (24 * H);
  return [
    result(
      rows[0],
      m.attempts === 17 && m.received === 17 ? 'pass' : 'fail',
      `${m.attempts} attempts in the entry, ${m.received} received`,
    ),
    result(rows[1], spanH >= 60 && spanH <= 72 ? 'pass' : 'fail', `${spanH.toFixed(2)} h (scaled)`),
    // Rounding of scaled timestamps to whole milliseconds allows a minute either way.
    result(rows[2], Math.abs(days - 7) < 0.001 ? 'pass' : 'fail', `${days.toFixed(4)} days (scaled)`),
  ];
}
