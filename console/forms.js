// Form pieces of the Sluice tenant console: a problem+json answer shown beside the form that
// caused it, a submit that disables its button while the request runs, and a signing secret shown
// once. Values from the API go on the page as text (textContent), never as markup.

import { fill, h } from './dom.js';
import { ApiError, canWrite } from './session.js';

export class FormError extends Error {
  constructor(path, message) {
    super(message);
    this.errors = [{ path, message }];
  }
}

/** A problem+json answer (its detail and, for a 400, each field's path and message) or a local fault. */
export function showProblem(el, err) {
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

export function clearProblem(el) {
  el.hidden = true;
  el.replaceChildren();
}

export const problemBox = () => h('div', { class: 'problem', role: 'alert', hidden: true });

/** Runs a form's request with its submit button disabled and its problem shown beside it. */
export async function submitting(button, problem, work) {
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

/** A signing secret, on the page until the tenant says it is stored. */
export function secretOnce(title, secret, ...notes) {
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
