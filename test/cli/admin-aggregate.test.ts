import t from 'tap';
import { mergeMetrics } from '../../cli/admin-aggregate.ts';

t.test('series of the same name and labels are summed; comments kept once, in order', async (t) => {
  const a = [
    '# HELP sluice_x_total X.',
    '# TYPE sluice_x_total counter',
    'sluice_x_total{outcome="ok"} 3',
    'sluice_x_total{outcome="no"} 1',
    '# TYPE sluice_h histogram',
    'sluice_h_bucket{le="0.1"} 2',
    'sluice_h_count 2',
    'process_start_time_seconds 100',
    '',
  ].join('\n');
  const b = [
    '# HELP sluice_x_total X.',
    '# TYPE sluice_x_total counter',
    'sluice_x_total{outcome="ok"} 4',
    '# TYPE sluice_h histogram',
    'sluice_h_bucket{le="0.1"} 5',
    'sluice_h_count 7',
    'sluice_only_b 1.5',
    'process_start_time_seconds 90',
  ].join('\n');
  t.equal(
    mergeMetrics([a, b]),
    [
      '# HELP sluice_x_total X.',
      '# TYPE sluice_x_total counter',
      'sluice_x_total{outcome="ok"} 7',
      'sluice_x_total{outcome="no"} 1',
      '# TYPE sluice_h histogram',
      'sluice_h_bucket{le="0.1"} 7',
      'sluice_h_count 9',
      'process_start_time_seconds 100',
      'sluice_only_b 1.5',
      '',
    ].join('\n'),
  );
});

t.test("a family's lines stay together, whichever page brought a series of it", async (t) => {
  const live = ['# HELP sluice_x_total X.', '# TYPE sluice_x_total counter', 'sluice_x_total{outcome="ok"} 1'];
  live.push('# TYPE sluice_h histogram', 'sluice_h_bucket{le="+Inf"} 1', 'sluice_h_count 1');
  // A retired worker's counters, without comment lines, with series the live page lacks.
  const retired = ['sluice_x_total{outcome="retry"} 2', 'sluice_h_sum 0.5', 'sluice_new_total 3'];
  t.equal(
    mergeMetrics([live.join('\n'), retired.join('\n')]),
    [
      '# HELP sluice_x_total X.',
      '# TYPE sluice_x_total counter',
      'sluice_x_total{outcome="ok"} 1',
      'sluice_x_total{outcome="retry"} 2',
      '# TYPE sluice_h histogram',
      'sluice_h_bucket{le="+Inf"} 1',
      'sluice_h_count 1',
      'sluice_h_sum 0.5',
      'sluice_new_total 3',
      '',
    ].join('\n'),
  );
});

t.test("a retired worker's page keeps its counters and histograms, not its gauges", async (t) => {
  const { countersOnly } = await import('../../cli/admin-aggregate.ts');
  const page = [
    '# HELP sluice_x_total X.',
    '# TYPE sluice_x_total counter',
    'sluice_x_total{outcome="ok"} 3',
    '# TYPE sluice_h histogram',
    'sluice_h_bucket{le="0.1"} 2',
    'sluice_h_sum 0.05',
    'sluice_h_count 2',
    '# TYPE sluice_inflight gauge',
    'sluice_inflight 4',
    '# TYPE process_start_time_seconds gauge',
    'process_start_time_seconds 100',
    'untyped_series 1',
  ].join('\n');
  t.same(countersOnly(page).split('\n'), [
    'sluice_x_total{outcome="ok"} 3',
    'sluice_h_bucket{le="0.1"} 2',
    'sluice_h_sum 0.05',
    'sluice_h_count 2',
  ]);
  // Summed with a live worker's page, the counter keeps what the retired one counted.
  const live = [
    '# TYPE sluice_x_total counter',
    'sluice_x_total{outcome="ok"} 5',
    '# TYPE sluice_inflight gauge',
    'sluice_inflight 1',
  ];
  t.match(mergeMetrics([live.join('\n'), countersOnly(page)]), /^sluice_x_total\{outcome="ok"\} 8$/m);
  t.match(
    mergeMetrics([live.join('\n'), countersOnly(page)]),
    /^sluice_inflight 1$/m,
    'a gauge is the live workers alone',
  );
});

t.test("the node's page: live workers scraped, a retiring one's last page when it no longer answers", async (t) => {
  const { createServer } = await import('node:http');
  const { startAggregateAdmin } = await import('../../cli/admin-aggregate.ts');
  const { freePorts } = await import('../../core/net/free-port.ts');
  const base = await freePorts(3);
  const counts = [5, 7];
  const workers = counts.map((_, i) => {
    const s = createServer((_req, res) => {
      res.end(`# TYPE sluice_x_total counter\nsluice_x_total ${counts[i]}\n`);
    });
    return new Promise<typeof s>((r) => s.listen(base + 1 + i, '127.0.0.1', () => r(s)));
  });
  const [w0, w1] = await Promise.all(workers);
  let members = {
    health: [base + 1, base + 2],
    metrics: [
      { port: base + 1, retiring: false },
      { port: base + 2, retiring: false },
    ],
    extra: ['sluice_x_total 100'],
  };
  const node = await startAggregateAdmin('127.0.0.1', base, () => members);
  t.teardown(async () => {
    await node.close();
    w0.close();
  });
  const total = async () => {
    const res = await fetch(`http://127.0.0.1:${base}/metrics`);
    return { status: res.status, x: Number(/^sluice_x_total (\d+)$/m.exec(await res.text())?.[1]) };
  };
  t.same(await total(), { status: 200, x: 112 }, 'both workers and the extra page');
  // Worker 1 retires: its admin port closes before its final page comes.
  await new Promise((r) => w1.close(r));
  members = { ...members, health: [base + 1], metrics: [members.metrics[0], { port: base + 2, retiring: true }] };
  t.same(await total(), { status: 200, x: 112 }, 'its last scraped page stands in');
  t.match(node.lastPage(base + 2), /sluice_x_total 7/);
  node.forget(base + 2);
  t.equal(node.lastPage(base + 2), undefined, 'forgotten once its worker is gone');
  members = { ...members, metrics: [members.metrics[0], { port: base + 2, retiring: false }] };
  t.equal((await total()).status, 503, 'a serving worker that does not answer makes the page unavailable');
  const health = await fetch(`http://127.0.0.1:${base}/readyz`);
  t.equal(health.status, 200, 'health asks only the workers that serve');
  members = { ...members, health: [] };
  t.equal((await fetch(`http://127.0.0.1:${base}/readyz`)).status, 503, 'and with none the node is not ready');
});
