/**
 * The kafkajs fixes load only against what they were written for: the installed kafkajs is the
 * version named, and each replaced method exists (and, where a fix relies on it, still reads what
 * it read). A missing or changed method stops start-up with a message naming the file.
 */
import t from 'tap';
import { createRequire } from 'node:module';
import { KAFKAJS_VERSION, KafkajsMismatchError, kafkajsClass } from '../../core/kafka/kafkajs-internals.ts';
import '../../core/kafka/client.ts';

t.test('the installed kafkajs is the version the fixes name', async (t) => {
  const installed = (createRequire(import.meta.url)('kafkajs/package.json') as { version: string }).version;
  t.equal(installed, KAFKAJS_VERSION);
});

t.test('a class whose methods are there loads', async (t) => {
  const cls = kafkajsClass<{ fetch: unknown }>('consumer/consumerGroup.js', ['fetch', 'heartbeat'], {
    fetch: 'maxWaitTime: this.maxWaitTime',
  });
  t.type(cls.prototype.fetch, 'function');
});

t.test('a missing method or a changed one refuses, naming the file', async (t) => {
  t.throws(() => kafkajsClass('consumer/consumerGroup.js', ['fetchRenamed']), {
    name: 'KafkajsMismatchError',
    message: /consumer\/consumerGroup\.js has no method fetchRenamed/,
  });
  t.throws(() => kafkajsClass('consumer/consumerGroup.js', ['fetch'], { fetch: 'this.somethingElse' }), {
    message: /no longer contains "this.somethingElse"/,
  });
  t.throws(
    () =>
      kafkajsClass('consumer/consumerGroup.js', ['fetch'], {
        fetch: ['maxWaitTime: this.maxWaitTime', 'this.somethingElse'],
      }),
    { message: /no longer contains "this.somethingElse"/ },
    'each of several texts is checked',
  );
  t.ok(new KafkajsMismatchError('x') instanceof Error);
});

t.test('the fixes are installed on the classes kafkajs uses', async (t) => {
  const load = createRequire(import.meta.url);
  const group = load('kafkajs/src/consumer/consumerGroup.js').prototype;
  t.ok(Object.getOwnPropertyDescriptor(group, 'maxWaitTime')?.get, 'fetch-wait: maxWaitTime is an accessor');
  t.ok(Object.getOwnPropertyDescriptor(group, 'minBytes')?.get, 'fetch-wait: minBytes is an accessor');
  const runner = load('kafkajs/src/consumer/runner.js').prototype;
  t.match(String(runner.fetch), /withRecords/, 'empty-batch-patch: the runner fetch drops empty batches');
  t.match(String(group.heartbeat), /refindCoordinator|lostCoordinator/, 'coordinator-patch: heartbeat refinds');
  const queue = load('kafkajs/src/network/requestQueue/index.js').prototype;
  t.match(String(queue.scheduleCheckPendingRequests), /pending\.length\s*===\s*0/, 'request-queue-patch installed');
});
