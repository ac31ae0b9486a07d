import t from 'tap';
import { loadConfig } from '../../core/config.ts';
import { ConfigError } from '../../core/errors.ts';

t.test('defaults are the real values', async (t) => {
  const c = loadConfig({});
  t.equal(c.heapGrowthPercent, 25);
  t.equal(c.stateFetchWaitMs, 20);
  t.equal(c.timeScale, 1);
});

t.test('SLUICE_HEAP_GROWTH_PERCENT: 0 keeps V8 default, out of range is refused by name', async (t) => {
  t.equal(loadConfig({ SLUICE_HEAP_GROWTH_PERCENT: '0' }).heapGrowthPercent, 0);
  t.equal(loadConfig({ SLUICE_HEAP_GROWTH_PERCENT: '100' }).heapGrowthPercent, 100);
  for (const bad of ['-1', '401', 'lots', '2.5']) {
    let caught: unknown = null;
    try {
      loadConfig({ SLUICE_HEAP_GROWTH_PERCENT: bad });
    } catch (err) {
      caught = err;
    }
    t.ok(caught instanceof ConfigError, `${bad}: a ConfigError`);
    t.match((caught as Error | null)?.message ?? '', /SLUICE_HEAP_GROWTH_PERCENT/, `${bad}: names the variable`);
  }
});
