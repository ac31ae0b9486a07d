/** Spec 6.1/8: the ping must be answered 200 within 5 s: a target answering after 4 s is ACTIVE, after 6 s PENDING. */
import { register, startTarget } from './webhook-target.ts';
import { result, type LimitCheck } from './types.ts';

async function stateWithPingDelay(ctx: Parameters<LimitCheck['run']>[0], delayMs: number) {
  const target = await startTarget(
    (_, res) => res.writeHead(200).end(),
    (res) => setTimeout(() => res.writeHead(200).end(), delayMs),
  );
  try {
    return await register(ctx, target.url);
  } finally {
    await target.close();
  }
}

export const verificationAck: LimitCheck = {
  limit: 'verification acknowledgement',
  spec: '5 s',
  async run(ctx) {
    const [inTime, late] = await Promise.all([stateWithPingDelay(ctx, 4000), stateWithPingDelay(ctx, 6000)]);
    if ('fail' in inTime) return result(this, 'fail', '-', inTime.fail);
    if ('fail' in late) return result(this, 'fail', '-', late.fail);
    const decidedAfter = (late.ms / 1000).toFixed(2);
    const measured = `4 s ping → ${inTime.state}; 6 s ping → ${late.state} (decided after ${decidedAfter} s)`;
    const ok = inTime.state === 'ACTIVE' && late.state === 'PENDING' && late.ms >= 4900 && late.ms < 6000;
    return result(this, ok ? 'pass' : 'fail', measured);
  },
};
