// Which view of the console is on show: the tabs, and each view's render function (registered by
// app.js, so the views can move between each other without importing each other).

import { $ } from './dom.js';
import { report, stopTimers } from './session.js';

const views = {};
const NAMES = ['endpoints', 'endpoint', 'dlq', 'activity'];

/** `{ endpoints, endpoint, dlq, activity }`: each an async function drawing its section. */
export function defineViews(renderers) {
  Object.assign(views, renderers);
}

/** Shows one view (the others hidden), drawn afresh; `arg` is the view's own (an endpoint id). */
export function show(view, arg) {
  stopTimers();
  $('notice').hidden = true;
  for (const b of document.querySelectorAll('.tab'))
    b.classList.toggle('active', b.dataset.view === (view === 'endpoint' ? 'endpoints' : view));
  for (const v of NAMES) $(`view-${v}`).hidden = v !== view;
  void views[view](arg).catch(report);
}
