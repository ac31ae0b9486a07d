// The view of one endpoint in the console: its settings and actions (endpoints.js), and its recent
// deliveries, each with its attempts on a timeline and in a table; recovery of a window (recovery.js).

import { $, fill, h, s, table, when } from './dom.js';
import { loadEventTypes } from './endpoint-form.js';
import { endpointPanel } from './endpoints.js';
import { show } from './nav.js';
import { recoverySection } from './recovery.js';
import { api } from './session.js';

export async function renderEndpoint(id) {
  const root = $('view-endpoint');
  const [{ data: ep }, { data: attempts }, types] = await Promise.all([
    api('GET', `/v1/webhooks/endpoints/${encodeURIComponent(id)}`),
    api('GET', `/v1/webhooks/endpoints/${encodeURIComponent(id)}/attempts?limit=1000`),
    loadEventTypes(),
  ]);
  const byDelivery = new Map();
  for (const a of attempts.data) {
    if (!byDelivery.has(a.delivery_id)) byDelivery.set(a.delivery_id, []);
    byDelivery.get(a.delivery_id).push(a);
  }
  const back = h('button', { type: 'button', class: 'link' }, '← all endpoints');
  back.addEventListener('click', () => show('endpoints'));
  const deliveries = [...byDelivery.entries()]
    .slice(0, 20)
    .map(([deliveryId, list]) => deliveryCard(deliveryId, list.slice().reverse()));
  fill(
    root,
    back,
    endpointPanel(ep, types),
    recoverySection(ep),
    h('h3', {}, `Recent deliveries (${byDelivery.size}; the newest ${attempts.data.length} attempts)`),
    deliveries.length === 0 ? h('p', { class: 'subtle' }, 'No attempts recorded yet.') : deliveries,
  );
}

function deliveryCard(deliveryId, list) {
  const first = list[0];
  const lastA = list[list.length - 1];
  return h(
    'div',
    { class: 'delivery', dataset: { delivery: deliveryId } },
    h(
      'div',
      {},
      h('strong', {}, first.event_type),
      ' ',
      h('span', { class: 'mono' }, first.event_id),
      ' · ',
      h('span', { class: 'mono subtle' }, deliveryId),
      ' · ',
      h(
        'span',
        { class: lastA.ok ? 'ok' : 'bad' },
        lastA.outcome === 'delivered' ? 'delivered' : lastA.outcome === 'dead-letter' ? 'dead-lettered' : 'retrying',
      ),
    ),
    timeline(list),
    table(
      { class: 'attempts' },
      ['#', 'At', 'Status', 'Latency', 'Error', 'Then'],
      list.map((a) =>
        h(
          'tr',
          { class: 'attempt' },
          h('td', {}, a.attempt),
          h('td', {}, when(a.at)),
          h('td', { class: a.ok ? 'ok status' : 'bad status' }, a.status ?? '—'),
          h('td', {}, `${a.duration_ms} ms`),
          h('td', {}, a.error ?? ''),
          h('td', {}, a.outcome),
        ),
      ),
    ),
  );
}

/** The attempts of one delivery as dots on a time axis, each labelled with its status and latency. */
function timeline(list) {
  const W = 1000,
    H = 70,
    pad = 40;
  const t0 = Date.parse(list[0].at);
  const span = Math.max(1, Date.parse(list[list.length - 1].at) - t0);
  const x = (a) => (list.length === 1 ? W / 2 : pad + ((Date.parse(a.at) - t0) / span) * (W - 2 * pad));
  const svg = s('svg', {
    class: 'timeline',
    viewBox: `0 0 ${W} ${H}`,
    role: 'img',
    'aria-label': `timeline of ${list.length} attempts`,
  });
  svg.append(s('line', { x1: pad, x2: W - pad, y1: 30, y2: 30, stroke: '#cfd4dc', 'stroke-width': 2 }));
  let labelledAt = -Infinity;
  list.forEach((a, i) => {
    const cx = x(a);
    svg.append(
      s(
        'circle',
        { cx, cy: 30, r: 7, fill: a.ok ? '#1a7f4b' : '#c0392b' },
        s(
          'title',
          {},
          `attempt ${a.attempt} at ${when(a.at)}: ${a.status ?? 'no answer'} in ${a.duration_ms} ms` +
            `${a.error ? ` (${a.error})` : ''}`,
        ),
      ),
    );
    // Labels only where they do not overlap (the last one always); every dot has its tooltip.
    const last = i === list.length - 1;
    if (cx - labelledAt < 90 && !last) return;
    if (last && cx - labelledAt < 90 && labelledAt > -Infinity) return;
    labelledAt = cx;
    svg.append(
      s(
        'text',
        { x: cx, y: 56, 'text-anchor': 'middle', 'font-size': 12, fill: '#475467' },
        `#${a.attempt} ${a.status ?? '×'} · ${a.duration_ms} ms`,
      ),
    );
  });
  svg.append(s('text', { x: pad, y: 14, 'font-size': 11, fill: '#667085' }, when(list[0].at)));
  if (list.length > 1)
    svg.append(
      s('text', { x: W - pad, y: 14, 'font-size': 11, fill: '#667085', 'text-anchor': 'end' }, `+${fmtSpan(span)}`),
    );
  return svg;
}

function fmtSpan(ms) {
  return ms >= 3600_000
    ? `${(ms / 3600_000).toFixed(1)} h`
    : ms >= 60_000
      ? `${(ms / 60_000).toFixed(1)} min`
      : ms >= 1000
        ? `${(ms / 1000).toFixed(1)} s`
        : `${ms} ms`;
}
