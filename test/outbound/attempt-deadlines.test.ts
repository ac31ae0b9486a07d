/**
 * The attempts' one deadline ticker (outbound/attempt.ts) runs only while an attempt is live: once
 * the last one is answered no timer is left to wake the process (issue 33), and a late answer is
 * still cut at its deadline.
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
  t.equal(timers(), before, 'the deadline ticker stopped with the last answer');
});

t.test('an attempt still live keeps the ticker, and it cuts a late answer', async (t) => {
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
  t.ok(timers() > before, 'the slow attempt keeps the ticker');
  const cut = await slow;
  t.equal(cut.ok, false);
  t.match(cut.error, /no full response within 300 ms/);
  t.equal(timers(), before, 'and it stopped once the slow attempt was cut');
});
