import t from 'tap';
import { stopStep, stopStepsUnderWay } from '../../core/stop-steps.ts';

t.test('a stop names the steps under way, with their ages, and forgets each once it ends', async (t) => {
  t.equal(stopStepsUnderWay(), 'none');
  let finish = () => {};
  const held = stopStep('workers', () => new Promise<void>((res) => (finish = res)));
  const failed = stopStep('context: producer', () => Promise.reject(new Error('gone')));
  t.match(stopStepsUnderWay(Date.now() + 50), /^workers \((5\d|6\d) ms\)/, 'the step still waited on, with its age');
  await t.rejects(failed, /gone/, 'a failing step fails its caller');
  t.equal(stopStepsUnderWay().includes('producer'), false, 'a failed step is no longer under way');
  const twin = stopStep('workers', () => Promise.resolve(7));
  t.equal(await twin, 7, 'a step answers what its work answers');
  finish();
  await held;
  t.equal(stopStepsUnderWay(), 'none');
});
