/** Spec 6.2/8: payloads older than 300 s are rejected: the package's verifyWebhook accepts 299 s and refuses 301 s. */
import { createHmac } from 'node:crypto';
import { verifyWebhook } from '../../core/webhook-verify.ts';
import { result, type LimitCheck } from './types.ts';

function signed(secret: string, timestamp: number) {
  const raw = JSON.stringify({ id: 'evt_limit', type: 'ping', tenant_id: 't', created_at: new Date(timestamp * 1000).toISOString(), timestamp, data: {} });
  const headers = {
    'x-service-signature-256': `sha256=${createHmac('sha256', Buffer.from(secret, 'utf8')).update(raw).digest('hex')}`,
    'x-service-timestamp': String(timestamp),
    'x-service-event-id': 'evt_limit',
    'x-service-event-type': 'ping',
    'x-service-delivery-attempt': '1',
  };
  return { raw, headers };
}

export const replayWindow: LimitCheck = {
  limit: 'replay window',
  spec: '300 s',
  async run() {
    const secret = 'limits-guard-secret';
    const now = Date.now();
    const accepts = (age: number) => {
      const s = signed(secret, Math.floor(now / 1000) - age);
      try {
        verifyWebhook(s.raw, s.headers, secret, { now });
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
