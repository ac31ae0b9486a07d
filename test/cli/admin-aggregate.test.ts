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
