/**
 * Matches a method and path to a route; tells apart "no such path" (404) and "wrong method" (405).
 * The first route that matches wins, so order matters: routes/index.ts lists them and says how.
 */
import type { Route } from './types.ts';

interface Compiled {
  route: Route;
  segments: string[];
  prefix: boolean;
}

export type Match =
  | { kind: 'route'; route: Route; params: Record<string, string> }
  | { kind: 'not-found' }
  | { kind: 'method'; allow: string[] };

/** Static paths remembered per method: their number is bounded by the routes, unlike paths with ids. */
const MEMO_LIMIT = 1024;

export class Router {
  private readonly compiled: Compiled[] = [];
  /**
   * "METHOD path" -> the route it matched, for matches that took no parameter from the path (a
   * static route). Such a path always matches the same way (the routes do not change once served),
   * so the scan over every route is paid once per path; paths with ids, 404s and 405s are not kept.
   */
  private readonly staticMatches = new Map<string, Route>();

  add(routes: Route[]): void {
    this.staticMatches.clear();
    for (const route of routes) {
      const prefix = route.pattern.endsWith('/*');
      const segments = (prefix ? route.pattern.slice(0, -2) : route.pattern).split('/').filter(Boolean);
      this.compiled.push({ route, segments, prefix });
    }
  }

  match(method: string, path: string): Match {
    const key = `${method} ${path}`;
    const known = this.staticMatches.get(key);
    if (known) return { kind: 'route', route: known, params: {} };
    const m = this.scan(method, path);
    if (m.kind === 'route' && isEmpty(m.params) && this.staticMatches.size < MEMO_LIMIT)
      this.staticMatches.set(key, m.route);
    return m;
  }

  private scan(method: string, path: string): Match {
    const parts = path.split('/').filter(Boolean);
    const allow = new Set<string>();
    for (const c of this.compiled) {
      const params = matchSegments(c, parts);
      if (!params) continue;
      if (c.route.method === method || c.route.method === '*' || (method === 'HEAD' && c.route.method === 'GET')) {
        return { kind: 'route', route: c.route, params };
      }
      allow.add(c.route.method);
      if (c.route.method === 'GET') allow.add('HEAD');
    }
    return allow.size > 0 ? { kind: 'method', allow: [...allow].sort() } : { kind: 'not-found' };
  }
}

function isEmpty(o: Record<string, string>): boolean {
  for (const _ in o) return false;
  return true;
}

function matchSegments(c: Compiled, parts: string[]): Record<string, string> | null {
  if (c.prefix ? parts.length < c.segments.length : parts.length !== c.segments.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < c.segments.length; i++) {
    const s = c.segments[i];
    if (s.startsWith(':')) {
      try {
        params[s.slice(1)] = decodeURIComponent(parts[i]);
      } catch {
        return null;
      }
    } else if (s !== parts[i]) return null;
  }
  if (c.prefix) params['*'] = parts.slice(c.segments.length).join('/');
  return params;
}
