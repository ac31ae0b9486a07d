// The Sluice tenant console (docs/console.md). Plain JavaScript, no build step, no inline code
// (the page's Content-Security-Policy allows scripts from this origin only). It signs in with the
// tenant's client credentials and uses the public API; the token lives in this module's memory
// only (never localStorage, sessionStorage or cookies). Every value from the API reaches the page
// as text (textContent), never as markup. Endpoint management (register, edit, pause, rotate,
// delete, test send) is in endpoints.js.

import { configure, endpointPanel, loadEventTypes, pausedBadge, registerSection } from './endpoints.js';

const session = { token: null, scopes: new Set(), tenant: '', expiresAt: 0 };
const ui = { view: 'endpoints', endpoints: [], timers: new Set() };
const WRITE = 'webhooks:write';
const $ = (id) => document.getElementById(id);
const SVG = 'http://www.w3.org/2000/svg';

/** An element with attributes (on* never used) and children (strings become text nodes). */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false || v === null || v === undefined) continue;
    if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat())
    if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}

/** Replaces an element's children; arrays among them are flattened, empty values skipped. */
function fill(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

const when = (iso) => (iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '—');
const pct = (r) => (r === null || r === undefined ? '—' : `${(r * 100).toFixed(r === 1 || r === 0 ? 0 : 1)} %`);
const canWrite = () => session.scopes.has(WRITE);
const whyNot = () => `needs the ${WRITE} scope; this token carries: ${[...session.scopes].join(' ') || '(none)'}`;

function relative(iso) {
  const ms = Date.parse(iso) - Date.now();
  const abs = Math.abs(ms);
  const [n, unit] =
    abs >= 86400_000
      ? [abs / 86400_000, 'd']
      : abs >= 3600_000
        ? [abs / 3600_000, 'h']
        : abs >= 60_000
          ? [abs / 60_000, 'min']
          : [abs / 1000, 's'];
  return ms >= 0 ? `in ${Math.round(n)} ${unit}` : `${Math.round(n)} ${unit} ago`;
}

/** A button that is disabled, saying why, when the token lacks webhooks:write. */
function writeButton(label, attrs = {}) {
  const ok = canWrite();
  const b = h('button', { type: 'button', ...attrs, disabled: !ok, title: ok ? null : whyNot() }, label);
  return ok ? b : h('span', {}, b, h('span', { class: 'why' }, `${label} ${whyNot()}`));
}

class ApiError extends Error {
  constructor(status, body) {
    super(body?.detail ?? body?.error_description ?? `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

async function api(method, path, body) {
  if (!session.token || Date.now() >= session.expiresAt)
    return signOut('Your session ended (tokens last 15 minutes): sign in again.');
  const headers = { authorization: `Bearer ${session.token}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: 'no-store',
    credentials: 'omit',
  });
  const text = await res.text();
  const data = text ? JSON.parse(text) : null;
  if (res.status === 401) signOut(`Signed out: ${data?.detail ?? 'the token was refused'}`);
  if (!res.ok) throw new ApiError(res.status, data);
  return { data, headers: res.headers };
}

// ---- sign in / out ----

async function signIn(ev) {
  ev.preventDefault();
  const form = {
    grant_type: 'client_credentials',
    client_id: $('client-id').value.trim(),
    client_secret: $('client-secret').value,
  };
  const scope = $('scope').value.trim();
  if (scope) form.scope = scope;
  $('signin-error').textContent = '';
  $('signin-button').disabled = true;
  try {
    const res = await fetch('/v1/auth/token', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(form),
      cache: 'no-store',
      credentials: 'omit',
    });
    const body = await res.json();
    if (!res.ok) throw new Error(body.error_description ?? body.error ?? `HTTP ${res.status}`);
    const claims = JSON.parse(atob(body.access_token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/')));
    Object.assign(session, {
      token: body.access_token,
      scopes: new Set(
        String(body.scope ?? '')
          .split(' ')
          .filter(Boolean),
      ),
      tenant: claims.tenant_id ?? '',
      expiresAt: Date.now() + body.expires_in * 1000,
    });
    $('client-secret').value = ''; // the secret is not kept either
    $('signin').hidden = true;
    $('app').hidden = false;
    $('signout').hidden = false;
    const hooks = [...session.scopes].filter((x) => x.startsWith('webhooks:'));
    const more = session.scopes.size - hooks.length;
    const moreText = more > 0 ? ` (+${more} more scopes)` : '';
    $('who').textContent =
      `tenant ${session.tenant} · ${form.client_id} · ${hooks.join(' ') || 'no webhooks scope'}${moreText}`;
    show('endpoints');
  } catch (err) {
    $('signin-error').textContent = `Sign-in failed: ${err.message}`;
  } finally {
    $('signin-button').disabled = false;
  }
}

function signOut(message = '') {
  Object.assign(session, { token: null, scopes: new Set(), tenant: '', expiresAt: 0 });
  stopTimers();
  $('app').hidden = true;
  $('signout').hidden = true;
  $('who').textContent = '';
  $('signin').hidden = false;
  $('signin-error').textContent = message;
  return new Promise(() => {}); // the caller's work ends here
}

function stopTimers() {
  for (const t of ui.timers) clearInterval(t);
  ui.timers.clear();
}

function every(ms, fn) {
  const t = setInterval(() => void fn().catch(report), ms);
  ui.timers.add(t);
}

function report(err) {
  const n = $('notice');
  n.hidden = false;
  n.textContent =
    err instanceof ApiError ? `The API answered ${err.status}: ${err.message}` : String(err?.message ?? err);
}

// ---- navigation ----

function show(view, arg) {
  stopTimers();
  ui.view = view;
  $('notice').hidden = true;
  for (const b of document.querySelectorAll('.tab'))
    b.classList.toggle('active', b.dataset.view === (view === 'endpoint' ? 'endpoints' : view));
  for (const v of ['endpoints', 'endpoint', 'dlq', 'activity']) $(`view-${v}`).hidden = v !== view;
  const render = { endpoints: renderEndpoints, endpoint: renderEndpoint, dlq: renderDlq, activity: renderActivity }[
    view
  ];
  void render(arg).catch(report);
}

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
  ui.endpoints = all;
  return all;
}

// ---- endpoints ----

function stateBadge(state) {
  const cls = `state state-${String(state)
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '')}`;
  return h('span', { class: cls, dataset: { state } }, state);
}

async function renderEndpoints() {
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
      : h(
          'table',
          { id: 'endpoints' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              h('th', {}, 'Endpoint'),
              h('th', {}, 'State'),
              h('th', {}, 'Success rate (1 h)'),
              h('th', {}, 'Last error'),
            ),
          ),
          h('tbody', {}, rows),
        ),
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

// ---- one endpoint: its deliveries' attempts on a timeline ----

async function renderEndpoint(id) {
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
    h(
      'table',
      { class: 'attempts' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', {}, '#'),
          h('th', {}, 'At'),
          h('th', {}, 'Status'),
          h('th', {}, 'Latency'),
          h('th', {}, 'Error'),
          h('th', {}, 'Then'),
        ),
      ),
      h(
        'tbody',
        {},
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

// ---- the DLQ ----

const dlq = { filter: { endpoint_id: '', event_type: '' }, entries: [], cursor: null, watching: new Map() };

async function renderDlq() {
  const root = $('view-dlq');
  if (ui.endpoints.length === 0) await loadEndpoints();
  const epSelect = h(
    'select',
    { id: 'dlq-endpoint' },
    h('option', { value: '' }, 'all endpoints'),
    ui.endpoints.map((e) =>
      h('option', { value: e.id, selected: e.id === dlq.filter.endpoint_id }, `${e.id} (${e.url})`),
    ),
  );
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
      : h(
          'table',
          { id: 'dlq' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              h('th', {}, ''),
              h('th', {}, 'Event'),
              h('th', {}, 'Endpoint'),
              h('th', {}, 'Last failure'),
              h('th', {}, 'Dead-lettered'),
              h('th', {}, 'Expires'),
              h('th', {}, ''),
            ),
          ),
          h('tbody', {}, rows),
        ),
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

// ---- activity: delivery rate and latency over the last hour ----

async function renderActivity() {
  const root = $('view-activity');
  if (ui.endpoints.length === 0) await loadEndpoints();
  const select = h(
    'select',
    { id: 'activity-endpoint' },
    h('option', { value: '' }, 'all endpoints'),
    ui.endpoints.map((e) => h('option', { value: e.id }, `${e.id} (${e.url})`)),
  );
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
      h(
        'div',
        { class: 'legend' },
        h('span', {}, h('span', { class: 'swatch sw-ok' }), 'delivered'),
        h('span', {}, h('span', { class: 'swatch sw-bad' }), 'failed'),
      ),
      h('h3', {}, 'Latency per minute (ms)'),
      latencyChart(data.series),
      h(
        'div',
        { class: 'legend' },
        h('span', {}, h('span', { class: 'swatch sw-avg' }), 'average'),
        h('span', {}, h('span', { class: 'swatch sw-max' }), 'maximum'),
      ),
    );
  };
  select.addEventListener('change', () => void draw().catch(report));
  await draw();
  every(10_000, draw);
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

// ---- start ----

configure({ h, fill, api, ApiError, canWrite, writeButton, stateBadge, when, show });

$('signin-form').addEventListener('submit', (ev) => void signIn(ev));
$('signout').addEventListener('click', () => signOut('Signed out.'));
for (const b of document.querySelectorAll('.tab')) b.addEventListener('click', () => show(b.dataset.view));
