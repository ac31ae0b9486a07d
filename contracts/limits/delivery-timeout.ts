/**
 * Spec 6.4/8: a delivery fails after 10 s without a response:
 * how long the dispatcher holds a silent target's connection.
 */
import { api, register, startTarget } from './webhook-target.ts';
import { judgesDurations, result, type LimitCheck } from './types.ts';

export const deliveryTimeout: LimitCheck = {
  limit: 'delivery TCP timeout',
  spec: '10 s',
  async run(ctx) {
    let resolveHeld: (ms: number) => void = () => {};
    const held = new Promise<number>((r) => (resolveHeld = r));
    let arrived = false;
    const target = await startTarget((req) => {
      arrived = true;
      const started = performance.now();
      // Never answer: measure when the dispatcher gives up on the connection.
      req.socket.once('close', () => resolveHeld(performance.now() - started));
    });
    let endpointId: string | null = null;
    try {
      const ep = await register(ctx, target.url);
      if ('fail' in ep) return result(this, 'fail', '-', ep.fail);
      endpointId = ep.id;
      if (ep.state !== 'ACTIVE')
        return result(this, 'fail', '-', `the target answered its ping but the endpoint is ${ep.state}`);
      const published = await api(ctx, 'POST', '/v1/webhooks/events', {
        type: 'inference.completed',
        data: { guard: 'delivery-timeout' },
      });
      if (published.status !== 202) return result(this, 'fail', '-', `publishing answered ${published.status}`);
      const ms = await Promise.race([held, new Promise<number>((r) => setTimeout(() => r(-1), 30_000))]);
      if (ms < 0)
        return result(
          this,
          'fail',
          '-',
          arrived
            ? 'the dispatcher still held the connection 30 s after the delivery arrived'
            : 'no delivery arrived within 30 s (is a dispatcher running?)',
        );
      // Durations unjudged, only the lower bound holds (a busy machine is slow, never early): the
      // dispatcher let go of the silent target's connection itself, and not before the limit.
      const inTime = ms >= 9_500 && (ms <= 11_000 || !judgesDurations(ctx));
      return result(this, inTime ? 'pass' : 'fail', `connection dropped after ${(ms / 1000).toFixed(2)} s`);
    } finally {
      if (endpointId) await api(ctx, 'DELETE', `/v1/webhooks/endpoints/${endpointId}`).catch(() => {});
      await target.close();
    }
  },
};
