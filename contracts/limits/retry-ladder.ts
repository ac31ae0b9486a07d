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

export async function measureLadder(ctx: LimitContext): Promise<LadderMeasurement | { skip: string }> {
  const scale = ctx.timeScale;
  if (!scale || scale < 100) return { skip: 'needs a Sluice running with SLUICE_TIME_SCALE >= 100 (pass --time-scale)' };
  const received = new Map<string, number>();
  const target = await startTarget((req, res) => {
    const id = String(req.headers['x-service-event-id']);
    received.set(id, (received.get(id) ?? 0) + 1);
    res.writeHead(500).end();
  });
  try {
    // Its own event kind, so events other guards publish for the tenant do not reach this target.
    const ep = await register(ctx, target.url, ['pipeline.failed']);
    if ('skip' in ep) return ep;
    const published = await api(ctx, 'POST', '/v1/webhooks/events', { type: 'pipeline.failed', data: { guard: 'retry-ladder' } });
    if (published.status !== 202) return { skip: `publishing answered ${published.status}` };
    const deadline = Date.now() + (80 * H) / scale + 60_000;
    while (Date.now() < deadline) {
      const page = await api(ctx, 'GET', `/v1/webhooks/dlq?endpoint_id=${encodeURIComponent(ep.id)}`);
      if (page.status === 404 && !page.body?.code) return { skip: 'GET /v1/webhooks/dlq is not implemented' };
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
    return { skip: 'no DLQ entry appeared in time (is a dispatcher running with the same SLUICE_TIME_SCALE?)' };
  } finally {
    await target.close();
  }
}

export function ladderResults(m: LadderMeasurement | { skip: string }): LimitResult[] {
  const rows = [
    { limit: 'consecutive failures before DLQ', spec: '17' },
    { limit: 'retry span', spec: '72 h (attempt 17 in [60 h, 72 h])' },
    { limit: 'DLQ retention', spec: '7 days' },
  ];
  if ('skip' in m) return rows.map((r) => result(r, 'skip', '-', m.skip));
  const spanH = m.spanMs / H;
  const days = m.retentionMs / (24 * H);
  return [
    result(rows[0], m.attempts === 17 && m.received === 17 ? 'pass' : 'fail', `${m.attempts} attempts in the entry, ${m.received} received`),
    result(rows[1], spanH >= 60 && spanH <= 72 ? 'pass' : 'fail', `${spanH.toFixed(2)} h (scaled)`),
    // Rounding of scaled timestamps to whole milliseconds allows a minute either way.
    result(rows[2], Math.abs(days - 7) < 0.001 ? 'pass' : 'fail', `${days.toFixed(4)} days (scaled)`),
  ];
}
