/** Spec 6.2/8: payloads older than 300 s are rejected: the package's verifyWebhook accepts 299 s and refuses 301 s. */
import { verifyWebhook } from '../../core/webhook-verify.ts';
import { signDelivery } from '../../core/webhooks/signing.ts';
import { result, type LimitCheck } from './types.ts';

export const replayWindow: LimitCheck = {
  limit: 'replay window',
  spec: '300 s',
  async run() {
    const secret = 'limits-guard-secret';
    const now = Date.now();
    const accepts = (age: number) => {
      const signedAt = (Math.floor(now / 1000) - age) * 1000;
      const s = signDelivery(secret, { id: 'evt_limit', type: 'ping', tenant_id: 't', created_at: signedAt, data: {} }, 1, signedAt);
      try {
        verifyWebhook(s.rawBody, s.headers, secret, { now });
        return true;
      } catch {
        return false;
      }
    };
    // The largest accepted age, searched over whole seconds.
    let widest = 0;
    for (let age = 0; age <= 400; age++) if (accepts(age)) widest = age;
    return result(this, widest === 300 ? 'pass' : 'fail', `oldest accepted payload ${widest} s`);
  },
};
