/**
 * The admin port of a node with workers: the primary serves SLUICE_ADMIN_PORT for the whole node
 * (a Prometheus job pointed at it sees every worker, not one at random), and worker i keeps its own
 * on SLUICE_ADMIN_PORT + 1 + i for debugging.
 * - `/metrics`: every worker's page, series of the same name and labels summed (counters, gauges,
 *   histogram buckets, sums and counts all add up across processes);
 * - `/healthz`, `/readyz`: 200 when every worker that serves the node answers 200 (and one does),
 *   with each worker's answer. With `--workers auto` a worker serves once it is up and until it is
 *   retired (primary.ts).
 */
import { createServer } from 'node:http';
import { adminUrl, sendProblem } from '../ingress/admin-server.ts';

/** Series whose value is not a quantity: the workers' largest is kept, not their sum. */
const NOT_SUMMED = /^(process_start_time_seconds|nodejs_version_info)\b/;

/**
 * Sums Prometheus text pages series by series. The text format keeps a family's lines together, so
 * the output goes family by family (in first-seen order): its HELP and TYPE lines once, then its
 * series. A series joins the family of its name, or of its name without a histogram's suffix (a
 * retired worker's page has no comment lines to say so), else starts its own.
 */
export function mergeMetrics(pages: string[]): string {
  const families = new Map<string, { comments: string[]; keys: string[] }>();
  const values = new Map<string, number>();
  const family = (name: string) => {
    const known = families.get(name) ?? families.get(name.replace(/_(bucket|sum|count)$/, ''));
    if (known) return known;
    const made = { comments: [], keys: [] };
    families.set(name, made);
    return made;
  };
  for (const page of pages) {
    for (const line of page.split('\n')) {
      if (line === '') continue;
      if (line.startsWith('#')) {
        const f = family(line.split(' ')[2] ?? '');
        if (!f.comments.includes(line)) f.comments.push(line);
        continue;
      }
      const cut = line.lastIndexOf(' ');
      const key = line.slice(0, cut);
      const v = Number(line.slice(cut + 1));
      const seen = values.get(key);
      if (seen === undefined) {
        family(/^[^{ ]+/.exec(key)?.[0] ?? key).keys.push(key);
        values.set(key, v);
      } else values.set(key, NOT_SUMMED.test(key) ? Math.max(seen, v) : seen + v);
    }
  }
  const out = [...families.values()].flatMap((f) => [...f.comments, ...f.keys.map((k) => `${k} ${values.get(k)}`)]);
  return `${out.join('\n')}\n`;
}

async function fetchText(url: string): Promise<{ status: number; text: string }> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
    return { status: res.status, text: await res.text() };
  } catch (err) {
    return { status: 0, text: (err as Error).message };
  }
}

/**
 * The counters and histograms of a page, without its gauges: what a retired worker adds to the node's
 * sums for good, so that a counter summed over the workers never falls when one retires (Prometheus
 * would read a fall as a reset).
 */
export function countersOnly(page: string): string {
  const kinds = new Map<string, string>();
  for (const m of page.matchAll(/^# TYPE (\S+) (\S+)$/gm)) kinds.set(m[1], m[2]);
  const kindOf = (series: string) => {
    const name = /^[^{ ]+/.exec(series)?.[0] ?? '';
    return kinds.get(name) ?? kinds.get(name.replace(/_(bucket|sum|count)$/, ''));
  };
  return page
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#') && ['counter', 'histogram'].includes(kindOf(line) ?? ''))
    .join('\n');
}

/** Which workers the node's admin port speaks for, as the primary knows them when a request comes. */
export interface AggregateMembers {
  /** The admin ports whose health is the node's; none: the node is not ready. */
  health: number[];
  /** The admin ports whose pages are summed; a `retiring` one that no longer answers gives its last page. */
  metrics: { port: number; retiring: boolean }[];
  /** Pages added as they are: retired workers' counters and the primary's own series. */
  extra: string[];
}

const ROUTES = 'admin routes: /healthz, /readyz, /metrics (worker i: its own on this port + 1 + i)';

/**
 * Serves the node's admin port from the primary, for the workers `members()` names when each request
 * comes (one snapshot a request: a worker's final page and its scrape are never both counted).
 * `lastPage(p)`: the last page scraped from admin port p; `forget(p)`: its worker is gone.
 */
export function startAggregateAdmin(
  host: string,
  port: number,
  members: () => AggregateMembers,
): Promise<{ close(): Promise<void>; lastPage(port: number): string | undefined; forget(port: number): void }> {
  const lastPages = new Map<number, string>();
  const scrape = async ({ port: p, retiring }: { port: number; retiring: boolean }) => {
    const page = await fetchText(adminUrl(host, p, '/metrics'));
    if (page.status === 200) lastPages.set(p, page.text);
    else if (retiring) return { status: 200, text: lastPages.get(p) ?? '' };
    return page;
  };
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/metrics') {
      const now = members();
      void Promise.all(now.metrics.map(scrape)).then((pages) => {
        const missing = pages.findIndex((p) => p.status !== 200);
        if (missing >= 0) {
          const why = pages[missing].status || pages[missing].text;
          const worker = now.metrics[missing].port - port - 1;
          sendProblem(res, 503, 'Unavailable', 'UNAVAILABLE', `worker ${worker} did not answer /metrics (${why})`);
          return;
        }
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
        res.end(mergeMetrics([...pages.map((p) => p.text), ...now.extra]));
      });
    } else if (path === '/healthz' || path === '/readyz') {
      const ports = members().health;
      void Promise.all(ports.map((p) => fetchText(adminUrl(host, p, path)))).then((answers) => {
        const ok = answers.length > 0 && answers.every((a) => a.status === 200);
        const workers = answers.map((a) => {
          try {
            return JSON.parse(a.text) as unknown;
          } catch {
            return { status: 'unreachable', error: a.text };
          }
        });
        res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ status: ok ? 'ok' : 'unavailable', ready: ok, workers }));
      });
    } else sendProblem(res, 404, 'Not found', 'NOT_FOUND', ROUTES);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () =>
      resolve({
        close: () => new Promise<void>((r) => server.close(() => r())),
        lastPage: (p) => lastPages.get(p),
        forget: (p) => lastPages.delete(p),
      }),
    );
  });
}
