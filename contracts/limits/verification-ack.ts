/** Spec 6.1/8: the ping must be answered 200 within 5 s: a target answering after 4 s is ACTIVE, after 6 s PENDING. */
import { register, startTarget } from './webhook-target.ts';
import { judgesDurations, result, type LimitCheck } from './types.ts';

/** The registration's answer, and whether it came before the target had answered its ping. */
async function stateWithPingDelay(ctx: Parameters<LimitCheck['run']>[0], delayMs: number) {
  let pingAnswered = false;
  const target = await startTarget(
    (_, res) => res.writeHead(200).end(),
    (res) =>
      setTimeout(() => {
        pingAnswered = true;
        res.writeHead(200).end();
      }, delayMs),
  );
  try {
    const registered = await register(ctx, target.url);
    return 'fail' in registered ? registered : { ...registered, beforeAnswer: !pingAnswered };
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
    // Durations unjudged: the states, not decided early (a busy machine is slow, never early), and
    // the late ping decided before its answer came, not by it.
    const decided = late.ms >= 4900 && (judgesDurations(ctx) ? late.ms < 6000 : late.beforeAnswer);
    const ok = inTime.state === 'ACTIVE' && late.state === 'PENDING' && decided;
    return result(this, ok ? 'pass' : 'fail', measured);
  },
};
