/**
 * The tenant console (`/console`, docs/console.md): static files from console/, read once at
 * start-up and served without a token (the page signs in with the tenant's client credentials
 * and calls the public API, nothing else). Only the files listed here exist; every other name
 * under /console is a 404. Every answer carries a strict Content-Security-Policy (scripts and
 * styles from this origin only, no inline code, no framing) and `nosniff`.
 */
import { readFileSync } from 'node:fs';
import { SluiceError } from '../../core/errors.ts';
import { KNOWN_EVENT_KINDS } from '../../core/webhooks/records.ts';
import { RESERVED_FAMILIES } from '../../core/webhooks/deliveries.ts';
import type { Reply, Route } from '../types.ts';
import { projectPath } from '../../core/paths.ts';

export const CONSOLE_DIR = `${projectPath('console')}/`;

const JS = 'text/javascript; charset=utf-8';

/** The page, its style and its ES modules (app.js imports the others; see its opening comment). */
const FILES: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'style.css': 'text/css; charset=utf-8',
  'app.js': JS,
  'dom.js': JS,
  'session.js': JS,
  'nav.js': JS,
  'view-endpoints.js': JS,
  'view-endpoint.js': JS,
  'view-dlq.js': JS,
  'view-activity.js': JS,
  'endpoints.js': JS,
  'endpoint-form.js': JS,
  'filter-field.js': JS,
  'forms.js': JS,
  'recovery.js': JS,
};

/**
 * `kinds.js`, made from the server's own lists so the console never keeps a copy: the kinds an
 * endpoint may subscribe to besides its tenant's types, and the families only Sluice sends.
 */
export const KINDS_MODULE =
  `export const BUILT_IN_KINDS = ${JSON.stringify(KNOWN_EVENT_KINDS.filter((k) => k !== 'ping'))};\n` +
  `export const RESERVED_FAMILIES = ${JSON.stringify(RESERVED_FAMILIES)};\n`;

export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export const CONSOLE_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cache-control': 'no-cache',
};

export function consoleRoutes(dir = CONSOLE_DIR): Route[] {
  const replies = new Map<string, Reply>();
  for (const [name, type] of Object.entries(FILES)) {
    replies.set(name, {
      status: 200,
      headers: { ...CONSOLE_HEADERS, 'content-type': type },
      body: readFileSync(`${dir}${name}`),
    });
  }
  replies.set('kinds.js', {
    status: 200,
    headers: { ...CONSOLE_HEADERS, 'content-type': JS },
    body: Buffer.from(KINDS_MODULE),
  });
  const file = (name: string): Reply => {
    const reply = replies.get(name);
    if (!reply) throw new SluiceError('NOT_FOUND', `the console has no file "${name}"`);
    return reply;
  };
  return [
    { method: 'GET', pattern: '/console', scope: null, body: 'none', handler: () => file('index.html') },
    // `*` is the canonical rest of the path (ingress/canonical-path.ts): no dot segments, no encoded slashes.
    { method: 'GET', pattern: '/console/*', scope: null, body: 'none', handler: (req) => file(req.params['*']) },
  ];
}
