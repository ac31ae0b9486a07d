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
  const pending: Array<{ ep: string; n: number; finish(sig?: Partial<EndpointSignal>): void }> = [];
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
  const submit = (ep: string, n: number) =>
    s.submit({
      endpointId: ep,
      run: () =>
        new Promise<R>((resolve) => {
          started.push(`${ep}${n}`);
          pending.push({
            ep,
            n,
            finish: (sig = {}) => resolve({ ep, n, slow: sig.slow ?? false, notBefore: sig.notBefore ?? null }),
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

t.test('a slow endpoint keeps perEndpoint in flight and sends the rest back through the ladder', async (t) => {
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
  t.equal(diverted.length, 7, 'queued deliveries beyond perEndpoint are diverted');
  t.equal(s.diverted, 7);
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

t.test('dropQueued forgets the queued jobs of partitions taken away, and only those', async (t) => {
  const s = new DeliveryScheduler<R>({ concurrency: 1, perEndpoint: 1, maxBuffered: 100, now: () => 0 }, (_j, v) => v);
  const resolved: number[] = [];
  let finishFirst: () => void = () => {};
  for (let i = 0; i < 6; i++) {
    s.submit({
      endpointId: 'e',
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
