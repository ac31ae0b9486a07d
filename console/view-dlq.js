// The dead-letter view of the console: entries filtered by endpoint and event type, with their
// expiry; replay one, the selected or all matching, then follow each replay to its delivery.

import { $, fill, h, relative, table, when } from './dom.js';
import { api, canWrite, every, report, writeButton } from './session.js';
import { endpointSelect } from './view-endpoints.js';

const dlq = { filter: { endpoint_id: '', event_type: '' }, entries: [], cursor: null, watching: new Map() };

export async function renderDlq() {
  const root = $('view-dlq');
  const epSelect = await endpointSelect('dlq-endpoint', dlq.filter.endpoint_id);
  const typeInput = h('input', {
    id: 'dlq-type',
    placeholder: 'e.g. pipeline.failed',
    value: dlq.filter.event_type,
    maxlength: 65,
  });
  const apply = h('button', { type: 'button', id: 'dlq-apply' }, 'Apply filters');
  apply.addEventListener('click', () => {
    dlq.filter = { endpoint_id: epSelect.value, event_type: typeInput.value.trim() };
    void loadDlq(true).catch(report);
  });
  const selected = writeButton('Replay selected', { id: 'replay-selected', class: 'primary' });
  const matching = writeButton('Replay all matching the filters', { id: 'replay-matching' });
  fill(
    root,
    h('h2', {}, 'Dead letters'),
    h(
      'p',
      { class: 'subtle' },
      'Deliveries that failed 17 times over 72 hours. An entry expires 7 days after it was dead-lettered; ' +
        'a replay delivers it again with a fresh attempt count.',
    ),
    h(
      'div',
      { class: 'filters' },
      h('label', {}, 'Endpoint', epSelect),
      h('label', {}, 'Event type', typeInput),
      apply,
    ),
    h(
      'div',
      { class: 'bar' },
      selected,
      matching,
      h('progress', { id: 'replay-progress', max: 1, value: 0, hidden: true }),
      h('span', { id: 'replay-status', role: 'status' }),
    ),
    h('div', { id: 'dlq-table' }),
    h('button', { type: 'button', id: 'dlq-more', hidden: true }, 'Load more'),
  );
  root.querySelector('#replay-selected')?.addEventListener('click', () => void replaySelected().catch(report));
  root.querySelector('#replay-matching')?.addEventListener('click', () => void replayMatching().catch(report));
  $('dlq-more').addEventListener('click', () => void loadDlq(false).catch(report));
  await loadDlq(true);
  every(1000, watchReplays);
}

async function loadDlq(fresh) {
  if (fresh) [dlq.entries, dlq.cursor] = [[], null];
  const q = new URLSearchParams({ limit: '100' });
  if (dlq.filter.endpoint_id) q.set('endpoint_id', dlq.filter.endpoint_id);
  if (dlq.filter.event_type) q.set('event_type', dlq.filter.event_type);
  if (dlq.cursor) q.set('cursor', dlq.cursor);
  const { data } = await api('GET', `/v1/webhooks/dlq?${q}`);
  dlq.entries.push(...data.data);
  dlq.cursor = data.next_cursor;
  $('dlq-more').hidden = !dlq.cursor;
  drawDlq();
}

