import t from 'tap';
import { heapGrowthFor } from '../../cli/heap.ts';
import { loadConfig } from '../../core/config.ts';
import { ConfigError } from '../../core/errors.ts';

t.test('defaults are the real values', async (t) => {
  const c = loadConfig({});
  t.equal(c.heapGrowthPercent, null, 'heap growth: chosen by role');
  t.equal(c.stateFetchWaitMs, 3000);
  t.equal(c.idleFetchWaitMs, 3000);
  t.equal(c.timeScale, 1);
});

t.test(
  'the state fetch wait: 3 s, or a third of SLUICE_KAFKA_STALE_MS when that is shorter; set, at most half of it',
  async (t) => {
    t.equal(loadConfig({ SLUICE_KAFKA_STALE_MS: '1000' }).stateFetchWaitMs, 333);
    t.equal(loadConfig({ SLUICE_KAFKA_STALE_MS: '6000' }).stateFetchWaitMs, 2000);
    t.equal(loadConfig({ SLUICE_KAFKA_STALE_MS: '60000' }).stateFetchWaitMs, 3000);
    t.equal(loadConfig({ SLUICE_KAFKA_STALE_MS: '1000', SLUICE_STATE_FETCH_WAIT_MS: '500' }).stateFetchWaitMs, 500);
    t.equal(loadConfig({ SLUICE_STATE_FETCH_WAIT_MS: '20' }).stateFetchWaitMs, 20);
    t.throws(
      () => loadConfig({ SLUICE_KAFKA_STALE_MS: '1000', SLUICE_STATE_FETCH_WAIT_MS: '600' }),
      /SLUICE_STATE_FETCH_WAIT_MS/,
    );
  },
);

t.test(
  "a dispatcher group's idle fetch wait: 3 s, or a third of a shorter session timeout; set, at most that third",
  async (t) => {
    t.equal(loadConfig({ SLUICE_DISPATCH_SESSION_TIMEOUT_MS: '6000' }).idleFetchWaitMs, 2000);
    t.equal(loadConfig({ SLUICE_DISPATCH_SESSION_TIMEOUT_MS: '60000' }).idleFetchWaitMs, 3000);
    t.equal(loadConfig({ SLUICE_IDLE_FETCH_WAIT_MS: '100' }).idleFetchWaitMs, 100);
    t.throws(
      () => loadConfig({ SLUICE_DISPATCH_SESSION_TIMEOUT_MS: '6000', SLUICE_IDLE_FETCH_WAIT_MS: '2500' }),
      /SLUICE_IDLE_FETCH_WAIT_MS/,
    );
  },
);

t.test('heap growth: 25 % for an ingress-only node, 50 % where the dispatcher runs, unless set', async (t) => {
  const auto = loadConfig({});
  t.equal(heapGrowthFor(auto, { dispatcher: false }), 25);
  t.equal(heapGrowthFor(auto, { dispatcher: true }), 50);
  const set = loadConfig({ SLUICE_HEAP_GROWTH_PERCENT: '40' });
  t.equal(heapGrowthFor(set, { dispatcher: false }), 40);
  t.equal(heapGrowthFor(set, { dispatcher: true }), 40);
  t.equal(heapGrowthFor(loadConfig({ SLUICE_HEAP_GROWTH_PERCENT: '0' }), { dispatcher: true }), 0, "0: V8's own");
});

t.test('SLUICE_HEAP_GROWTH_PERCENT out of range is refused by name', async (t) => {
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

t.test('the public development key serves loopback only and opens no peer port', async (t) => {
  t.equal(loadConfig({}).host, '127.0.0.1', 'without SLUICE_MASTER_KEY the public listener is on loopback');
  const key = 'k'.repeat(32);
  t.equal(loadConfig({ SLUICE_MASTER_KEY: key }).host, '0.0.0.0', 'with one, on every address');
  t.equal(loadConfig({ SLUICE_MASTER_KEY: key, SLUICE_PEER_PORT: '7070' }).peerHost, '127.0.0.1');
  t.throws(() => loadConfig({ SLUICE_PEER_PORT: '7070' }), /SLUICE_PEER_PORT.*development key/);
  t.throws(() => loadConfig({ SLUICE_HOST: '0.0.0.0' }), /SLUICE_HOST.*development key/);
  t.throws(() => loadConfig({ SLUICE_HOST: '10.1.2.3' }), /SLUICE_HOST/);
  t.equal(loadConfig({ SLUICE_HOST: '127.0.0.2' }).host, '127.0.0.2', 'any loopback address is fine');
  const dev = { SLUICE_DEV_ALLOW_DEVELOPMENT_KEY: 'true', SLUICE_HOST: '0.0.0.0', SLUICE_PEER_PORT: '7070' };
  t.equal(loadConfig(dev).peerPort, 7070, 'a development setup says so');
  t.throws(() => loadConfig({ ...dev, NODE_ENV: 'production' }), /SLUICE_(DEV_ALLOW_DEVELOPMENT_KEY|MASTER_KEY)/);
});
