import t from 'tap';
import { DeliveryScheduler, type EndpointSignal } from '../../dispatcher/scheduler.ts';

interface R extends EndpointSignal {
  ep: string;
  n: number;
  diverted?: string;
}

function setup(opts: { concurrency?: number; perEndpoint?: number; maxBuffered?: number } = {}) {
  let now = 1000;
  const started: string[] = [];
  const pending: Array<{
    ep: string;
    n: number;
    finish(sig?: Partial<EndpointSignal>): void;
    /** What the attempt calls as soon as it reads a Retry-After, before it settles. */
    retryAfter?: (notBefore: number) => void;
  }> = [];
  const results: R[] = [];
  const s = new DeliveryScheduler<R>(
    {
      concurrency: opts.concurrency ?? 4,
      perEndpoint: opts.perEndpoint ?? 2,
      maxBuffered: opts.maxBuffered ?? 1000,
      now: () => now,
    },
    (_j, v) => v,
  );
  const submit = (ep: string, n: number, tenant = 't') =>
    s.submit({
      endpointId: ep,
      tenantId: tenant,
      run: (retryAfter) =>
        new Promise<R>((resolve) => {
          started.push(`${ep}${n}`);
          pending.push({
            ep,
            n,
            finish: (sig = {}) => resolve({ ep, n, slow: sig.slow ?? false, notBefore: sig.notBefore ?? null }),
            retryAfter,
          });
        }),
      divert: (reason, until) => ({
        ep,
        n,
        slow: false,
        notBefore: null,
        diverted: `${reason}${until === null ? '' : `@${until}`}`,
      }),
      resolve: (v) => results.push(v),
    });
  const flush = () => new Promise((r) => setImmediate(r));
  return { s, submit, started, pending, results, flush, advance: (ms: number) => (now += ms) };
}

t.test('a backlog far larger than the concurrency waits its turn: nothing is diverted', async (t) => {
  const { s, submit, pending, results, flush } = setup({ concurrency: 4, perEndpoint: 2 });
  for (let i = 0; i < 1000; i++) submit('a', i);
  t.equal(s.active, 2, 'at most perEndpoint in flight for one endpoint');
  t.equal(s.buffered, 1000);
  while (pending.length > 0) {
    pending.shift()!.finish();
    await flush();
  }
  t.equal(results.length, 1000, 'every delivery ran');
  t.equal(results.filter((r) => r.diverted).length, 0, 'none diverted');
  t.equal(s.diverted, 0);
  t.same(
    results.map((r) => r.n),
    [...Array(1000).keys()],
    'in order for one endpoint',
  );
});

t.test('endpoints are served round-robin: a flood does not starve a later endpoint', async (t) => {
  const { submit, started, pending, flush } = setup({ concurrency: 1, perEndpoint: 1 });
  for (let i = 0; i < 100; i++) submit('flood', i);
  submit('other', 0);
  submit('other', 1);
  for (let k = 0; k < 6; k++) {
    pending.shift()!.finish();
    await flush();
  }
  t.same(
    started.slice(0, 5),
    ['flood0', 'other0', 'flood1', 'other1', 'flood2'],
    'the other endpoint goes between the flood',
  );
});

t.test('the buffer is bounded: room reaches 0 and whenRoom fires at half', async (t) => {
  const { s, submit, pending, flush } = setup({ concurrency: 2, perEndpoint: 2, maxBuffered: 10 });
  for (let i = 0; i < 10; i++) submit('a', i);
  t.equal(s.room, 0);
  let resumed = 0;
  s.whenRoom(() => resumed++);
  for (let k = 0; k < 4; k++) {
    pending.shift()!.finish();
    await flush();
  }
  t.equal(resumed, 0, 'not yet at half');
  pending.shift()!.finish();
  await flush();
  t.equal(resumed, 1, 'resumed once the buffer is down to half');
});

t.test('a slow endpoint has its limit halved and sends the rest back through the ladder', async (t) => {
  const { s, submit, pending, results, flush } = setup({ concurrency: 8, perEndpoint: 2 });
  for (let i = 0; i < 10; i++) submit('slow', i);
  submit('fast', 0);
  pending.find((p) => p.ep === 'slow')!.finish({ slow: true });
  pending.splice(
    pending.findIndex((p) => p.ep === 'slow'),
    1,
  );
  await flush();
  const diverted = results.filter((r) => r.diverted === 'slow');
  t.equal(diverted.length, 8, 'its limit fell from 2 to 1, still in flight: every queued delivery is diverted');
  t.equal(s.diverted, 8);
  t.notOk(
    results.some((r) => r.ep === 'fast' && r.diverted),
    'the fast endpoint is not touched',
  );
  submit('slow', 99);
  t.equal(results.at(-1)!.diverted, 'slow', 'a new delivery for a saturated slow endpoint is diverted at once');
});

t.test('Retry-After: nothing goes to that endpoint before the time it asked for', async (t) => {
  const { submit, pending, results, flush, advance, started } = setup({ concurrency: 8, perEndpoint: 1 });
  for (let i = 0; i < 5; i++) submit('busy', i);
  pending.shift()!.finish({ notBefore: 1000 + 30_000 });
  await flush();
  t.same(
    results.slice(1).map((r) => r.diverted),
    ['retry-after@31000', 'retry-after@31000', 'retry-after@31000', 'retry-after@31000'],
    'queued ones wait until the time asked',
  );
  submit('busy', 5);
  t.equal(results.at(-1)!.diverted, 'retry-after@31000', 'and so does a new one');
  advance(30_000);
  submit('busy', 6);
  t.equal(started.at(-1), 'busy6', 'once the time has passed it is attempted again');
});