function drawDlq() {
  const rows = dlq.entries.map((e) => {
    const watched = dlq.watching.get(e.id);
    const replay = writeButton('Replay', { class: 'replay-one', dataset: { id: e.id } });
    return h(
      'tr',
      { class: 'dlq-entry', dataset: { id: e.id, event: e.event_id } },
      h(
        'td',
        {},
        h('input', {
          type: 'checkbox',
          class: 'pick',
          value: e.id,
          disabled: !canWrite() || Boolean(watched),
          'aria-label': `select ${e.id}`,
        }),
      ),
      h('td', {}, h('strong', {}, e.event_type), h('div', { class: 'mono subtle' }, e.event_id)),
      h('td', { class: 'mono' }, e.endpoint_id),
      h(
        'td',
        {},
        `${e.attempts} attempts`,
        h(
          'div',
          { class: 'bad' },
          [e.last_status ?? 'no answer', e.last_error].filter((x) => x !== null && x !== '').join(' · '),
        ),
      ),
      h('td', {}, when(e.dead_lettered_at)),
      h('td', { class: 'expires' }, when(e.expires_at), h('div', { class: 'subtle' }, relative(e.expires_at))),
      h(
        'td',
        { class: 'replay-cell' },
        watched ? h('span', { class: `replay-state ${watched.done ? 'ok' : ''}` }, watched.text) : replay,
      ),
    );
  });
  fill(
    $('dlq-table'),
    dlq.entries.length === 0
      ? h('p', { class: 'subtle', id: 'dlq-empty' }, 'No dead letters match.')
      : table({ id: 'dlq' }, ['', 'Event', 'Endpoint', 'Last failure', 'Dead-lettered', 'Expires', ''], rows),
  );
  for (const b of document.querySelectorAll('button.replay-one'))
    b.addEventListener('click', () => void replayIds([b.dataset.id]).catch(report));
}

async function replayIds(ids) {
  const progress = $('replay-progress');
  const status = $('replay-status');
  progress.hidden = false;
  progress.max = ids.length;
  progress.value = 0;
  const started = Date.now();
  let replayed = 0;
  for (let i = 0; i < ids.length; i += 100) {
    const chunk = ids.slice(i, i + 100);
    const { data } = await api('POST', '/v1/webhooks/dlq/replay', { ids: chunk });
    replayed += data.replayed;
    for (const id of chunk) {
      const e = dlq.entries.find((x) => x.id === id);
      if (e)
        dlq.watching.set(id, {
          entry: e,
          since: started - 1000,
          text: 'replayed · waiting for delivery…',
          done: false,
        });
    }
    progress.value = Math.min(ids.length, i + chunk.length);
    status.textContent = `replayed ${replayed} of ${ids.length}`;
    drawDlq();
  }
  status.textContent = `replayed ${replayed} of ${ids.length}; watching their deliveries`;
}

async function replaySelected() {
  const ids = [...document.querySelectorAll('input.pick:checked')].map((c) => c.value);
  if (ids.length === 0) {
    $('replay-status').textContent = 'Select entries first.';
    return;
  }
  await replayIds(ids);
}

async function replayMatching() {
  const filter = {};
  if (dlq.filter.endpoint_id) filter.endpoint_id = dlq.filter.endpoint_id;
  if (dlq.filter.event_type) filter.event_type = dlq.filter.event_type;
  $('replay-progress').hidden = false;
  $('replay-progress').removeAttribute('value'); // indeterminate: the server counts and replays them
  $('replay-status').textContent = 'replaying every entry that matches…';
  const { data } = await api('POST', '/v1/webhooks/dlq/replay', filter);
  $('replay-progress').max = 1;
  $('replay-progress').value = 1;
  $('replay-status').textContent = `replayed ${data.replayed} entries`;
  await loadDlq(true);
}

/** Follows replayed entries through the attempt history until each is delivered (or fails again). */
async function watchReplays() {
  const open = [...dlq.watching.entries()].filter(([, w]) => !w.done).slice(0, 20);
  if (open.length === 0) return;
  let changed = false;
  await Promise.all(
    open.map(async ([, w]) => {
      const q = new URLSearchParams({ event_id: w.entry.event_id, limit: '20' });
      const { data } = await api(
        'GET',
        `/v1/webhooks/endpoints/${encodeURIComponent(w.entry.endpoint_id)}/attempts?${q}`,
      );
      const recent = data.data.filter((a) => Date.parse(a.at) >= w.since);
      const ok = recent.find((a) => a.ok);
      const text = ok
        ? `delivered · ${ok.status} in ${ok.duration_ms} ms`
        : recent.length > 0
          ? `attempt ${recent[0].attempt} failed (${recent[0].status ?? recent[0].error}) · retrying`
          : w.text;
      if (text !== w.text) [w.text, w.done, changed] = [text, Boolean(ok), true];
    }),
  );
  if (changed) drawDlq();
}
