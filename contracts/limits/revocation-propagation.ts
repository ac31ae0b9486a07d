/** Spec 5.6/8: a revocation reaches the edge within 250 ms: time from the 201 until the node refuses the token. */
import { issueToken, judgesDurations, result, type LimitCheck } from './types.ts';

export const revocationPropagation: LimitCheck = {
  limit: 'revocation propagation',
  spec: '250 ms',
  async run(ctx) {
    // Without a client it may revoke, the caller did not ask for this guard.
    if (!ctx.revocable) return result(this, 'skip', '-', 'not asked: needs a revocable client (--revocable-client-id)');
    const victim = await issueToken(ctx.baseUrl, ctx.revocable.clientId, ctx.revocable.clientSecret);
    if (victim.status !== 200)
      return result(this, 'fail', '-', `the revocable client cannot get a token (${victim.status})`);
    const admin = await issueToken(ctx.baseUrl, ctx.clientId, ctx.clientSecret);
    if (admin.status !== 200)
      return result(this, 'fail', '-', `the guard's client cannot get a token (${admin.status})`);
    // The token works before the revocation: a refusal afterwards must come from the revocation.
    const before = await fetch(`${ctx.baseUrl}/v1/webhooks/dlq`, {
      headers: { authorization: `Bearer ${victim.body.access_token}` },
    });
    await before.arrayBuffer();
    if (before.status === 401) return result(this, 'fail', '-', 'the token is refused (401) before any revocation');
    const res = await fetch(`${ctx.baseUrl}/v1/auth/revocations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${admin.body.access_token}` },
      body: JSON.stringify({ client_id: ctx.revocable.clientId, reason: 'limits guard: revocation propagation' }),
    });
    await res.arrayBuffer();
    if (res.status !== 201) return result(this, 'fail', '-', `POST /v1/auth/revocations answered ${res.status}`);
    const revokedAt = performance.now();
    for (let accepted = 0; ; accepted++) {
      const probe = await fetch(`${ctx.baseUrl}/v1/webhooks/dlq`, {
        headers: { authorization: `Bearer ${victim.body.access_token}` },
      });
      await probe.arrayBuffer();
      const ms = performance.now() - revokedAt;
      if (probe.status === 401) {
        const measured = `${ms.toFixed(1)} ms on this node (${accepted} requests accepted after the 201)`;
        // Durations unjudged (a busy machine), the order still is: the node that answered 201 has
        // the revocation in its own view first, so the first request after the 201 is refused.
        const ok = judgesDurations(ctx) ? ms <= 250 : accepted === 0;
        return result(this, ok ? 'pass' : 'fail', measured);
      }
      if (ms > 5000)
        return result(this, 'fail', `still accepted after ${ms.toFixed(0)} ms (last answer ${probe.status})`);
    }
  },
};
