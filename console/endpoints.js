// Endpoint management in the Sluice tenant console (docs/console.md): register an endpoint, edit
// its URL, events, description, limits and ordering, pause and resume it, rotate its secret, delete
// it, and send it a test event. Used by the endpoints view (view-endpoints.js: the register form)
// and the view of one endpoint (view-endpoint.js: its settings and actions). Like every module of
// the console it puts every value from the API on the page as text (textContent), never as markup;
// a signing secret is on the page once, until the tenant dismisses it.

import { fill, h, stateBadge, when } from './dom.js';
import { show } from './nav.js';
import { ApiError, api, canWrite, writeButton } from './session.js';

/** The kinds an endpoint may subscribe to besides its tenant's own types (KNOWN_EVENT_KINDS but `ping`). */
const BUILT_IN_KINDS = [
  'inference.completed',
  'inference.failed',
  'pipeline.started',
  'pipeline.completed',
  'pipeline.failed',
  'telemetry.exported',
  'credential.rotated',
  'credential.revoked',
  'endpoint.disabled',
];
/** Sent by Sluice only: not offered for a test send. */
const RESERVED = /^(credential|endpoint|sluice)\./;

const LIMITS = [
  {
    name: 'rate_limit_per_second',
    label: 'Rate limit (deliveries a second)',
    max: 10_000,
    hint: '1 to 10,000, the whole cluster together; empty: no limit',
  },
  {
    name: 'max_in_flight',
    label: 'Max in flight',
    max: 1000,
    hint: "1 to 1,000 requests open at once; empty: Sluice's own adaptive limit",
  },
];

/** Elements shown once, on the next render of the endpoint list (a new secret, a deletion). */
let onceOnList = [];

const enc = encodeURIComponent;

// ---- what the tenant publishes: offered when an endpoint's events are chosen ----

/**
 * The tenant's event types of the last days (GET /v1/webhooks/event-types), busiest first. Any
 * failure (a node without the route answers 404) leaves the built-in kinds and free text.
 */
export async function loadEventTypes() {
  try {
    const { data } = await api('GET', '/v1/webhooks/event-types');
    if (Array.isArray(data?.data))
      return {
        published: data.data.filter((t) => typeof t?.type === 'string'),
        windowDays: data.window_days ?? 7,
        available: true,
      };
  } catch {
    // offered below: the built-in kinds and free text
  }
  return { published: [], windowDays: 7, available: false };
}

function offeredTypes(types) {
  const offered = new Map();
  for (const t of types.published)
    offered.set(t.type, `${Number(t.count).toLocaleString('en')} in ${types.windowDays} d`);
  for (const k of BUILT_IN_KINDS) if (!offered.has(k)) offered.set(k, 'built in');
  return offered;
}

// ---- errors next to the form that caused them ----

class FormError extends Error {
  constructor(path, message) {
    super(message);
    this.errors = [{ path, message }];
  }
}

/** A problem+json answer (its detail and, for a 400, each field's path and message) or a local fault. */
function showProblem(el, err) {
  let head;
  let errors = [];
  if (err instanceof ApiError) {
    const body = err.body ?? {};
    if (Array.isArray(body.errors)) errors = body.errors;
    const detail = String(body.detail ?? err.message);
    // A 400's detail often only repeats its field errors, which are listed below it.
    const repeats = errors.length > 0 && errors.every((e) => detail.includes(String(e.message)));
    head = `${err.status}${body.title ? ` ${body.title}` : ''}${repeats ? ':' : `: ${detail}`}`;
  } else if (err instanceof FormError) {
    head = 'Not sent:';
    errors = err.errors;
  } else head = String(err?.message ?? err);
  fill(
    el,
    h('div', { class: 'problem-detail' }, head),
    errors.length > 0
      ? h(
          'ul',
          { class: 'field-errors' },
          errors.map((e) => h('li', {}, h('code', {}, String(e.path ?? '')), ' ', String(e.message ?? ''))),
        )
      : null,
  );
  el.hidden = false;
}

function clearProblem(el) {
  el.hidden = true;
  el.replaceChildren();
}

const problemBox = () => h('div', { class: 'problem', role: 'alert', hidden: true });

/** Runs a form's request with its submit button disabled and its problem shown beside it. */
async function submitting(button, problem, work) {
  clearProblem(problem);
  button.disabled = true;
  try {
    await work();
  } catch (err) {
    showProblem(problem, err);
  } finally {
    button.disabled = !canWrite();
  }
}

// ---- the endpoint form: register and edit ----

