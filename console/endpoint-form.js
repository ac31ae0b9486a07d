// The endpoint form of the Sluice tenant console (register and edit): URL, events (the tenant's
// published types offered beside the built-in kinds), the filter (filter-field.js), description,
// limits and ordering.

import { h } from './dom.js';
import { api, writeButton } from './session.js';
import { FormError, problemBox } from './forms.js';
import { BUILT_IN_KINDS, RESERVED_FAMILIES } from './kinds.js';
import { filterField } from './filter-field.js';

/** Sent by Sluice only: not offered for a test send. */
export const isReserved = (type) => type === 'ping' || RESERVED_FAMILIES.includes(type.slice(0, type.indexOf('.')));

export const LIMITS = [
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

// ---- what the tenant publishes: offered when an endpoint's events are chosen ----

/** Pages of event types read at most (1,000 each): the 10,000 a tenant's list holds. */
const EVENT_TYPE_PAGES = 10;

/**
 * The tenant's event types of the last days (GET /v1/webhooks/event-types, every page: the
 * route answers them by name), busiest first. Any failure (a node without the route answers 404)
 * leaves the built-in kinds and free text.
 */
export async function loadEventTypes() {
  try {
    const published = [];
    let windowDays = 7;
    let cursor = null;
    for (let i = 0; i < EVENT_TYPE_PAGES; i++) {
      const query = cursor ? `?limit=1000&cursor=${encodeURIComponent(cursor)}` : '?limit=1000';
      const { data } = await api('GET', `/v1/webhooks/event-types${query}`);
      if (!Array.isArray(data?.data)) throw new Error('not a list of event types');
      published.push(...data.data.filter((t) => typeof t?.type === 'string'));
      windowDays = data.window_days ?? windowDays;
      cursor = data.next_cursor;
      if (!cursor) break;
    }
    published.sort((a, b) => b.count - a.count || (a.type < b.type ? -1 : 1));
    return { published, windowDays, available: true };
  } catch {
    // offered below: the built-in kinds and free text
  }
  return { published: [], windowDays: 7, available: false };
}

export function offeredTypes(types) {
  const offered = new Map();
  for (const t of types.published)
    offered.set(t.type, `${Number(t.count).toLocaleString('en')} in ${types.windowDays} d`);
  for (const k of BUILT_IN_KINDS) if (!offered.has(k)) offered.set(k, 'built in');
  return offered;
}

/**
 * url, events, filter, description, the limits and ordering, filled from `ep` (or empty); read()
 * gives the values; guard(work) runs the request, showing a filter's compile error beside it.
 */
export function endpointForm(id, ep, types, submitLabel) {
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
  const filter = filterField(ep);
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
    filter.field,
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
      filter: filter.value(),
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
  return { form, read, submit: form.querySelector('button[type=submit]'), problem, guard: filter.guard };
}

/** The ping's outcome from the Sluice-Ping-* headers (absent: no ping was sent). */
export function pingOutcome(headers, ep) {
  const result = headers.get('sluice-ping-result');
  if (!result) return null;
  const detail = [headers.get('sluice-ping-status'), headers.get('sluice-ping-error')].filter(Boolean).join(' ');
  return result === 'ok'
    ? `The signed ping was answered ${detail || '2xx'}: ${ep.id} is ${ep.state}.`
    : `The signed ping failed${detail ? ` (${detail})` : ''}: ${ep.id} is ${ep.state}; its deliveries wait until ` +
        'it is verified (Re-verify in the list).';
}
