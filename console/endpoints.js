// Endpoint management in the Sluice tenant console (docs/console.md): register an endpoint, edit
// its URL, events, description, limits and ordering, pause and resume it, rotate its secret, delete
// it, and send it a test event. Used by the endpoints view (view-endpoints.js: the register form)
// and the view of one endpoint (view-endpoint.js: its settings and actions). Like every module of
// the console it puts every value from the API on the page as text (textContent), never as markup;
// a signing secret is on the page once, until the tenant dismisses it.

import { fill, h, stateBadge, when } from './dom.js';
import { show } from './nav.js';
import { api, canWrite, writeButton } from './session.js';
import { FormError, clearProblem, problemBox, secretOnce, showProblem, submitting } from './forms.js';
import { LIMITS, endpointForm, isReserved, loadEventTypes, offeredTypes, pingOutcome } from './endpoint-form.js';

/** Elements shown once, on the next render of the endpoint list (a new secret, a deletion). */
let onceOnList = [];

const enc = encodeURIComponent;

// ---- the endpoint list: register ----

const PING_NOTE =
  'Sluice sends the URL a signed ping at once: a 200 within 5 seconds makes the endpoint ACTIVE, ' +
  'anything else PENDING (its deliveries wait until it is verified).';

/** The list's "Register an endpoint" button and form; `reload` renders the list again. */
export function registerSection(reload) {
  const shown = onceOnList;
  onceOnList = [];
  const slot = h('div', { id: 'register-slot' });
  const open = writeButton('Register an endpoint', { id: 'register-open', class: 'primary' });
  if (canWrite())
    open.addEventListener('click', async () => {
      if (slot.firstChild) return void fill(slot);
      open.disabled = true;
      const types = await loadEventTypes();
      open.disabled = false;
      const f = endpointForm('register-form', null, types, 'Register');
      const cancel = h('button', { type: 'button' }, 'Cancel');
      cancel.addEventListener('click', () => fill(slot));
      f.submit.after(cancel);
      f.form.addEventListener('submit', (ev) => {
        ev.preventDefault();
        void submitting(f.submit, f.problem, () =>
          f.guard(async () => {
            const v = f.read();
            const body = { url: v.url, events: v.events };
            if (v.description !== null) body.description = v.description;
            for (const l of LIMITS) if (v[l.name] !== null) body[l.name] = v[l.name];
            if (v.ordering !== 'none') body.ordering = v.ordering;
            if (v.filter !== null) body.filter = v.filter;
            const { data, headers } = await api('POST', '/v1/webhooks/endpoints', body);
            const secret = secretOnce(
              `Registered ${data.id}: its signing secret`,
              data.secret,
              pingOutcome(headers, data),
              'Verify deliveries with it: X-Service-Signature-256, Standard Webhooks headers (docs/webhooks.md).',
            );
            onceOnList = [secret];
            try {
              await reload();
            } catch (err) {
              // Registered all the same: the secret must not be lost with the list.
              onceOnList = [];
              fill(slot, secret, h('p', { class: 'error' }, `The list could not be reloaded: ${err?.message ?? err}`));
            }
          }),
        );
      });
      fill(
        slot,
        h(
          'div',
          { class: 'card' },
          h('h3', {}, 'Register an endpoint'),
          h('p', { class: 'subtle' }, PING_NOTE),
          f.form,
        ),
      );
      f.form.querySelector('input[name=url]').focus();
    });
  return h('div', { class: 'register' }, shown, h('div', { class: 'bar' }, open), slot);
}

/** PAUSED beside the state of an endpoint its tenant paused. */
export function pausedBadge(ep) {
  return ep.disabled ? h('span', { class: 'state state-paused', dataset: { paused: 'true' } }, 'PAUSED') : null;
}

// ---- one endpoint: settings, actions, test send ----