/** url, events, description, the limits and ordering, filled from `ep` (or empty); read() gives the values. */
function endpointForm(id, ep, types, submitLabel) {
  const offered = offeredTypes(types);
  const chosen = new Set(ep?.events ?? []);
  const boxes = [...offered].map(([type, note]) =>
    h(
      'label',
      { class: 'check' },
      h('input', { type: 'checkbox', name: 'event', value: type, checked: chosen.has(type) }),
      h('span', { class: 'mono' }, type),
      h('span', { class: 'subtle' }, note),
    ),
  );
  const url = h('input', {
    name: 'url',
    value: ep?.url ?? '',
    placeholder: 'https://hooks.example.com/sluice',
    maxlength: 2048,
    spellcheck: 'false',
    autocomplete: 'off',
  });
  const other = h('input', {
    name: 'events_other',
    value: (ep?.events ?? []).filter((e) => !offered.has(e)).join(' '),
    placeholder: 'e.g. order.created order.* (or * for every type)',
    spellcheck: 'false',
    autocomplete: 'off',
  });
  const description = h('input', { name: 'description', value: ep?.description ?? '', maxlength: 256 });
  const limits = LIMITS.map((l) => ({
    ...l,
    input: h('input', {
      name: l.name,
      type: 'number',
      min: 1,
      max: l.max,
      step: 1,
      value: ep?.[l.name] ?? '',
      placeholder: 'no limit',
    }),
  }));
  const ordering = h(
    'select',
    { name: 'ordering' },
    h('option', { value: 'none', selected: (ep?.ordering ?? 'none') === 'none' }, 'none: any order, as fast as it can'),
    h('option', { value: 'key', selected: ep?.ordering === 'key' }, 'key: in publish order per ordering key'),
  );
  const submit = writeButton(submitLabel, { type: 'submit', class: 'primary' });
  const problem = problemBox();
  const form = h(
    'form',
    { id, novalidate: true, autocomplete: 'off' },
    h('label', {}, 'URL', url),
    h(
      'fieldset',
      { class: 'checks' },
      h('legend', {}, 'Events'),
      types.available
        ? null
        : h('p', { class: 'subtle wide' }, "The tenant's published types could not be listed: the built-in kinds."),
      boxes,
      h(
        'label',
        { class: 'wide' },
        'Other filters ',
        h('span', { class: 'hint' }, 'space- or comma-separated: a type, a family (order.*) or * for all'),
        other,
      ),
    ),
    h('label', {}, 'Description ', h('span', { class: 'hint' }, 'a note for people; empty for none'), description),
    h(
      'div',
      { class: 'grid' },
      limits.map((l) => h('label', {}, l.label, h('span', { class: 'hint' }, l.hint), l.input)),
      h('label', {}, 'Ordering', h('span', { class: 'hint' }, 'key: a failing delivery holds back its key'), ordering),
    ),
    h('div', { class: 'bar' }, submit),
    problem,
  );
  const read = () => {
    const events = [
      ...[...form.querySelectorAll('input[name=event]:checked')].map((b) => b.value),
      ...other.value.split(/[\s,]+/).filter(Boolean),
    ];
    const values = {
      url: url.value.trim(),
      events: [...new Set(events)],
      description: description.value.trim() === '' ? null : description.value,
      ordering: ordering.value,
    };
    for (const l of limits) {
      const raw = l.input.value.trim();
      const n = Number(raw);
      if (raw !== '' && (!Number.isInteger(n) || n < 1 || n > l.max))
        throw new FormError(`$.${l.name}`, `must be a whole number from 1 to ${l.max}, or empty for none`);
      values[l.name] = raw === '' ? null : n;
    }
    if (values.url === '') throw new FormError('$.url', 'is required');
    if (values.events.length === 0) throw new FormError('$.events', 'choose at least one event type or filter');
    return values;
  };
  return { form, read, submit: form.querySelector('button[type=submit]'), problem };
}

/** The ping's outcome from the Sluice-Ping-* headers (absent: no ping was sent). */
function pingOutcome(headers, ep) {
  const result = headers.get('sluice-ping-result');
  if (!result) return null;
  const detail = [headers.get('sluice-ping-status'), headers.get('sluice-ping-error')].filter(Boolean).join(' ');
  return result === 'ok'
    ? `The signed ping was answered ${detail || '2xx'}: ${ep.id} is ${ep.state}.`
    : `The signed ping failed${detail ? ` (${detail})` : ''}: ${ep.id} is ${ep.state}; its deliveries wait until ` +
        'it is verified (Re-verify in the list).';
}

// ---- a secret, once ----

function secretOnce(title, secret, ...notes) {
  const value = h('code', { id: 'secret-value', class: 'secret-value' }, secret);
  const copy = h('button', { type: 'button', id: 'secret-copy' }, 'Copy');
  const done = h('button', { type: 'button', id: 'secret-done' }, 'I have stored it');
  const status = h('span', { class: 'subtle', role: 'status' });
  const box = h(
    'div',
    { id: 'secret-once', class: 'card secret', role: 'alert' },
    h('h3', {}, title),
    h(
      'p',
      {},
      h('strong', {}, 'Copy it now: it is not shown again.'),
      ' Sluice shows a signing secret only when it is made; if it is lost, rotate the secret.',
    ),
    value,
    h('div', { class: 'bar' }, copy, done, status),
    notes.filter(Boolean).map((n) => h('p', { class: 'subtle' }, n)),
  );
  copy.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(value.textContent);
      status.textContent = 'Copied.';
    } catch {
      getSelection()?.selectAllChildren(value);
      status.textContent = 'Selected: copy it with Ctrl+C (or ⌘C).';
    }
  });
  done.addEventListener('click', () => {
    value.textContent = '';
    box.remove();
  });
  return box;
}

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
        void submitting(f.submit, f.problem, async () => {
          const v = f.read();
          const body = { url: v.url, events: v.events };
          if (v.description !== null) body.description = v.description;
          for (const l of LIMITS) if (v[l.name] !== null) body[l.name] = v[l.name];
          if (v.ordering !== 'none') body.ordering = v.ordering;
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
        });
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
      void submitting(f.submit, f.problem, () => save(f.read()));
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
      [...offeredTypes(types).keys()].filter((t) => !RESERVED.test(t)).map((t) => h('option', { value: t })),
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