t.test('a Retry-After holds the endpoint from when the answer is read, not when its attempt settles', async (t) => {
  const { submit, pending, results, started } = setup({ concurrency: 8, perEndpoint: 2 });
  submit('busy', 0);
  // The answer is read; the attempt's bookkeeping (a Kafka write about the endpoint) is still under way.
  pending[0].retryAfter!(1000 + 2000);
  submit('busy', 1);
  t.same(started, ['busy0'], 'the second delivery did not start beside the first');
  t.equal(results.at(-1)?.diverted, 'retry-after@3000', 'it waits until the time asked');
});

t.test('dropQueued forgets the queued jobs of partitions taken away, and only those', async (t) => {
  const s = new DeliveryScheduler<R>({ concurrency: 1, perEndpoint: 1, maxBuffered: 100, now: () => 0 }, (_j, v) => v);
  const resolved: number[] = [];
  let finishFirst: () => void = () => {};
  for (let i = 0; i < 6; i++) {
    s.submit({
      endpointId: 'e',
      tenantId: 't',
      origin: i % 2 === 0 ? 'p0' : 'p1',
      run: () => new Promise<R>((r) => (finishFirst = () => r({ ep: 'e', n: i, slow: false, notBefore: null }))),
      divert: () => ({ ep: 'e', n: i, slow: false, notBefore: null }),
      resolve: (v) => resolved.push(v.n),
    });
  }
  t.equal(s.buffered, 6);
  t.equal(s.dropQueued(new Set(['p1'])), 3, 'the three queued jobs of p1 are dropped');
  t.equal(s.buffered, 3, 'and leave the buffer');
  finishFirst();
  await new Promise((r) => setImmediate(r));
  t.same(resolved, [0], 'the one in flight (from p0) still settles');
  while (s.buffered > 0) {
    finishFirst();
    await new Promise((r) => setImmediate(r));
  }
  t.same(resolved, [0, 2, 4], 'only p0 jobs ran');
});

t.test('a tenant has at most concurrency / (n + 1) in flight: another tenant always finds a slot', async (t) => {
  const { s, submit, started } = setup({ concurrency: 8, perEndpoint: 8 });
  for (let e = 0; e < 10; e++) for (let i = 0; i < 10; i++) submit(`a${e}-`, i, 'noisy');
  t.equal(s.active, 4, 'one tenant alone: half the slots (8 / 2)');
  submit('b', 0, 'quiet');
  t.equal(started.at(-1), 'b0', 'the other tenant starts at once, though the noisy one has work queued');
  submit('c', 0, 'third');
  t.equal(started.at(-1), 'c0', 'and so does a third');
  t.equal(s.active, 6);
});

t.test('a parked tenant goes on as its own attempts settle, and takes more once the others are gone', async (t) => {
  const { s, submit, pending, flush, started } = setup({ concurrency: 6, perEndpoint: 6 });
  for (let i = 0; i < 20; i++) submit('a', i, 'A');
  submit('b', 0, 'B');
  t.equal(s.active, 4, 'A: 3 (6 / 2) then B: 1');
  const b = pending.find((p) => p.ep === 'b')!;
  pending.splice(pending.indexOf(b), 1);
  b.finish();
  await flush();
  t.equal(s.busyTenants, 1, 'B is done');
  t.equal(s.active, 3, 'A alone is held at 3 (6 / 2)');
  pending.shift()!.finish();
  await flush();
  t.equal(s.active, 3, 'each settled attempt of A lets one more start');
  t.ok(started.filter((x) => x.startsWith('a')).length >= 4);
});

t.test('an endpoint’s limit halves with each slow attempt and grows back by one with each fast one', async (t) => {
  const { s, submit, pending, flush } = setup({ concurrency: 64, perEndpoint: 8 });
  for (let i = 0; i < 8; i++) submit('e', i);
  t.equal(s.active, 8);
  // Three slow ones settle: 8 -> 4 -> 2 -> 1; the queue is empty, so nothing is diverted.
  for (let k = 0; k < 3; k++) pending.shift()!.finish({ slow: true });
  await flush();
  t.equal(s.active, 5);
  for (let k = 0; k < 5; k++) pending.shift()!.finish();
  await flush();
  t.equal(s.active, 0);
  // Limit now 1 + 5 = 6: a burst of 20 starts 6 at once.
  for (let i = 0; i < 20; i++) submit('e', 100 + i);
  t.equal(s.active, 6, 'grown back by one per fast attempt');
});

t.test('a full buffer pauses for a tenant alone, and diverts only the tenant over its share', async (t) => {
  const { s, submit, results } = setup({ concurrency: 1, perEndpoint: 1, maxBuffered: 10 });
  for (let i = 0; i < 10; i++) submit('a', i, 'A');
  t.equal(s.room, 0);
  t.notOk(s.mayTake('A'), 'full of A alone: A must pause');
  t.ok(s.mayTake('B'), 'B is still taken');
  submit('b', 0, 'B');
  t.equal(s.buffered, 11, 'B waits in the buffer beyond its bound');
  submit('a', 10, 'A');
  t.equal(results.at(-1)?.diverted, 'tenant-share', 'A over its share of a full buffer is sent to a rung');
  submit('b', 1, 'B');
  t.equal(s.buffered, 12, 'B, under its share, is kept');
  t.equal(results.length, 1, 'only the one diverted delivery has an outcome yet');
});
