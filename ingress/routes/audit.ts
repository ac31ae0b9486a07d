/** `GET /v1/audit`: the caller's tenant's compliance-log entries, oldest first, paged by cursor. */
import type { Context } from '../../core/context.ts';
import { invalidRequest } from '../../core/errors.ts';
import { queryInt } from '../../core/validate.ts';
import { auditViewOf } from '../../core/audit/audit-log.ts';
import { json, type Route } from '../types.ts';

function encodeCursor(seq: number): string {
  return Buffer.from(JSON.stringify({ s: seq })).toString('base64url');
}

function decodeCursor(raw: string | null): number {
  if (raw === null || raw === '') return 0;
  try {
    const v = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as { s?: unknown };
    if (Number.isSafeInteger(v.s) && (v.s as number) >= 0) return v.s as number;
  } catch {
    /* fall through */
  }
  throw invalidRequest([{ path: 'query.cursor', message: 'is not a cursor returned by this endpoint' }]);
}

export function auditRoutes(ctx: Context): Route[] {
  const view = auditViewOf(ctx);
  return [
    {
      method: 'GET',
      pattern: '/v1/audit',
      scope: 'audit:read',
      body: 'none',
      handler(req) {
        const limit = queryInt(req.query, 'limit', 100, 1, 1000);
        const after = decodeCursor(req.query.get('cursor'));
        const { data, more } = view.page(req.auth!.claims.tenant_id, after, limit);
        return json(200, { data, next_cursor: more ? encodeCursor(data[data.length - 1].seq) : null });
      },
    },
  ];
}
