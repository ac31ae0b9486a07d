/** Spec 5.5/8: credentials rotate every 30 days: `next_rotation_at - rotated_at` of the client's rotated secret. */
import { api } from './webhook-target.ts';
import { result, type LimitCheck } from './types.ts';

export const rotationCycle: LimitCheck = {
  limit: 'credential rotation cycle',
  spec: '30 days',
  async run(ctx) {
    const r = await api(ctx, 'GET', `/v1/auth/clients/${encodeURIComponent(ctx.clientId)}/secret`);
    if (r.status === 404 && !r.body?.code) return result(this, 'skip', '-', 'GET /v1/auth/clients/{id}/secret is not implemented');
    if (r.status === 404) return result(this, 'skip', '-', 'the client has not been rotated yet (the first rotation is 30 days after creation; the rotation tests drive it on an injected clock)');
    if (r.status === 403) return result(this, 'skip', '-', 'the client lacks credentials:read');
    if (r.status !== 200 || r.body.next_rotation_at === null) return result(this, 'fail', `answered ${r.status}`);
    const days = (Date.parse(r.body.next_rotation_at) - Date.parse(r.body.rotated_at)) / 86_400_000;
    return result(this, Math.abs(days - 30) < 0.01 ? 'pass' : 'fail', `${days.toFixed(2)} days`);
  },
};
