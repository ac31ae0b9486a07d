// Building the console's page (docs/console.md): elements, SVG, and the formats every view shows.
// Every value from the API reaches the page as text (textContent), never as markup: h() sets
// attributes and text, never innerHTML, and no on* attribute.

export const $ = (id) => document.getElementById(id);
const SVG = 'http://www.w3.org/2000/svg';

/** An element with attributes (on* never used) and children (strings become text nodes). */
export function h(tag, attrs = {}, ...children) {
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

/** A table: one head row of `headings`, then `rows` (tr elements) in its body. */
export function table(attrs, headings, rows) {
  const cells = headings.map((x) => h('th', {}, x));
  return h('table', attrs, h('thead', {}, h('tr', {}, cells)), h('tbody', {}, rows));
}

/** Replaces an element's children; arrays among them are flattened, empty values skipped. */
export function fill(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

/** An SVG element (charts and timelines) with attributes and children. */
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

/** An ISO time as `YYYY-MM-DD HH:MM:SSZ`; a dash when there is none. */
export const when = (iso) => (iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '—');
/** A rate in 0..1 as a percentage; a dash when there is none. */
export const pct = (r) => (r === null || r === undefined ? '—' : `${(r * 100).toFixed(r === 1 || r === 0 ? 0 : 1)} %`);

/** How far an ISO time is from now: `in 3 d`, `5 min ago`. */
export function relative(iso) {
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

/** An endpoint's state as a badge (its class names the state). */
export function stateBadge(state) {
  const cls = `state state-${String(state)
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '')}`;
  return h('span', { class: cls, dataset: { state } }, state);
}