/** The endpoint view's head: its state, settings, actions and test send; it redraws itself on a change. */
export function endpointPanel(initial, types) {
  let ep = initial;
  const head = h('div', { class: 'endpoint-head' });
  const summary = h('dl', { class: 'summary', id: 'endpoint-summary' });
  const settingsBody = h('div');
  const settingsResult = h('p', { id: 'settings-result', role: 'status' });
  const actions = h('div', { class: 'bar', id: 'endpoint-actions' });
  const actionsResult = h('p', { id: 'actions-result', role: 'status' });
  const secretSlot = h('div', { id: 'rotate-secret-slot' });

  const redraw = () => {
    fill(
      head,
      h('h2', {}, 'Endpoint ', h('span', { class: 'mono' }, ep.id), ' ', stateBadge(ep.state), ' ', pausedBadge(ep)),
    );
    const limit = (v, none) => (v === null || v === undefined ? none : String(v));
    fill(
      summary,
      [
        ['URL', ep.url],
        ['Events', ep.events.join(', ')],
        ['Description', ep.description ?? '—'],
        ['Rate limit', limit(ep.rate_limit_per_second, 'none') + (ep.rate_limit_per_second ? ' a second' : '')],
        ['Max in flight', limit(ep.max_in_flight, "Sluice's adaptive limit")],
        ['Ordering', ep.ordering ?? 'none'],
        ep.disabled_reason ? ['Disabled because', `${ep.disabled_reason} (${when(ep.disabled_at)})`] : null,
        ep.previous_secret_expires_at
          ? ['Previous secret', `signs beside the new one until ${when(ep.previous_secret_expires_at)}`]
          : null,
      ]
        .filter(Boolean)
        .map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', {}, v))),
    );
    const f = endpointForm('settings-form', ep, types, 'Save changes');
    f.form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      void submitting(f.submit, f.problem, () => f.guard(() => save(f.read())));
    });
    fill(settingsBody, f.form);
    drawActions();
  };

  const save = async (v) => {
    const changed = {};
    if (v.url !== ep.url) changed.url = v.url;
    const same = v.events.length === ep.events.length && v.events.every((e) => ep.events.includes(e));
    if (!same) changed.events = v.events;
    if (v.description !== (ep.description ?? null)) changed.description = v.description;
    for (const l of LIMITS) if (v[l.name] !== (ep[l.name] ?? null)) changed[l.name] = v[l.name];
    if (v.ordering !== (ep.ordering ?? 'none')) changed.ordering = v.ordering;
    if (v.filter !== (ep.filter ?? null)) changed.filter = v.filter;
    const names = Object.keys(changed);
    if (names.length === 0) {
      settingsResult.textContent = 'Nothing to save: no field changed.';
      return;
    }
    settingsResult.textContent = changed.url ? `Saving; pinging ${changed.url}…` : 'Saving…';
    try {
      const { data, headers } = await api('PATCH', `/v1/webhooks/endpoints/${enc(ep.id)}`, changed);
      ep = data;
      redraw();
      settingsResult.textContent = [`Saved: ${names.join(', ')}.`, pingOutcome(headers, ep)].filter(Boolean).join(' ');
    } catch (err) {
      settingsResult.textContent = '';
      throw err;
    }
  };

  const actionsProblem = problemBox();
  const act = (button, work) =>
    button.addEventListener('click', () => {
      button.disabled = true;
      clearProblem(actionsProblem);
      void work()
        .catch((err) => showProblem(actionsProblem, err))
        .finally(() => {
          button.disabled = false;
        });
    });

  const drawActions = () => {
    const pause = writeButton(ep.disabled ? 'Resume' : 'Pause', { id: ep.disabled ? 'resume' : 'pause' });
    const rotate = writeButton('Rotate secret', { id: 'rotate' });
    const del = writeButton('Delete…', { id: 'delete', class: 'danger' });
    const confirm = h('span', { class: 'confirm', id: 'delete-confirm-bar', hidden: true });
    fill(actions, pause, rotate, del, confirm);
    if (!canWrite()) return;
    act(pause, async () => {
      const disabled = !ep.disabled;
      const { data } = await api('PATCH', `/v1/webhooks/endpoints/${enc(ep.id)}`, { disabled });
      ep = data;
      redraw();
      actionsResult.textContent = disabled
        ? `Paused: ${ep.id} receives nothing; its deliveries wait in Kafka (up to 7 days) until it is resumed.`
        : `Resumed: ${ep.id} gets its waiting deliveries and new ones again.`;
    });
    act(rotate, async () => {
      const { data } = await api('POST', `/v1/webhooks/endpoints/${enc(ep.id)}/rotate-secret`);
      const { secret, ...view } = data;
      ep = view;
      redraw();
      actionsResult.textContent = `Rotated the secret of ${ep.id}.`;
      fill(
        secretSlot,
        secretOnce(
          `The new signing secret of ${ep.id}`,
          secret,
          ep.previous_secret_expires_at
            ? `The previous secret keeps signing beside it until ${when(ep.previous_secret_expires_at)}: ` +
                'move your receiver to the new one before then.'
            : null,
        ),
      );
    });
    del.addEventListener('click', () => {
      const yes = h('button', { type: 'button', id: 'delete-confirm', class: 'danger primary' }, `Delete ${ep.id}`);
      const no = h('button', { type: 'button', id: 'delete-cancel' }, 'Cancel');
      fill(confirm, h('span', { class: 'bad' }, 'It receives nothing more, and this cannot be undone. '), yes, no);
      confirm.hidden = false;
      del.disabled = true;
      no.addEventListener('click', () => {
        fill(confirm);
        confirm.hidden = true;
        del.disabled = false;
      });
      act(yes, async () => {
        await api('DELETE', `/v1/webhooks/endpoints/${enc(ep.id)}`);
        onceOnList = [h('p', { class: 'notice', id: 'deleted', role: 'status' }, `Deleted ${ep.id}.`)];
        show('endpoints');
      });
    });
  };

  redraw();
  return h(
    'div',
    { id: 'endpoint-manage' },
    head,
    summary,
    actions,
    actionsProblem,
    actionsResult,
    secretSlot,
    h('details', { class: 'card', id: 'settings' }, h('summary', {}, 'Edit settings'), settingsBody, settingsResult),
    h(
      'details',
      { class: 'card', id: 'test-send' },
      h('summary', {}, 'Send a test event'),
      testForm(() => ep, types),
    ),
  );
}

