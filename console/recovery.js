// Recovery of a time window on the endpoint view: re-send the endpoint's failed (dead-lettered)
// deliveries whose last attempt lies in the window, as a paced job, with a progress bar that follows
// it (POST/GET /v1/webhooks/endpoints/{id}/recover, docs/webhooks.md "Recovering a window").

import { h } from './dom.js';
import { clearProblem, problemBox, showProblem } from './forms.js';
import { api, canWrite, every, writeButton } from './session.js';

const enc = encodeURIComponent;
const HOUR = 3600_000;

/** `YYYY-MM-DDTHH:MM:SS` in local time, what a datetime-local input holds. */
function localInput(ms) {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60_000);
  return d.toISOString().slice(0, 19);
}

/** A datetime-local value (local time) as an ISO instant; null when empty. */
function isoOf(value) {
  if (!value) return null;
  const ms = new Date(value).getTime();
  return Number.isFinite(ms) ? new Date(ms).toISOString() : value;
}

export function recoverySection(ep) {
  const since = h('input', {
    id: 'recover-since',
    type: 'datetime-local',
    step: 1,
    value: localInput(Date.now() - 24 * HOUR),
  });
  const until = h('input', { id: 'recover-until', type: 'datetime-local', step: 1 });
  const start = writeButton('Recover failed deliveries', { id: 'recover-start', class: 'primary' });
  const bar = h('progress', { id: 'recover-progress', max: 1, value: 0, hidden: true });
  const status = h('span', { id: 'recover-status', role: 'status' });
  const problem = problemBox();
  let watching = null;

  const draw = (job) => {
    bar.hidden = false;
    bar.max = Math.max(1, job.found);
    bar.value = job.sent;
    status.textContent =
      `${job.state}: sent ${job.sent} of ${job.found} · delivered ${job.delivered} · failed ${job.failed}` +
      (job.state === 'running' ? ` · at most ${job.rate_per_second} a second` : '') +
      (job.error ? ` (${job.error})` : '');
    status.dataset.state = job.state;
  };

  if (canWrite())
    start.addEventListener('click', () => {
      start.disabled = true;
      clearProblem(problem);
      const body = { since: isoOf(since.value) };
      if (until.value) body.until = isoOf(until.value);
      void api('POST', `/v1/webhooks/endpoints/${enc(ep.id)}/recover`, body)
        .then(({ data }) => {
          watching = data;
          draw(data);
        })
        .catch((err) => showProblem(problem, err))
        .finally(() => {
          start.disabled = false;
        });
    });

  // Follows the job until it ends (also the delivered count, which grows after the last send).
  every(1000, async () => {
    if (!watching) return;
    const { data } = await api('GET', `/v1/webhooks/endpoints/${enc(ep.id)}/recover/${enc(watching.id)}`);
    draw(data);
    if (data.state !== 'running' && data.delivered + data.failed >= data.sent) watching = null;
  });

  return h(
    'section',
    { id: 'recover' },
    h('h3', {}, 'Recover a window'),
    h(
      'p',
      { class: 'subtle' },
      'Re-sends every dead-lettered delivery of this endpoint whose last attempt lies in the window, once each, ' +
        'with a fresh attempt count, at a pace that leaves its live deliveries their capacity.',
    ),
    h('div', { class: 'filters' }, h('label', {}, 'Since', since), h('label', {}, 'Until (empty: now)', until)),
    h('div', { class: 'bar' }, start, bar, status),
    problem,
  );
}
