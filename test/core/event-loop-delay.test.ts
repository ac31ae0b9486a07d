/**
 * The event-loop delay of the process metrics is sampled only while the process works
 * (core/event-loop-delay.ts): idle, no 10 ms timer runs and the gauges read 0, yet a stall shows in
 * the maximum; busy, delays are sampled, and the first sample after a pause does not span the pause.
 */
import t, { type Test } from 'tap';
import { workDrivenDelay } from '../../core/event-loop-delay.ts';
import { Metrics } from '../../core/metrics.ts';

/** The histogram at a 10 ms resolution, its probe every `probeMs`, disabled when the test ends. */
function running(t: Pick<Test, 'teardown'>, busy: () => boolean, probeMs: number) {
  const h = workDrivenDelay(10, busy, probeMs);
  h.enable();
  t.teardown(() => void h.disable());
  return h;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const block = (ms: number) => {
  for (const end = Date.now() + ms; Date.now() < end; );
};

t.test('idle: nothing is sampled and the sampled readings are 0', async (t) => {
  const h = running(t, () => false, 20);
  await sleep(100);
  t.equal(h.sampling, false, 'not sampling');
  // The maximum is the probe's lateness here (the test below); the rest come from samples only.
  t.same([h.min, h.mean, h.stddev, h.percentile(99)], [0, 0, 0, 0], 'an empty window reads 0');
});

t.test('quiet: a stall still shows in the maximum, through the probe', async (t) => {
  const h = running(t, () => false, 50);
  await sleep(120);
  h.reset();
  block(300);
  await sleep(120);
  t.equal(h.sampling, false, 'still not sampling');
  t.ok(h.max / 1e6 >= 200, `a 300 ms stall read as ${(h.max / 1e6).toFixed(0)} ms`);
  h.reset();
  t.equal(h.max, 0, 'a reset clears it');
});

t.test('busy: delays are sampled, and a block shows in the maximum', async (t) => {
  const h = running(t, () => true, 20);
  await sleep(60);
  t.equal(h.sampling, true, 'sampling once the probe found the loop busy');
  h.reset();
  await sleep(30);
  block(120);
  await sleep(30);
  t.ok(h.max / 1e6 >= 100, `a 120 ms block read as a delay of ${(h.max / 1e6).toFixed(0)} ms`);
  t.ok(h.min > 0 && h.percentile(50) > 0, 'the other readings come from samples');
});

t.test('the first sample after a pause does not span the pause', async (t) => {
  let busy = true;
  const h = running(t, () => busy, 20);
  await sleep(60);
  t.equal(h.sampling, true);
  busy = false;
  await sleep(60);
  t.equal(h.sampling, false, 'a quiet probe stops the sampling');
  await sleep(400);
  busy = true;
  await sleep(60);
  t.equal(h.sampling, true, 'a busy probe starts it again');
  t.ok(h.max / 1e6 < 200, `the largest sample is ${(h.max / 1e6).toFixed(0)} ms, not the 400 ms pause`);
});

t.test('the process metrics use it: an idle process is not woken a hundred times a second', async (t) => {
  const metrics = new Metrics({ processMetrics: true });
  t.match(await metrics.registry.metrics(), /^nodejs_eventloop_lag_max_seconds \d/m, 'the delay gauges are rendered');
  await sleep(200);
  const before = process.resourceUsage().voluntaryContextSwitches;
  await sleep(1000);
  const wakes = process.resourceUsage().voluntaryContextSwitches - before;
  // prom-client's own sampling at 10 ms: about 100 wake-ups in this second.
  t.ok(wakes < 40, `${wakes} wake-ups in an idle second`);
});
