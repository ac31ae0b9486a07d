// The filter field of the endpoint form: a CEL expression over type, data and metadata
// (docs/webhooks.md, "Payload filters"), the server's compile error shown beside it, and a "try it"
// box that evaluates the filter on a sample event (POST /v1/webhooks/filters/test) before saving.

import { h } from './dom.js';
import { ApiError, api, writeButton } from './session.js';

const SAMPLE = '{"type": "order.created", "data": {"total": 150}}';

/** The compile error of a 400 about the filter, or null. */
function filterFault(err) {
  if (!(err instanceof ApiError) || !Array.isArray(err.body?.errors)) return null;
  const e = err.body.errors.find((x) => x?.path === '$.filter');
  return e ? String(e.message ?? '') : null;
}

/** The field filled from `ep`; value() gives the filter (null when empty); guard(work) shows its errors beside it. */
export function filterField(ep) {
  const input = h('textarea', {
    name: 'filter',
    rows: 2,
    maxlength: 4096,
    spellcheck: 'false',
    placeholder: 'e.g. type == "order.created" && data.total > 100 (empty: every event of the types above)',
  });
  input.value = ep?.filter ?? '';
  const error = h('div', { id: 'filter-error', class: 'filter-error', role: 'alert', hidden: true });
  const show = (message) => {
    error.textContent = message ?? '';
    error.hidden = !message;
  };
  const sample = h('textarea', { name: 'filter_sample', rows: 2, spellcheck: 'false' });
  sample.value = SAMPLE;
  const verdict = h('span', { id: 'filter-verdict', class: 'subtle', role: 'status' });
  const tryIt = writeButton('Try it', { type: 'button', id: 'filter-try' });
  tryIt.addEventListener('click', async () => {
    show(null);
    verdict.textContent = '';
    let event;
    try {
      event = JSON.parse(sample.value);
    } catch {
      verdict.textContent = 'The sample is not JSON: {"type": …, "data": …}';
      return;
    }
    if (input.value.trim() === '') {
      verdict.textContent = 'No filter: every event of the chosen types is delivered.';
      return;
    }
    tryIt.disabled = true;
    try {
      const { data } = await api('POST', '/v1/webhooks/filters/test', { filter: input.value, event });
      verdict.textContent = data.error
        ? `Not delivered: the evaluation failed (${data.error})`
        : data.matched
          ? 'Delivered: the filter is true for this event.'
          : 'Not delivered: the filter is false for this event.';
    } catch (err) {
      const fault = filterFault(err);
      if (fault !== null) show(fault);
      else verdict.textContent = String(err.message ?? err);
    } finally {
      tryIt.disabled = false;
    }
  });
  const field = h(
    'div',
    { class: 'filter-field' },
    h('label', {}, 'Filter ', h('span', { class: 'hint' }, 'CEL over type, data and metadata; empty for none'), input),
    error,
    h(
      'details',
      { id: 'filter-try-box' },
      h('summary', {}, 'Try the filter on a sample event'),
      h('label', {}, 'Sample event ', h('span', { class: 'hint' }, '{"type": …, "data": …}'), sample),
      h('div', { class: 'bar' }, tryIt, verdict),
    ),
  );
  return {
    field,
    value: () => (input.value.trim() === '' ? null : input.value),
    /** Runs `work`; a 400 about the filter is shown beside it too. */
    async guard(work) {
      show(null);
      try {
        return await work();
      } catch (err) {
        const fault = filterFault(err);
        if (fault !== null) show(fault);
        throw err;
      }
    },
  };
}
