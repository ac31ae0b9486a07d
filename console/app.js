// The Sluice tenant console (docs/console.md). Plain JavaScript ES modules, no build step, no inline
// code (the page's Content-Security-Policy allows scripts from this origin only). It signs in with
// the tenant's client credentials and uses the public API. This module signs in and wires the
// views; the others:
//   dom.js             elements, SVG and formats (values reach the page as text, never as markup)
//   session.js         the token (in memory only), API calls, timers, the notice line
//   nav.js             which view is on show
//   view-endpoints.js  the endpoint list        view-endpoint.js  one endpoint's deliveries
//   view-dlq.js        the dead letters         view-activity.js  the last hour's charts
//   endpoints.js       endpoint management: register, edit, pause, rotate, delete, test send
//   endpoint-form.js   the register/edit form   filter-field.js  its CEL filter, compile error, try it
//   forms.js           problem answers beside a form, busy buttons, a secret shown once
//   recovery.js        recovery of a window of failed deliveries, with its progress

import { $ } from './dom.js';
import { defineViews, show } from './nav.js';
import { session, signOut } from './session.js';
import { renderActivity } from './view-activity.js';
import { renderDlq } from './view-dlq.js';
import { renderEndpoint } from './view-endpoint.js';
import { renderEndpoints } from './view-endpoints.js';

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

defineViews({ endpoints: renderEndpoints, endpoint: renderEndpoint, dlq: renderDlq, activity: renderActivity });

$('signin-form').addEventListener('submit', (ev) => void signIn(ev));
$('signout').addEventListener('click', () => signOut('Signed out.'));
for (const b of document.querySelectorAll('.tab')) b.addEventListener('click', () => show(b.dataset.view));
