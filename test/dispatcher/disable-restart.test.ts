/**
 * The 5-day disable carried over a dispatcher restart (dispatcher/health.ts): once an endpoint has
 * failed every attempt for an hour (scaled), the dispatcher checkpoints `failing_since` on the endpoint
 * record (core/webhooks/endpoint-service.ts recordFailingSince). A fresh dispatcher node on the same
 * topics, which has never seen the endpoint fail, carries on from that checkpoint: it disables the
 * endpoint once SLUICE_WEBHOOK_DISABLE_AFTER_HOURS (scaled by SLUICE_TIME_SCALE) have passed since
 * the first failure, minutes after its own first failure there, and not before.
 *
 * All nodes share a ManualClock, so a restart takes no time of the clock's: each step is a fresh
 * event whose first attempt starts at once. Here 48 h at scale 4: the endpoint is disabled 12 h
 * (of the clock) after its first failure, checkpointed after 15 min.
 */
import t from 'tap';
import { ManualClock } from '../../core/clock.ts';
import { call, startTestNode, until, type TestNode } from '../helpers/sluice.ts';
import { publish, receiver, registerEndpoint } from './receiver.ts';

const MIN = 60_000;
const HOUR = 60 * MIN;
const SCALE = 4;
const LIMIT = (48 * HOUR) / SCALE;
const CHECKPOINT = HOUR / SCALE;
const clock = new ManualClock();
const env = {
  SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
  SLUICE_ROTATION_CHECK_MS: '3600000',
  SLUICE_WEBHOOK_DISABLE_AFTER_HOURS: '48',
  SLUICE_TIME_SCALE: String(SCALE),
};
// The ingress node lives through the test; the dispatcher is one node, then another.
const ingress = await startTestNode(env, { clock });
const dispatcher = (): Promise<TestNode> =>
  startTestNode(env, { clock, dispatcher: true, prefix: ingress.config.topicPrefix });
let first: TestNode | null = await dispatcher();
let second: TestNode | null = null;
const r = await receiver(500);
t.teardown(async () => {
  await r.close();
  await second?.close();
  await first?.close();
  await ingress.close();
});

t.test(
  'a fresh dispatcher disables the endpoint 48 h (scaled) after the first failure, not after its own',
  async (t) => {
    const admin = await ingress.client('admin', 'acme');
    let token = await ingress.token(admin);
    const ep = await registerEndpoint(ingress, token, r.url, ['pipeline.failed']);
    t.equal(ep.state, 'ACTIVE', 'the ping answered 200; every event gets 500');
    const record = () => ingress.ctx.endpoints.get(ep.id);
    const fail = async (n: number) => {
      token = await ingress.token(admin); // tokens live 15 minutes of the clock
      const res = await publish(ingress, token, { type: 'pipeline.failed', id: `fail-${n}`, data: { n } });
      if (res.status !== 202 || res.json.matched_endpoints !== 1) throw new Error(`publish ${n}: ${res.text}`);
      await r.until((e) => e.some((h) => h.body.id === `fail-${n}`), 60_000, `the attempt of fail-${n}`);
      // The attempt is reported once the dispatcher has judged it (and written what that decided).
      await until(
        () => call(ingress.base, 'GET', `/v1/webhooks/endpoints/${ep.id}/attempts?event_id=fail-${n}`, { token }),
        (res) => res.status === 200 && res.json.data.length > 0,
        20_000,
        `the attempt of fail-${n} reported`,
      );
    };

    const t0 = clock.now();
    await fail(1);
    clock.advance(CHECKPOINT + MIN);
    await fail(2);
    await until(record, (rec) => rec?.failing_since === t0, 20_000, 'the failing_since checkpoint');
    t.equal(record()?.failing_since, t0, 'after an hour (scaled) of failures, failing_since is the first failure');
    t.equal(record()?.state, 'ACTIVE');

    await first!.close();
    first = null;
    second = await dispatcher();
    clock.set(t0 + LIMIT - 10 * MIN);
    await fail(3);
    t.equal(second.ctx.endpoints.get(ep.id)?.state, 'ACTIVE', '10 min before the limit, the new dispatcher keeps it');
    clock.set(t0 + LIMIT + MIN);
    await fail(4);
    const disabled = await until(record, (rec) => rec?.state === 'DISABLED', 20_000, 'the endpoint DISABLED');
    t.match(disabled?.disabled_reason, /^every attempt failed for 2 days \(last: HTTP 500\)/, 'for 2 days of failures');
    t.ok(
      (disabled?.disabled_at ?? 0) >= t0 + LIMIT,
      `disabled ${(((disabled?.disabled_at ?? 0) - t0) / HOUR).toFixed(2)} h after the first failure, not before 12 h`,
    );
    const res = await call(ingress.base, 'GET', `/v1/webhooks/endpoints/${ep.id}`, { token });
    t.equal(res.json.state, 'DISABLED', 'the API says so');
    t.equal(Date.parse(res.json.disabled_at), disabled?.disabled_at, 'with the time of the disable');
  },
);
