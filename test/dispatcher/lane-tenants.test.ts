/**
 * One tenant's lane endpoints cannot take the process from another's (issue 32, items 1 and 2), on
 * a real broker with real receivers and a small buffer (200) and concurrency (16):
 * - tenant C's paused `ordering: key` endpoints on every lanes partition, thousands of deliveries
 *   waiting for them: tenant B's rate-limited, in-flight-limited and ordered endpoints still get
 *   everything; C's waiting deliveries beyond a small allowance wait in Kafka, and once C resumes
 *   every one of them arrives, each key in order;
 * - tenant C's lane endpoints holding every request: B's rate-limited endpoint still gets a slot.
 */
import t, { type Test } from 'tap';
import { call, startTestNode, until } from '../helpers/sluice.ts';
import { nOf, publishMany as publishShared, receiver, registerEndpoint, type TestReceiver } from './receiver.ts';

const node = await startTestNode(
  {
    SLUICE_DEV_ALLOW_INSECURE_TARGETS: 'true',
    SLUICE_TIME_SCALE: '1000',
    SLUICE_DISPATCH_BUFFER: '200',
    SLUICE_DISPATCH_CONCURRENCY: '16',
  },
  { dispatcher: true },
);
const closers: Array<() => Promise<void>> = [];
t.teardown(async () => {
  for (const c of closers) await c();
  await node.close();
});
const rcv = async () => {
  const r = await receiver(200);
  closers.push(() => r.close());
  return r;
};
const tokenB = await node.token(await node.client('admin', 'lane-b'));
const tokenC = await node.token(await node.client('admin', 'lane-c'));
const patch = (token: string, id: string, body: unknown) =>
  call(node.base, 'PATCH', `/v1/webhooks/endpoints/${id}`, { token, body });
const publishMany = (token: string, type: string, n: number, key?: (i: number) => string) =>
  publishShared(node, token, type, n, key);
const counter = async (name: 'laneRecordsLeft' | 'laneRereads') =>
  (await node.ctx.metrics[name].get()).values.reduce((s, v) => s + v.value, 0);

/** B's lane endpoints of every kind, each taking `type`. */
async function endpointsOfB(t: Test, type: string): Promise<TestReceiver[]> {
  const out: TestReceiver[] = [];
  for (const policy of [{ rate_limit_per_second: 50 }, { max_in_flight: 2 }, { ordering: 'key' }, {}]) {
    const r = await rcv();
    const ep = await registerEndpoint(node, tokenB, r.url, [type]);
    if (Object.keys(policy).length > 0) t.equal((await patch(tokenB, ep.id, policy)).status, 200);
    out.push(r);
  }
  return out;
}

t.test(
  "C's waiting ordered deliveries do not fill the lane buffer for B; all of them arrive once resumed",
  async (t) => {
    // 12 paused ordered endpoints: with 3 lanes partitions, every partition has some of them.
    const cs: Array<{ id: string; r: TestReceiver }> = [];
    for (let i = 0; i < 12; i++) {
      const r = await rcv();
      const ep = await registerEndpoint(node, tokenC, r.url, ['c.flood']);
      t.equal((await patch(tokenC, ep.id, { ordering: 'key', disabled: true })).status, 200);
      cs.push({ id: ep.id, r });
    }
    const bs = await endpointsOfB(t, 'b.check');
    const leftBefore = await counter('laneRecordsLeft');
    // 12 × 400 = 4,800 deliveries waiting, 24 times the buffer.
    await publishMany(tokenC, 'c.flood', 400, (i) => `k${i % 5}`);
    await until(
      async () => (await counter('laneRecordsLeft')) - leftBefore,
      (n) => n > 1000,
      30_000,
      "C's waiting deliveries left in Kafka",
    );
    await publishMany(tokenB, 'b.check', 8, (i) => `b${i % 2}`);
    for (const r of bs) await r.until((e) => e.length >= 8, 30_000, "B's deliveries beside C's waiting ones");
    t.pass('every endpoint of B (rate-limited, in-flight-limited, ordered, plain) got its 8 deliveries');
    t.ok(
      cs.every((c) => c.r.events().length === 0),
      'nothing reached a paused endpoint of C',
    );

    const rereadsBefore = await counter('laneRereads');
    for (const c of cs) t.equal((await patch(tokenC, c.id, { disabled: false })).status, 200);
    for (const c of cs) await c.r.until((e) => e.length >= 400, 60_000, "C's deliveries after it resumed");
    t.ok((await counter('laneRereads')) > rereadsBefore, 'partitions were read again from what was left');
    for (const c of cs) {
      const seen = c.r.events().map(nOf);
      t.equal(new Set(seen).size, 400, 'each of the 400 events once');
      for (let k = 0; k < 5; k++) {
        const ofKey = seen.filter((n) => n % 5 === k);
        t.same(
          ofKey,
          [...ofKey].sort((a, b) => a - b),
          `key k${k} in publish order`,
        );
      }
    }
  },
);

t.test("C's lane endpoints holding every request leave B's rate-limited endpoint a slot", async (t) => {
  const cs: TestReceiver[] = [];
  for (let i = 0; i < 8; i++) {
    const r = await rcv();
    r.answer = 'hang'; // held until the attempt times out (10 s)
    const ep = await registerEndpoint(node, tokenC, r.url, ['c.slow']);
    t.equal((await patch(tokenC, ep.id, { max_in_flight: 1000 })).status, 200);
    cs.push(r);
  }
  const b = await rcv();
  const ep = await registerEndpoint(node, tokenB, b.url, ['b.rate']);
  t.equal((await patch(tokenB, ep.id, { rate_limit_per_second: 100 })).status, 200);
  // 8 endpoints × 20 = 160 requests that hang: ten times the process's 16 slots.
  await publishMany(tokenC, 'c.slow', 20);
  await until(
    async () => cs.reduce((s, r) => s + r.events().length, 0),
    (n) => n >= 8,
    30_000,
    "C's hanging requests",
  );
  await publishMany(tokenB, 'b.rate', 5);
  await b.until((e) => e.length >= 5, 30_000, "B's deliveries beside C's hanging ones");
  // An order, not a time: B's deliveries came while C's first attempts still hung (none of them had
  // timed out, or its second attempt would be there). How soon is the noisy-neighbour bench's.
  const retried = cs.flatMap((r) => r.events()).filter((h) => h.headers['x-service-delivery-attempt'] !== '1');
  t.equal(retried.length, 0, "all 5 of B's arrived before any of C's hanging attempts ended");
  const open = cs.reduce((s, r) => s + r.events().length, 0);
  t.ok(open <= 8, `C had at most its share of the 16 slots in flight (${open})`);
});
