/**
 * The window of a recovery (`POST /v1/webhooks/endpoints/{id}/recover`, docs/webhooks.md
 * "Recovering a window"): it may reach back as far as the DLQ keeps entries (7 days, divided by the
 * Sluice's SLUICE_TIME_SCALE) and no further. A window starting at 90% of the retention is taken
 * (202, a job that completes and reads back); at 110% it is refused, 400 naming `$.since`; an `until`
 * not after `since` is refused, 400 naming `$.until`. The job runs for a fresh endpoint with nothing
 * to re-send, so it ends at once.
 */
import type { Json } from '../contract.ts';
import { api, register, startTarget } from './webhook-target.ts';
import { result, type LimitCheck } from './types.ts';

const RETENTION_MS = 7 * 24 * 3600_000;

function answer(r: { status: number; body: Json }): string {
  const paths: string[] = Array.isArray(r.body?.errors) ? r.body.errors.map((e: Json) => e.path) : [];
  return r.status === 400 ? `400 ${paths.join(', ')}` : String(r.status);
}

export const recoveryWindow: LimitCheck = {
  limit: 'recovery window',
  spec: 'since within the DLQ retention (7 days) → 202; beyond → 400 $.since; until ≤ since → 400 $.until',
  async run(ctx) {
    const retention = RETENTION_MS / (ctx.timeScale ?? 1);
    const target = await startTarget((_req, res) => res.writeHead(200).end());
    let endpointId: string | null = null;
    try {
      const ep = await register(ctx, target.url, ['pipeline.started']);
      if ('fail' in ep) return result(this, 'fail', '-', ep.fail);
      endpointId = ep.id;
      const path = `/v1/webhooks/endpoints/${ep.id}/recover`;
      const iso = (ms: number) => new Date(ms).toISOString();
      const inside = await api(ctx, 'POST', path, { since: iso(Date.now() - 0.9 * retention) });
      let state = '-';
      if (inside.status === 202) {
        const deadline = Date.now() + 15_000;
        do {
          const read = await api(ctx, 'GET', `${path}/${inside.body.id}`);
          state = read.status === 200 ? read.body.state : `GET ${read.status}`;
          if (state !== 'running') break;
          await new Promise((r) => setTimeout(r, 100));
        } while (Date.now() < deadline);
      }
      const beyond = await api(ctx, 'POST', path, { since: iso(Date.now() - 1.1 * retention) });
      const now = Date.now();
      const reversed = await api(ctx, 'POST', path, { since: iso(now - 60_000), until: iso(now - 120_000) });
      const got = [`${answer(inside)} ${state}`, answer(beyond), answer(reversed)];
      const want = ['202 completed', '400 $.since', '400 $.until'];
      const measured = `90% of the retention → ${got[0]}; 110% → ${got[1]}; until before since → ${got[2]}`;
      const wrong = want.map((w, i) => (got[i] === w ? null : `${got[i]} should be ${w}`)).filter((w) => w !== null);
      return result(this, wrong.length ? 'fail' : 'pass', measured, wrong.join('; ') || undefined);
    } finally {
      if (endpointId) await api(ctx, 'DELETE', `/v1/webhooks/endpoints/${endpointId}`).catch(() => {});
      await target.close();
    }
  },
};