/** POST …/test: a signed ping or event of the given type, outside the queue; shows what the receiver answered. */
function testForm(current, types) {
  const listId = 'test-types';
  const type = h('input', { name: 'type', placeholder: 'ping', list: listId, maxlength: 65, spellcheck: 'false' });
  const data = h('textarea', { name: 'data', rows: 4, spellcheck: 'false', placeholder: '{"order_id": "o-123"}' });
  const submit = writeButton('Send', { type: 'submit', class: 'primary' });
  const problem = problemBox();
  const result = h('div', { id: 'test-result', role: 'status' });
  const form = h(
    'form',
    { id: 'test-form', novalidate: true, autocomplete: 'off' },
    h(
      'p',
      { class: 'subtle' },
      'Sent at once, signed like a delivery, whatever the endpoint state; not queued, retried or recorded.',
    ),
    h(
      'datalist',
      { id: listId },
      h('option', { value: 'ping' }),
      [...offeredTypes(types).keys()].filter((t) => !isReserved(t)).map((t) => h('option', { value: t })),
    ),
    h(
      'div',
      { class: 'grid' },
      h('label', {}, 'Type ', h('span', { class: 'hint' }, 'empty: a ping'), type),
      h('label', { class: 'wide' }, 'Data ', h('span', { class: 'hint' }, 'JSON; empty: the default'), data),
    ),
    h('div', { class: 'bar' }, submit),
    problem,
    result,
  );
  const button = form.querySelector('button[type=submit]');
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    void submitting(button, problem, async () => {
      const body = {};
      if (type.value.trim()) body.type = type.value.trim();
      if (data.value.trim()) {
        try {
          body.data = JSON.parse(data.value);
        } catch (err) {
          throw new FormError('$.data', `is not JSON: ${err.message}`);
        }
      }
      const ep = current();
      fill(result, h('p', { class: 'subtle' }, `Sending to ${ep.url}…`));
      try {
        const { data: r } = await api(
          'POST',
          `/v1/webhooks/endpoints/${enc(ep.id)}/test`,
          Object.keys(body).length > 0 ? body : undefined,
        );
        fill(result, testResult(r, body.type ?? 'ping'));
      } catch (err) {
        fill(result);
        throw err;
      }
    });
  });
  return form;
}

function testResult(r, type) {
  return h(
    'div',
    { class: 'test-result', dataset: { ok: String(r.ok), status: String(r.status ?? '') } },
    h(
      'p',
      { class: 'test-summary' },
      h('strong', { class: r.ok ? 'ok' : 'bad' }, r.ok ? 'ok' : 'failed'),
      ` · ${type} · status `,
      h('span', { class: 'test-status' }, r.status === null ? 'no answer' : String(r.status)),
      ` · ${r.latency_ms} ms`,
    ),
    r.error ? h('p', { class: 'bad test-error' }, r.error) : null,
    r.body === null
      ? null
      : [h('div', { class: 'subtle' }, 'Body (the first 1 KiB, as text)'), h('pre', { class: 'body' }, r.body)],
  );
}
