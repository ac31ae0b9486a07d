/** `GET /v1/audit`: the caller's tenant's compliance-log entries, oldest first, paged by cursor. */
import type { AuditView } from '../../core/audit/audit-view.ts';
import { json, type Route } from '../types.ts';
import { encodeCursor, readCursor } from '../../core/paging.ts';

export function auditRoutes(view: AuditView): Route[] {
  return [
    {
      method: 'GET',
      pattern: '/v1/audit',
      scope: 'audit:read',
      body: 'none',
      handler(req) {
        const limit = req.queryValues.limit as number;
        const after = readCursor(req.query)?.key ?? 0;
        const { data, more } = view.page(req.auth!.claims.tenant_id, after, limit);
        return json(200, { data, next_cursor: more ? encodeCursor({ key: data[data.length - 1].seq, id: '' }) : null });
      },
    },
  ];
}
