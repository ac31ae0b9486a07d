/**
 * kafkajs 2.2.4's request queues re-check for pending requests every millisecond forever once a
 * connection has answered anything (core/kafka/request-queue-patch.ts); with the fix in place an
 * idle connection schedules nothing. On a real broker: the fix is the method kafkajs's queues have,
 * kafkajs calls it, and once the producer is idle no queue has a check scheduled.
 */
import { createRequire } from 'node:module';
import t from 'tap';
import { createKafka } from '../../core/kafka/client.ts';
import { DurableProducer } from '../../core/kafka/producers.ts';
import { ensureTopics } from '../../core/kafka/topic-admin.ts';
import { scheduleCheckPendingRequests, type RequestQueueState } from '../../core/kafka/request-queue-patch.ts';
import { brokers, uniquePrefix } from '../helpers/sluice.ts';

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
  const kafka = createKafka(brokers(), 'request-queue-test');
  const topic = `${uniquePrefix('rq')}.events`;
  await ensureTopics(kafka, [{ name: topic, partitions: 1, config: {} }]);
  const producer = new DurableProducer(kafka);
  await producer.connect();
  t.teardown(() => producer.disconnect());
  await producer.sendJson(topic, 'k', { hello: 'world' });
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
