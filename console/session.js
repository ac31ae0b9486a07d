// The signed-in session of the console (docs/console.md): the token lives in this module's memory
// only (never localStorage, sessionStorage or cookies); the API calls made with it; what a token
// without webhooks:write may not do; the timers of the view on show and how a failure is reported.

import { $, h } from './dom.js';

export const session = { token: null, scopes: new Set(), tenant: '', expiresAt: 0 };
const timers = new Set();
const WRITE = 'webhooks:write';

export const canWrite = () => session.scopes.has(WRITE);
const whyNot = () => `needs the ${WRITE} scope; this token carries: ${[...session.scopes].join(' ') || '(none)'}`;

/** A button that is disabled, saying why, when the token lacks webhooks:write. */
export function writeButton(label, attrs = {}) {
  const ok = canWrite();
  const b = h('button', { type: 'button', ...attrs, disabled: !ok, title: ok ? null : whyNot() }, label);
  return ok ? b : h('span', {}, b, h('span', { class: 'why' }, `${label} ${whyNot()}`));
}

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.detail ?? body?.error_description ?? `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

/** A call of the public API with the session's token; a failure throws an ApiError (a 401 signs out too). */
export async function api(method, path, body) {
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

/** Forgets the token and shows the sign-in form with `message`; the promise it returns never settles. */
export function signOut(message = '') {
  Object.assign(session, { token: null, scopes: new Set(), tenant: '', expiresAt: 0 });
  stopTimers();
  $('app').hidden = true;
  $('signout').hidden = true;
  $('who').textContent = '';
  $('signin').hidden = false;
  $('signin-error').textContent = message;
  return new Promise(() => {}); // the caller's work ends here
}

/** Stops the timers of the view on show (every view change and the sign-out stop them). */
export function stopTimers() {
  for (const t of timers) clearInterval(t);
  timers.clear();
}

/** Runs `fn` every `ms` until the view changes; a failure is reported, not thrown. */
export function every(ms, fn) {
  const t = setInterval(() => void fn().catch(report), ms);
  timers.add(t);
}

/** Shows a failure in the notice line above the views. */
export function report(err) {
  const n = $('notice');
  n.hidden = false;
  n.textContent =
    err instanceof ApiError ? `The API answered ${err.status}: ${err.message}` : String(err?.message ?? err);
}
