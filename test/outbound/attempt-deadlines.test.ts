/**
 * The attempts' one deadline timer (outbound/attempt.ts) runs only while an attempt is live and waits
 * for the earliest deadline, not a short tick: once the last one is answered no timer is left to wake
 * the process (issue 33), and a late answer is still cut at its deadline.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { attemptDelivery, createDeliveryAgent } from '../../outbound/attempt.ts';

const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

async function listen(handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook` };
}

t.test('no timer is left once every attempt is answered', async (t) => {
  const { server, url } = await listen((_req, res) => res.end('ok'));
  const agent = createDeliveryAgent();
  t.teardown(async () => {
    await agent.close();
    server.close();
  });
  const before = timers();
  const outcomes = await Promise.all(
    [1, 2, 3].map(() =>
      attemptDelivery(url, '{}', { 'content-type': 'application/json' }, { timeoutMs: 5000, dispatcher: agent }),
    ),
  );
  t.same(
    outcomes.map((o) => o.ok),
    [true, true, true],
  );
  t.equal(timers(), before, 'the deadline timer stopped with the last answer');
});

t.test('an attempt still live keeps the timer, and it cuts a late answer', async (t) => {
  const { server, url } = await listen((req, res) => {
    if (req.url === '/hook') res.end('ok');
    // /slow never answers
  });
  const agent = createDeliveryAgent();
  t.teardown(async () => {
    await agent.close();
    server.closeAllConnections();
    server.close();
  });
  const before = timers();
  const slow = attemptDelivery(`${url.replace('/hook', '/slow')}`, '{}', {}, { timeoutMs: 300, dispatcher: agent });
  const fast = await attemptDelivery(url, '{}', {}, { timeoutMs: 5000, dispatcher: agent });
  t.ok(fast.ok);
  t.ok(timers() > before, 'the slow attempt keeps the timer');
  const cut = await slow;
  t.equal(cut.ok, false);
  t.match(cut.error, /no full response within 300 ms/);
  t.equal(timers(), before, 'and it stopped once the slow attempt was cut');
});

t.test('a burst of attempts starts no timer shorter than their deadline', async (t) => {
  // Node does not disarm its native timer when the earliest JavaScript timer is cleared: a short
  // ticker started for a burst and cleared when it was answered still woke the process later.
  const { server, url } = await listen((_req, res) => res.end('ok'));
  const agent = createDeliveryAgent();
  const [realTimeout, realInterval] = [globalThis.setTimeout, globalThis.setInterval];
  t.teardown(async () => {
    Object.assign(globalThis, { setTimeout: realTimeout, setInterval: realInterval });
    await agent.close();
    server.close();
  });
  const send = () => attemptDelivery(url, '{}', {}, { timeoutMs: 5000, dispatcher: agent });
  t.ok((await send()).ok, 'a first attempt opens the connection (and the agent its own sweeper)');
  const delays: number[] = [];
  const spy = <F extends (...a: never[]) => unknown>(real: F) =>
    ((fn: () => void, ms?: number, ...rest: unknown[]) => {
      delays.push(ms ?? 0);
      return (real as unknown as (...a: unknown[]) => unknown)(fn, ms, ...rest);
    }) as unknown as F;
  Object.assign(globalThis, { setTimeout: spy(realTimeout), setInterval: spy(realInterval) });
  const outcomes = await Promise.all([send(), send(), send()]);
  Object.assign(globalThis, { setTimeout: realTimeout, setInterval: realInterval });
  t.same(
    outcomes.map((o) => o.ok),
    [true, true, true],
  );
  t.ok(delays.length > 0, 'the burst waited on a timer for its deadline');
  t.same(
    delays.filter((ms) => ms < 4900),
    [],
    'every timer started for the burst waits about as long as the deadline',
  );
});

t.test('attempts of different timeouts are each cut at their own deadline, in deadline order', async (t) => {
  const { server, url } = await listen((req, res) => {
    if (req.url === '/hook') res.end('ok');
  });
  const agent = createDeliveryAgent();
  t.teardown(async () => {
    await agent.close();
    server.closeAllConnections();
    server.close();
  });
  const slow = `${url.replace('/hook', '/slow')}`;
  const cut: string[] = [];
  const attempt = (name: string, target: string, timeoutMs: number) =>
    attemptDelivery(target, '{}', {}, { timeoutMs, dispatcher: agent }).then((o) => {
      cut.push(name);
      return o;
    });
  const [late, early, answered, middle] = await Promise.all([
    attempt('late', slow, 600),
    attempt('early', slow, 200),
    attempt('answered', url, 5000),
    attempt('middle', slow, 400),
  ]);
  t.ok(answered.ok);
  for (const [o, ms] of [
    [early, 200],
    [middle, 400],
    [late, 600],
  ] as const)
    t.match(o.error, new RegExp(`no full response within ${ms} ms`));
  t.same(cut, ['answered', 'early', 'middle', 'late']);
});
