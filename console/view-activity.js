// The activity view of the console: attempts and latency per minute over the last hour, for all
// endpoints or one, redrawn every 10 s.

import { $, fill, h, pct, s } from './dom.js';
import { api, every, report } from './session.js';
import { endpointSelect } from './view-endpoints.js';

export async function renderActivity() {
  const root = $('view-activity');
  const select = await endpointSelect('activity-endpoint');
  const charts = h('div', { id: 'charts' });
  fill(
    root,
    h('h2', {}, 'Activity, last hour'),
    h('div', { class: 'filters' }, h('label', {}, 'Endpoint', select)),
    charts,
  );
  const draw = async () => {
    const { data } = await api(
      'GET',
      `/v1/webhooks/stats${select.value ? `?endpoint_id=${encodeURIComponent(select.value)}` : ''}`,
    );
    const t = data.totals;
    fill(
      charts,
      h(
        'p',
        { id: 'activity-totals' },
        `${t.attempts} attempts · ${t.delivered} delivered · ${t.failed} failed · success rate ${pct(t.success_rate)}`,
      ),
      h('h3', {}, 'Attempts per minute'),
      rateChart(data.series),
      legend(['sw-ok', 'delivered'], ['sw-bad', 'failed']),
      h('h3', {}, 'Latency per minute (ms)'),
      latencyChart(data.series),
      legend(['sw-avg', 'average'], ['sw-max', 'maximum']),
    );
  };
  select.addEventListener('change', () => void draw().catch(report));
  await draw();
  every(10_000, draw);
}

/** A chart's legend: a swatch of each colour class, with its label. */
function legend(...keys) {
  return h(
    'div',
    { class: 'legend' },
    keys.map(([swatch, label]) => h('span', {}, h('span', { class: `swatch ${swatch}` }), label)),
  );
}

function frame(series, max, unit) {
  const W = 1000,
    H = 220,
    L = 50,
    R = 10,
    T = 10,
    B = 28;
  const svg = s('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img' });
  const x = (i) => L + (i / Math.max(1, series.length - 1)) * (W - L - R);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  for (const f of [0, 0.5, 1]) {
    svg.append(s('line', { x1: L, x2: W - R, y1: y(max * f), y2: y(max * f), stroke: '#e3e6ec' }));
    svg.append(
      s(
        'text',
        { x: L - 6, y: y(max * f) + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#667085' },
        `${Math.round(max * f)}${unit}`,
      ),
    );
  }
  series.forEach((p, i) => {
    if (i % 10 === 0 || i === series.length - 1)
      svg.append(
        s(
          'text',
          { x: x(i), y: H - 8, 'text-anchor': 'middle', 'font-size': 11, fill: '#667085' },
          p.minute.slice(11, 16),
        ),
      );
  });
  return { svg, x, y, W, L, R };
}

function rateChart(series) {
  const max = Math.max(1, ...series.map((p) => p.attempts));
  const { svg, x, y, W, L, R } = frame(series, max, '');
  const w = Math.max(2, ((W - L - R) / series.length) * 0.7);
  series.forEach((p, i) => {
    // Only bars with a height: a zero-height rect is an element no one can see or point at.
    if (p.delivered > 0) {
      svg.append(
        s(
          'rect',
          { x: x(i) - w / 2, y: y(p.delivered), width: w, height: y(0) - y(p.delivered), fill: '#1a7f4b' },
          s('title', {}, `${p.minute.slice(11, 16)}: ${p.delivered} delivered, ${p.failed} failed`),
        ),
      );
    }
    if (p.attempts > p.delivered) {
      svg.append(
        s(
          'rect',
          { x: x(i) - w / 2, y: y(p.attempts), width: w, height: y(p.delivered) - y(p.attempts), fill: '#c0392b' },
          s('title', {}, `${p.minute.slice(11, 16)}: ${p.delivered} delivered, ${p.failed} failed`),
        ),
      );
    }
  });
  svg.setAttribute('aria-label', 'attempts per minute, delivered and failed');
  svg.id = 'rate-chart';
  return svg;
}

function latencyChart(series) {
  const max = Math.max(10, ...series.map((p) => p.latency_max_ms ?? 0));
  const { svg, x, y } = frame(series, max, '');
  for (const [key, color] of [
    ['latency_max_ms', '#9aa9d8'],
    ['latency_avg_ms', '#2f5bd3'],
  ]) {
    const pts = series
      .map((p, i) => (p[key] === null ? null : `${x(i).toFixed(1)},${y(p[key]).toFixed(1)}`))
      .filter(Boolean);
    if (pts.length > 1)
      svg.append(s('polyline', { points: pts.join(' '), fill: 'none', stroke: color, 'stroke-width': 2 }));
    for (const pt of pts) {
      const [cx, cy] = pt.split(',');
      svg.append(s('circle', { cx, cy, r: 3, fill: color }));
    }
  }
  svg.setAttribute('aria-label', 'average and maximum latency per minute');
  svg.id = 'latency-chart';
  return svg;
}
