/**
 * Request timeouts (fix 2 of the same file): one ticker for every queue instead of an interval per
 * connection, running only while requests are in flight.
 *
 * kafkajs 2.2.4's request queues re-check for pending requests every millisecond forever once a
 * connection has answered anything (core/kafka/request-queue-patch.ts); with the fix in place an
 * idle connection schedules nothing. On a real broker: the fix is the method kafkajs's queues have,
 * kafkajs calls it, and once the producer is idle no queue has a check scheduled.
 */
import { createRequire } from 'node:module';
import t, { type Test } from 'tap';
import { createKafka } from '../../core/kafka/client.ts';
import { DurableProducer } from '../../core/kafka/producers.ts';
import { ensureTopics } from '../../core/kafka/topic-admin.ts';
import {
  checkRequestTimeouts,
  scheduleCheckPendingRequests,
  scheduleRequestTimeoutCheck,
  TIMEOUT_CHECK_MS,
  timeoutTicker,
  type RequestQueueState,
} from '../../core/kafka/request-queue-patch.ts';
import { brokers, uniquePrefix } from '../helpers/sluice.ts';

/** A producer on the real broker that has written one record, disconnected when the test ends. */
async function producerAfterOneWrite(t: Pick<Test, 'teardown'>, name: string): Promise<void> {
  const kafka = createKafka(brokers(), `${name}-test`);
  const topic = `${uniquePrefix(name)}.events`;
  await ensureTopics(kafka, [{ name: topic, partitions: 1, config: {} }]);
  const producer = new DurableProducer(kafka);
  await producer.connect();
  t.teardown(() => producer.disconnect());
  await producer.sendJson(topic, 'k', { hello: 'world' });
}

const queue = (pending: unknown[], throttledUntil: number) => {
  const q = {
    pending,
    throttledUntil,
    throttleCheckTimeoutId: null as NodeJS.Timeout | null,
    checks: 0,
    checkPendingRequests() {
      q.checks++;
    },
  };
  return q;
};

t.test('a check is scheduled only while requests wait or a throttle runs', async (t) => {
  const idle = queue([], -1);
  scheduleCheckPendingRequests.call(idle as RequestQueueState);
  t.equal(idle.throttleCheckTimeoutId, null, 'nothing waits, no throttle: no timer');
  const waiting = queue([{}], -1);
  scheduleCheckPendingRequests.call(waiting as RequestQueueState);
  t.not(waiting.throttleCheckTimeoutId, null, 'a pending request: a timer');
  await new Promise((r) => setTimeout(r, 30));
  t.equal(waiting.checks, 1, 'which checks the queue once');
  const throttled = queue([], Date.now() + 20);
  scheduleCheckPendingRequests.call(throttled as RequestQueueState);
  t.not(throttled.throttleCheckTimeoutId, null, 'a throttle: a timer for its end');
  clearTimeout(throttled.throttleCheckTimeoutId!);
});

t.test('an idle producer connection to a real broker runs no checks', async (t) => {
  const RequestQueue = createRequire(import.meta.url)('kafkajs/src/network/requestQueue/index.js');
  t.equal(RequestQueue.prototype.scheduleCheckPendingRequests, scheduleCheckPendingRequests, 'the fix is installed');
  const original = RequestQueue.prototype.checkPendingRequests;
  const installed = RequestQueue.prototype.scheduleCheckPendingRequests;
  let checks = 0;
  let schedules = 0;
  const queues = new Set<RequestQueueState>();
  RequestQueue.prototype.checkPendingRequests = function (this: unknown) {
    checks++;
    return original.call(this);
  };
  RequestQueue.prototype.scheduleCheckPendingRequests = function (this: RequestQueueState) {
    schedules++;
    queues.add(this);
    return installed.call(this);
  };
  t.teardown(() => {
    RequestQueue.prototype.checkPendingRequests = original;
    RequestQueue.prototype.scheduleCheckPendingRequests = installed;
  });
  await producerAfterOneWrite(t, 'rq');
  t.ok(schedules > 0, `kafkajs called the fix (${schedules} times, on ${queues.size} request queues)`);
  await new Promise((r) => setTimeout(r, 100));
  // Unpatched, each check schedules the next 1 ms later: at any moment every queue has a timer set.
  t.same(
    [...queues].map((q) => q.throttleCheckTimeoutId !== null),
    [...queues].map(() => false),
    'nothing waits: no request queue has a check scheduled',
  );
  checks = 0;
  await new Promise((r) => setTimeout(r, 1000));
  // Unpatched: one check a millisecond per connection (~1,000 here).
  t.ok(checks < 20, `${checks} checks of the request queues in 1 s idle`);
});

t.test('request timeouts: one ticker for every queue, only while requests are in flight', async (t) => {
  const fake = (sentAt: number, requestTimeout: number) => {
    let timedOut = 0;
    const q = {
      enforceRequestTimeout: true,
      inflight: new Map<number, { sentAt: number; requestTimeout: number; timeoutRequest(): void }>(),
      isConnected: () => true,
      destroy() {},
      timedOut: () => timedOut,
    };
    // As kafkajs's: a timed-out request leaves the in-flight map.
    q.inflight.set(1, {
      sentAt,
      requestTimeout,
      timeoutRequest: () => {
        timedOut++;
        q.inflight.delete(1);
      },
    });
    return q;
  };
  const late = fake(Date.now() - 5000, 1000);
  // A minute: a stalled test process must not make it late.
  const fresh = fake(Date.now(), 60_000);
  scheduleRequestTimeoutCheck.call(late);
  scheduleRequestTimeoutCheck.call(fresh);
  t.equal(timeoutTicker().running, true, 'requests in flight: the ticker runs');
  await new Promise((r) => setTimeout(r, TIMEOUT_CHECK_MS * 2 + 50));
  t.equal(late.timedOut(), 1, 'a request past its timeout is timed out');
  t.equal(fresh.timedOut(), 0, 'one within it is not');
  late.inflight.clear();
  fresh.inflight.clear();
  await new Promise((r) => setTimeout(r, TIMEOUT_CHECK_MS * 2 + 50));
  t.equal(timeoutTicker().running, false, 'nothing in flight: the ticker stops');
  fresh.inflight.set(2, { sentAt: Date.now(), requestTimeout: 1000, timeoutRequest() {} });
  t.equal(timeoutTicker().running, true, 'a request going in flight starts it again');
  fresh.inflight.clear();
  late.isConnected = () => false;
  fresh.isConnected = () => false;
  checkRequestTimeouts();
  t.equal(timeoutTicker().queues, 0, 'closed connections leave the ticker');
});

t.test('real connections: no interval per connection, and the ticker rests once they are idle', async (t) => {
  const RequestQueue = createRequire(import.meta.url)('kafkajs/src/network/requestQueue/index.js');
  t.equal(RequestQueue.prototype.scheduleRequestTimeoutCheck, scheduleRequestTimeoutCheck, 'the fix is installed');
  await producerAfterOneWrite(t, 'rt');
  t.ok(timeoutTicker().queues > 0, `the ticker watches ${timeoutTicker().queues} request queues`);
  // Unpatched, each open connection holds a 100 ms setInterval.
  const timers = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
  t.ok(timers < timeoutTicker().queues, `${timers} timers for ${timeoutTicker().queues} open connections`);
  await new Promise((r) => setTimeout(r, TIMEOUT_CHECK_MS * 2 + 50));
  t.equal(timeoutTicker().running, false, 'an idle producer: the ticker rests');
});
