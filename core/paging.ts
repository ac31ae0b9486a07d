/**
 * Keyset paging shared by every list (endpoints, DLQ, audit). A cursor is the position after
 * the last item of a page: its sort key (an integer: a time or a sequence number) and, to break
 * ties, its id — `1732245000000.dlq_ab12`. Clients treat it as opaque; any string of that form
 * is a well-defined position, so a cursor never "expires" and a forged one only skips ahead.
 */
import { invalidRequest } from './errors.ts';

export interface Position {
  key: number;
  id: string;
}

export const CURSOR_PATTERN = /^(\d{1,15})(?:\.([A-Za-z0-9_-]{1,128}))?$/;

export function encodeCursor(p: Position): string {
  return p.id ? `${p.key}.${p.id}` : String(p.key);
}

/** The `cursor` query parameter: null when absent, 400 when empty or not a cursor. */
export function readCursor(query: URLSearchParams): Position | null {
  const raw = query.get('cursor');
  if (raw === null) return null;
  const m = CURSOR_PATTERN.exec(raw);
  if (!m) {
    throw invalidRequest([{ path: 'query.cursor', message: 'must be the next_cursor of a previous page' }]);
  }
  return { key: Number(m[1]), id: m[2] ?? '' };
}

/**
 * One page of `items` (already in (key, id) order): the first `limit` after the cursor, and the
 * cursor of the next page (null on the last one).
 */
export function pageOf<T>(
  items: Iterable<T>,
  position: (item: T) => Position,
  after: Position | null,
  limit: number,
): { data: T[]; next_cursor: string | null } {
  if (Array.isArray(items)) return pageOfSorted(items as T[], position, after, limit);
  const data: T[] = [];
  for (const item of items) {
    const p = position(item);
    if (!isAfter(p.key, p.id, after)) continue;
    if (data.length === limit) return { data, next_cursor: encodeCursor(position(data[data.length - 1])) };
    data.push(item);
  }
  return { data, next_cursor: null };
}

/** True when (key, id) comes after the cursor's position in (key, id) order. */
export function isAfter(key: number, id: string, cursor: Position | null): boolean {
  return cursor === null || key > cursor.key || (key === cursor.key && id > cursor.id);
}

/** pageOf for an array: a binary search to the cursor, so a deep page costs the same as the first. */
function pageOfSorted<T>(
  items: T[],
  position: (item: T) => Position,
  after: Position | null,
  limit: number,
): { data: T[]; next_cursor: string | null } {
  let lo = 0;
  let hi = items.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const p = position(items[mid]);
    if (isAfter(p.key, p.id, after)) hi = mid;
    else lo = mid + 1;
  }
  const data = items.slice(lo, lo + limit);
  const more = lo + limit < items.length;
  return { data, next_cursor: more ? encodeCursor(position(data[data.length - 1])) : null };
}
