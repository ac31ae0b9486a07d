/**
 * The broker stopped under load and started again: publishes answer 503 while it is down (never
 * 202 for a write Kafka did not take), every event accepted before and after is delivered, the
 * node never exits, and /readyz tells the story. SLUICE_FAULT_OUTAGE_S sets the outage (the
 * short form here: 10 s; `npm run soak` runs 30 s).
 */
import t from 'tap';
import { registerEndpoint } from '../dispatcher/receiver.ts';
import { faultWorld, publisher, missing } from './harness.ts';

const OUTAGE_MS = Number(process.env.SLUICE_FAULT_OUTAGE_S ?? 10) * 1000;
const { kafka, node, r } = await faultWorld(t, 1, { SLUICE_KAFKA_STALE_MS: '3000' });

t.test(`a ${OUTAGE_MS / 1000} s broker outage under load: 503 while down, nothing accepted is lost`, async (t) => {
  const token = await node.token(await node.client('admin', 'outage'));
  await registerEndpoint(node, token, r.url, ['inference.completed']);
  const received = () => new Set(r.events().map((h) => h.body.id as string));
  const pub = publisher(node, () => token, 'o');
  await new Promise((res) => setTimeout(res, 3000));
  const beforeOutage = pub.stats.accepted.size;
  t.ok(beforeOutage > 0, `${beforeOutage} events accepted before the outage`);

  await kafka.nodes[0].stop();
  const downAt = Date.now();
  const acceptedAtStop = pub.stats.accepted.size;
  let readyzDown = false;
  while (Date.now() - downAt < OUTAGE_MS) {
    const ready = await fetch(`${node.admin}/readyz`).then(
      (res) => res.status,
      () => 0,
    );
    if (ready === 503) readyzDown = true;
    await new Promise((res) => setTimeout(res, 500));
  }
  // A write in flight at the moment of the stop may still have been acknowledged; after that, none.
  const acceptedWhileDown = pub.stats.accepted.size - acceptedAtStop;
  t.ok(
    acceptedWhileDown <= 20 * 2,
    `no publish accepted while the broker was down (${acceptedWhileDown} in flight at the stop)`,
  );
  t.ok(readyzDown, '/readyz said 503 during the outage');

  await kafka.nodes[0].start();
  const upAt = Date.now();
  const acceptedAtRestart = pub.stats.accepted.size;
  while (pub.stats.accepted.size - acceptedAtRestart < 200 && Date.now() - upAt < 60_000)
    await new Promise((res) => setTimeout(res, 250));
  t.ok(
    pub.stats.accepted.size - acceptedAtRestart >= 200,
    `publishing is accepted again after the restart (in ${Date.now() - upAt} ms)`,
  );
  await pub.stop();
  t.same([...pub.stats.unexpected], [], 'no status other than 202 and 503');
  t.ok(pub.stats.refused > 0, `publishes were answered 503 (${pub.stats.refused} events refused)`);
  t.ok(
    pub.stats.firstRefusedAt > downAt && pub.stats.firstRefusedAt - downAt < OUTAGE_MS + 15_000,
    `the first 503 came ${pub.stats.firstRefusedAt - downAt} ms after the stop`,
  );

  const lost = await missing(pub.stats.accepted, received, 120_000);
  t.same(
    lost.slice(0, 10),
    [],
    `every one of the ${pub.stats.accepted.size} accepted events was delivered (${lost.length} missing)`,
  );
  const hits = r.events().length;
  t.comment(
    `accepted ${pub.stats.accepted.size}, refused ${pub.stats.refused}, ` +
      `deliveries received ${hits}, duplicates ${hits - received().size}`,
  );
  let ready = 0;
  for (let i = 0; i < 60 && ready !== 200; i++) {
    ready = await fetch(`${node.admin}/readyz`).then(
      (res) => res.status,
      () => 0,
    );
    if (ready !== 200) await new Promise((res) => setTimeout(res, 500));
  }
  t.equal(ready, 200, '/readyz is 200 again: the views caught up');
});
