// The endpoints view of the console: every endpoint with its state, success rate and last error over
// the last hour, re-verifying a PENDING one, and (endpoints.js) registering a new one.

import { $, fill, h, pct, stateBadge, table, when } from './dom.js';
import { pausedBadge, registerSection } from './endpoints.js';
import { show } from './nav.js';
import { api, report, writeButton } from './session.js';

/** The tenant's endpoints as last loaded (the DLQ and activity views offer them as filters). */
let known = [];

/** Every endpoint of the tenant, page by page (10,000 at most); kept for the filters. */
async function loadEndpoints() {
  const all = [];
  let cursor = null;
  do {
    const { data } = await api(
      'GET',
      `/v1/webhooks/endpoints?limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
    );
    all.push(...data.data);
    cursor = data.next_cursor;
  } while (cursor && all.length < 10_000);
  known = all;
  return all;
}

/** The endpoints as last loaded, loaded first when they never were. */
async function knownEndpoints() {
  return known.length === 0 ? loadEndpoints() : known;
}

/** A filter's endpoint choice: "all endpoints", then each known one (`selected` chosen). */
export async function endpointSelect(id, selected = '') {
  const endpoints = await knownEndpoints();
  return h(
    'select',
    { id },
    h('option', { value: '' }, 'all endpoints'),
    endpoints.map((e) => h('option', { value: e.id, selected: e.id === selected }, `${e.id} (${e.url})`)),
  );
}

export async function renderEndpoints() {
  const root = $('view-endpoints');
  const [endpoints, { data: stats }] = await Promise.all([loadEndpoints(), api('GET', '/v1/webhooks/stats')]);
  const rates = new Map(stats.endpoints.map((e) => [e.endpoint_id, e]));
  const rows = endpoints.map((ep) => {
    const r = rates.get(ep.id);
    const err = r?.last_error;
    const verify =
      ep.state === 'PENDING' ? writeButton('Re-verify', { class: 'verify', dataset: { id: ep.id } }) : null;
    return h(
      'tr',
      { dataset: { endpoint: ep.id } },
      h(
        'td',
        {},
        h('button', { type: 'button', class: 'link mono open', dataset: { id: ep.id } }, ep.id),
        h('div', { class: 'subtle' }, ep.url),
        ep.description ? h('div', { class: 'subtle' }, ep.description) : null,
      ),
      h('td', {}, stateBadge(ep.state), ' ', pausedBadge(ep), verify ? h('div', {}, verify) : null),
      h(
        'td',
        { class: r?.success_rate === null || r === undefined ? '' : r.success_rate >= 0.99 ? 'ok' : 'bad' },
        pct(r?.success_rate),
        h('div', { class: 'subtle' }, r ? `${r.attempts} attempts, last hour` : 'no attempts yet'),
      ),
      h(
        'td',
        { class: 'last-error' },
        err
          ? [
              h('span', { class: 'bad' }, err.status ?? 'no answer'),
              ' ',
              err.error ?? '',
              h('div', { class: 'subtle' }, when(err.at)),
            ]
          : h('span', { class: 'subtle' }, 'none'),
      ),
    );
  });
  fill(
    root,
    h('h2', {}, 'Endpoints'),
    registerSection(renderEndpoints),
    endpoints.length === 0
      ? h('p', { class: 'subtle' }, 'This tenant has no webhook endpoints.')
      : table({ id: 'endpoints' }, ['Endpoint', 'State', 'Success rate (1 h)', 'Last error'], rows),
    h('p', { id: 'verify-result', role: 'status' }),
  );
  for (const b of root.querySelectorAll('button.open'))
    b.addEventListener('click', () => show('endpoint', b.dataset.id));
  for (const b of root.querySelectorAll('button.verify'))
    b.addEventListener('click', () => void reverify(b).catch(report));
}

async function reverify(button) {
  button.disabled = true;
  $('verify-result').textContent = `Sending the verification ping to ${button.dataset.id}…`;
  const { data, headers } = await api('POST', `/v1/webhooks/endpoints/${encodeURIComponent(button.dataset.id)}/verify`);
  const result = headers.get('sluice-ping-result');
  const detail = [headers.get('sluice-ping-status'), headers.get('sluice-ping-error')].filter(Boolean).join(' ');
  const outcome = result === 'ok' ? 'answered 200' : `failed${detail ? ` (${detail})` : ''}`;
  // The outcome is shown once the table shows it too (the re-render replaces this status line).
  await renderEndpoints();
  $('verify-result').textContent = `Ping ${outcome}: ${data.id} is now ${data.state}.`;
}
